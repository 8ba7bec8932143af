/* Telemetry from C: the host's traceparent per agent and per turn, the trace id read from
 * inside a callback, the exporter's status; bad input (NULL, malformed traceparent or
 * tracestate, bad UTF-8) gets a status and a message. The exporter points at a port nothing
 * listens on: the turns must not care (docs/observability.md). And a host that exits right
 * after freeing its last agent still delivers that agent's spans to a collector. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

#define HOST_TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define HOST_PARENT "00-" HOST_TRACE "-00f067aa0ba902b7-01"
#define TURN_TRACE "0af7651916cd43dd8448eb211c80319c"
#define TURN_PARENT "00-" TURN_TRACE "-b7ad6b7169203331-01"

static char *trace_id(agentao_agent *agent) {
    char *id = NULL;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_trace_id(agent, &id, &err), AGENTAO_STATUS_OK);
    char *copy = strdup(id ? id : "");
    agentao_string_free(id);
    return copy;
}

static char *status_json(agentao_agent *agent) {
    char *json = NULL;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_telemetry_status(agent, &json, &err), AGENTAO_STATUS_OK);
    char *copy = strdup(json ? json : "");
    agentao_string_free(json);
    return copy;
}

static void test_without_an_exporter(const char *dir) {
    tu_section("no exporter");
    char *config = tu_config(dir, "{\"text\":\"hi\"}", NULL);
    agentao_agent *agent = tu_agent(config, NULL);
    char *id = trace_id(agent);
    CHECK_STR_EQ(id, "");
    free(id);
    free(tu_chat(agent, "go"));
    id = trace_id(agent);
    CHECK_STR_EQ(id, "");
    free(id);
    char *st = status_json(agent);
    CHECK_CONTAINS(st, "\"enabled\":false");
    free(st);
    /* Checked even so, and accepted. */
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_traceparent(agent, HOST_PARENT, NULL, &err), AGENTAO_STATUS_OK);

    tu_section("bad input");
    CHECK_FAILS_CONTAINING(agentao_agent_set_traceparent(NULL, HOST_PARENT, NULL, &err),
                           AGENTAO_STATUS_NULL_ARGUMENT, "agent");
    CHECK_FAILS_CONTAINING(agentao_agent_set_traceparent(agent, "00-xyz-00f067aa0ba902b7-01", NULL, &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "trace id");
    CHECK_FAILS_CONTAINING(agentao_agent_set_traceparent(agent, "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                                                         NULL, &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "all zeros");
    CHECK_FAILS_CONTAINING(agentao_agent_set_turn_traceparent(agent, NULL, "a=b", &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "needs a traceparent");
    CHECK_FAILS_CONTAINING(agentao_agent_set_turn_traceparent(agent, HOST_PARENT, "no-equals", &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "key=value");
    CHECK_FAILS_CONTAINING(agentao_agent_set_traceparent(agent, "00-\xff\xfe", NULL, &err),
                           AGENTAO_STATUS_INVALID_UTF8, "traceparent");
    char *out = TU_JUNK;
    CHECK_FAILS_CONTAINING(agentao_agent_trace_id(agent, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT, "trace_id_out");
    CHECK_FAILS_CONTAINING(agentao_agent_trace_id(NULL, &out, &err), AGENTAO_STATUS_NULL_ARGUMENT, "agent");
    CHECK(out == NULL);
    CHECK_FAILS_CONTAINING(agentao_agent_telemetry_status(agent, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT, "json_out");
    agentao_agent_free(agent);
    free(config);
}

/* Records the trace id that agentao_agent_trace_id gives inside the turn's emit callback. */
static void remember_trace_id(tu_recorder *rec, const char *event_json) {
    if (!strstr(event_json, "\"type\":\"turn_end\"")) return;
    char **slot = (char **)rec->user;
    agentao_agent *agent = (agentao_agent *)slot[0];
    free(slot[1]);
    slot[1] = trace_id(agent);
}

static void test_with_an_exporter_that_is_down(const char *dir) {
    tu_section("host traceparent");
    /* Port 9 (discard) on loopback: nothing answers; exports fail and are counted. */
    char *config = tu_config(dir, "{\"text\":\"one\"},{\"text\":\"two\"},{\"text\":\"three\"}",
                             "\"telemetry\": {\"endpoint\": \"http://127.0.0.1:9\", \"timeout_ms\": 500}");
    tu_recorder rec;
    tu_recorder_init(&rec);
    char *slot[2] = {NULL, NULL};
    rec.user = slot;
    rec.on_event = remember_trace_id;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_EMIT);
    agentao_agent *agent = tu_agent(config, &t);
    slot[0] = (char *)agent;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_traceparent(agent, HOST_PARENT, "vendor=abc", &err), AGENTAO_STATUS_OK);
    free(tu_chat(agent, "first"));
    CHECK_STR_EQ(slot[1], HOST_TRACE);
    char *id = trace_id(agent);
    CHECK_STR_EQ(id, HOST_TRACE);
    free(id);

    tu_section("per-turn traceparent wins once");
    CHECK_STATUS(agentao_agent_set_turn_traceparent(agent, TURN_PARENT, NULL, &err), AGENTAO_STATUS_OK);
    free(tu_chat(agent, "second"));
    CHECK_STR_EQ(slot[1], TURN_TRACE);
    free(tu_chat(agent, "third"));
    CHECK_STR_EQ(slot[1], HOST_TRACE);

    char *st = status_json(agent);
    CHECK_CONTAINS(st, "\"enabled\":true");
    free(st);
    agentao_agent_free(agent);
    free(slot[1]);
    tu_recorder_destroy(&rec);
    free(config);
}

/* A collector on loopback that answers every OTLP/HTTP POST with 200 and counts the trace
 * exports whose body names the turn's span (protobuf keeps strings as they are). */
typedef struct {
    int listener;
    atomic_int traces_with_turn;
    atomic_int requests;
} collector_t;

static int read_request(int fd, char *buf, size_t cap, size_t *len) {
    size_t have = 0;
    for (;;) {
        char *end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
        if (end) {
            size_t head = (size_t)(end - buf) + 4, body = 0;
            char *cl = memmem(buf, head, "content-length:", 15);
            if (!cl) cl = memmem(buf, head, "Content-Length:", 15);
            if (cl) body = strtoul(cl + 15, NULL, 10);
            if (head + body > cap) return -1;
            while (have < head + body) {
                ssize_t n = read(fd, buf + have, cap - have);
                if (n <= 0) return -1;
                have += (size_t)n;
            }
            *len = head + body;
            return 0;
        }
        if (have == cap) return -1;
        ssize_t n = read(fd, buf + have, cap - have);
        if (n <= 0) return -1;
        have += (size_t)n;
    }
}

static void *collect(void *arg) {
    collector_t *c = arg;
    static char buf[1 << 20];
    int fd;
    while ((fd = accept(c->listener, NULL, NULL)) >= 0) {
        size_t len;
        while (read_request(fd, buf, sizeof buf, &len) == 0) {
            atomic_fetch_add(&c->requests, 1);
            if (strncmp(buf, "POST /v1/traces ", 16) == 0 && memmem(buf, len, "invoke_agent agentao", 20))
                atomic_fetch_add(&c->traces_with_turn, 1);
            static const char ok[] = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
            if (write(fd, ok, sizeof ok - 1) < 0) break;
        }
        close(fd);
    }
    return NULL;
}

/* The child's side: one turn, free, and out at once, as a command-line host does. */
static int free_and_exit(const char *endpoint, const char *dir) {
    /* The interval is far away: only the free can send the spans in time. */
    char *extra = tu_printf("\"telemetry\": {\"endpoint\": \"%s\", \"export_interval_ms\": 600000}", endpoint);
    char *config = tu_config(dir, "{\"text\":\"one\"}", extra);
    agentao_agent *agent = tu_agent(config, NULL);
    free(tu_chat(agent, "first"));
    agentao_agent_free(agent);
    free(config);
    free(extra);
    return atomic_load(&tu_failures) ? 1 : 0;
}

static void test_the_last_free_delivers_the_spans(const char *self, const char *dir) {
    tu_section("spans of the last agent freed reach the collector before the host exits");
    collector_t c = {.listener = socket(AF_INET, SOCK_STREAM, 0)};
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    CHECK(c.listener >= 0);
    CHECK(bind(c.listener, (struct sockaddr *)&addr, sizeof addr) == 0);
    CHECK(listen(c.listener, 16) == 0);
    CHECK(getsockname(c.listener, (struct sockaddr *)&addr, &alen) == 0);
    pthread_t collector;
    CHECK(pthread_create(&collector, NULL, collect, &c) == 0);
    char *endpoint = tu_printf("http://127.0.0.1:%d", ntohs(addr.sin_port));
    /* A new process (this program again): a process with the library's runtime is not forked
     * without an exec. */
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "--free-and-exit", endpoint, dir, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed: status %d", status);
    CHECK_MSG(atomic_load(&c.traces_with_turn) >= 1,
              "no trace export named the turn's span (%d requests in all)", atomic_load(&c.requests));
    shutdown(c.listener, SHUT_RDWR);
    close(c.listener);
    pthread_join(collector, NULL);
    free(endpoint);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--free-and-exit") == 0) return free_and_exit(argv[2], argv[3]);
    test_without_an_exporter(tu_workspace());
    test_with_an_exporter_that_is_down(tu_workspace());
    test_the_last_free_delivers_the_spans(argv[0], tu_workspace());
    return tu_finish("test_telemetry");
}
