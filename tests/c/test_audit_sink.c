/* The audit sink through the C ABI, without a database: a sink whose PostgreSQL is unreachable
 * never slows a turn, counts what it cannot queue, reports the failing writes and their error,
 * and a flush says TIMEOUT; bad arguments each get a clear status. (tests/postgres_audit.rs and
 * the fleet test write to a real server.) */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* Nothing listens on the discard port, so every write fails at once. */
static const char *DOWN = "postgres://agentao@127.0.0.1:9/agentao?connect_timeout=1";

static void count_event(void *ud, const char *json) {
    (void)json;
    atomic_fetch_add((atomic_int *)ud, 1);
}

static agentao_audit_status status_of(const agentao_audit_sink *sink, char **last_error) {
    agentao_audit_status s;
    memset(&s, 0xff, sizeof s);
    s.struct_size = sizeof s;
    CHECK_STATUS(agentao_audit_sink_status(sink, &s, last_error, NULL), AGENTAO_STATUS_OK);
    return s;
}

static void test_bad_arguments(void) {
    agentao_audit_sink *sink = (agentao_audit_sink *)0x1;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_audit_sink_open_postgres(NULL, 0, &sink, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(sink == NULL);
    CHECK_STATUS(agentao_audit_sink_open_postgres(DOWN, 0, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_audit_sink_open_postgres("postgres://h:notaport/db", 0, &sink, &err),
                 AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK(sink == NULL && strstr(agentao_error_message(err), "URL") != NULL);
    agentao_error_free(err);
    CHECK_STATUS(agentao_audit_sink_open_postgres("\xff", 0, &sink, NULL), AGENTAO_STATUS_INVALID_UTF8);

    CHECK_STATUS(agentao_audit_sink_open_postgres(DOWN, 0, &sink, NULL), AGENTAO_STATUS_OK);
    agentao_audit_status small;
    small.struct_size = 4;
    CHECK_STATUS(agentao_audit_sink_status(sink, &small, NULL, NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(agentao_audit_sink_status(sink, NULL, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_audit_sink_status(NULL, &small, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_audit_sink_flush(NULL, 10, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    uint64_t id = 0;
    CHECK_STATUS(agentao_agent_add_audit_sink(NULL, sink, "t", &id, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    /* Nothing queued: a flush has nothing to wait for. */
    CHECK_STATUS(agentao_audit_sink_flush(sink, 10, NULL), AGENTAO_STATUS_OK);
    agentao_audit_sink_free(sink);
    agentao_audit_sink_free(NULL);
}

static void test_unreachable_database(void) {
    agentao_audit_sink *sink = NULL;
    CHECK_STATUS(agentao_audit_sink_open_postgres(DOWN, 2, &sink, NULL), AGENTAO_STATUS_OK);
    const char *dir = tu_workspace();
    char *config = tu_config(dir,
                             "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"read_file\",\"arguments\":{\"file_path\":\"a\"}},"
                             "{\"id\":\"c2\",\"name\":\"read_file\",\"arguments\":{\"file_path\":\"b\"}},"
                             "{\"id\":\"c3\",\"name\":\"read_file\",\"arguments\":{\"file_path\":\"c\"}}]},"
                             "{\"text\":\"done\"}",
                             NULL);
    agentao_agent *agent = NULL;
    CHECK_STATUS(agentao_agent_new(config, NULL, &agent, NULL), AGENTAO_STATUS_OK);
    atomic_int seen = 0;
    uint64_t obs = 0, id = 0;
    CHECK_STATUS(agentao_agent_add_host_event_observer(agent, count_event, &seen, NULL, &obs, NULL),
                 AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_agent_add_audit_sink(agent, sink, NULL, &id, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_agent_add_audit_sink(agent, sink, "acme", &id, NULL), AGENTAO_STATUS_OK);
    /* The agent holds the sink: the host's handle may go first. */
    agentao_audit_sink *keep = sink;
    uint64_t t0 = tu_now_ms();
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(agent, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK(tu_now_ms() - t0 < TU_BOUND_MS(5000));
    CHECK(text && strcmp(text, "done") == 0);
    agentao_string_free(text);
    int events = atomic_load(&seen);
    CHECK_MSG(events >= 6, "%d host events", events);

    agentao_audit_status s = status_of(keep, NULL);
    /* The queue holds 2 and the stuck writer's batch at most 2: the rest were dropped. */
    CHECK_MSG(s.accepted <= 4 && s.accepted + s.dropped == (uint64_t)events,
              "accepted %llu dropped %llu of %d", (unsigned long long)s.accepted,
              (unsigned long long)s.dropped, events);
    CHECK(s.written == 0);
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_audit_sink_flush(keep, 200, &err), AGENTAO_STATUS_TIMEOUT);
    CHECK(strstr(agentao_error_message(err), "queued") != NULL);
    agentao_error_free(err);
    uint64_t deadline = tu_now_ms() + TU_BOUND_MS(10000);
    while (status_of(keep, NULL).failed_writes == 0 && tu_now_ms() < deadline) tu_sleep_ms(20);
    char *last = NULL;
    s = status_of(keep, &last);
    CHECK(s.state == AGENTAO_AUDIT_STATE_RETRYING && s.failed_writes > 0);
    CHECK_MSG(last && strstr(last, "PostgreSQL"), "last error: %s", last ? last : "(null)");
    agentao_string_free(last);
    CHECK(s.struct_size == sizeof s);

    CHECK(agentao_agent_remove_host_event_observer(agent, id));
    agentao_audit_sink_free(sink);
    agentao_agent_free(agent);
    free(config);
}

int main(void) {
    test_bad_arguments();
    test_unreachable_database();
    return tu_finish("test_audit_sink");
}
