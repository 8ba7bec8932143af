/* The real HTTP path: the library talks to the loopback mock of the OpenAI wire
 * (`mock-openai --script FILE --port-file FILE`, launched with posix_spawn). A 500 is retried
 * (llm_retry) and the turn succeeds; a 400 is not retried (llm_error); a connection dropped
 * in the middle of the stream ends the turn with llm_error after the text that arrived. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

extern char **environ;

#ifndef MOCK_OPENAI_BIN
#error "MOCK_OPENAI_BIN must be defined by the build"
#endif

struct mock {
    pid_t pid;
    int stdin_fd; /* write end: the mock exits when it closes */
    int port;
};

static bool start_mock(struct mock *m, const char *dir, const char *responses) {
    memset(m, 0, sizeof *m);
    m->stdin_fd = -1;
    char *script_path = tu_printf("%s/script.json", dir);
    char *port_path = tu_printf("%s/port", dir);
    char *log_path = tu_printf("%s/mock.log", dir);
    FILE *f = fopen(script_path, "w");
    CHECK(f != NULL);
    if (!f) return false;
    fprintf(f, "{\"responses\":[%s]}", responses);
    fclose(f);

    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        tu_fail_at(__FILE__, __LINE__, "pipe: %s", strerror(errno));
        return false;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char *argv[] = {(char *)MOCK_OPENAI_BIN, "--script", script_path, "--port-file", port_path, NULL};
    int rc = posix_spawn(&m->pid, MOCK_OPENAI_BIN, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[0]);
    m->stdin_fd = pipefd[1];
    bool ok = rc == 0;
    CHECK_MSG(ok, "posix_spawn %s: %s", MOCK_OPENAI_BIN, strerror(rc));
    /* The port file appears (atomically, by rename) once the server listens. */
    for (uint64_t end = tu_now_ms() + 15000; ok && tu_now_ms() < end; tu_sleep_ms(10)) {
        char *port = tu_read_file(port_path);
        if (port && atoi(port) > 0) m->port = atoi(port);
        free(port);
        if (m->port) break;
        int status;
        if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
            tu_fail_at(__FILE__, __LINE__, "mock-openai exited early (status %d)", status);
            m->pid = 0;
            ok = false;
        }
    }
    if (ok && !m->port) {
        tu_fail_at(__FILE__, __LINE__, "mock-openai did not write its port file");
        ok = false;
    }
    if (ok) {
        /* The port file comes first and the listen line right after it (a reader of the line
         * may read the file at once), so the line may still be on its way to the log. */
        char *want = tu_printf("listening on http://127.0.0.1:%d/v1", m->port);
        char *log = tu_read_file(log_path);
        for (uint64_t end = tu_now_ms() + 5000; !(log && strstr(log, want)) && tu_now_ms() < end;
             tu_sleep_ms(10)) {
            free(log);
            log = tu_read_file(log_path);
        }
        CHECK_CONTAINS(log, want);
        free(want);
        free(log);
    }
    free(script_path);
    free(port_path);
    free(log_path);
    return ok;
}

static void stop_mock(struct mock *m) {
    if (m->stdin_fd >= 0) close(m->stdin_fd);
    m->stdin_fd = -1;
    if (m->pid > 0) {
        int status = 0;
        uint64_t end = tu_now_ms() + 3000;
        while (waitpid(m->pid, &status, WNOHANG) == 0) {
            if (tu_now_ms() > end) {
                kill(m->pid, SIGKILL);
                waitpid(m->pid, &status, 0);
                break;
            }
            tu_sleep_ms(10);
        }
        m->pid = 0;
    }
}

static char *http_config(const char *dir, int port) {
    return tu_printf("{\"working_directory\":\"%s\",\"llm\":{\"provider\":\"openai\","
                     "\"base_url\":\"http://127.0.0.1:%d/v1\",\"api_key\":\"test\",\"model\":\"m\","
                     "\"retry_backoff_base_ms\":10,\"retry_backoff_cap_ms\":50}}",
                     dir, port);
}

/* Runs one chat against a mock serving `responses`; returns the chat status. */
static agentao_status run_scenario(const char *responses, tu_recorder *rec, char **text, char **last) {
    const char *dir = tu_workspace();
    struct mock m;
    agentao_status st = AGENTAO_STATUS_INTERNAL;
    *text = NULL;
    *last = NULL;
    if (start_mock(&m, dir, responses)) {
        char *cfg = http_config(dir, m.port);
        agentao_transport t = tu_recorder_transport(rec, TU_SLOT_ALL);
        agentao_agent *a = tu_agent(cfg, &t);
        free(cfg);
        if (a) {
            agentao_error *err = NULL;
            st = agentao_agent_chat(a, "hello over http", -1, NULL, text, &err);
            if (st != AGENTAO_STATUS_OK) fprintf(stderr, "chat: %s\n", agentao_error_message(err));
            agentao_error_free(err);
            *last = tu_last_turn(a);
            agentao_agent_free(a);
        }
    }
    stop_mock(&m);
    return st;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    tu_recorder rec;
    char *text, *last, *ev;

    tu_section("a 500 is retried, then the turn succeeds");
    tu_recorder_init(&rec);
    CHECK_STATUS(run_scenario("{\"fault\":{\"type\":\"http_error\",\"status\":500,\"message\":\"upstream hiccup\"}},"
                              "{\"text\":\"recovered after a retry\",\"chunk_size\":6}",
                              &rec, &text, &last),
                 AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "recovered after a retry");
    CHECK_CONTAINS(last, "\"incomplete_reason\":null");
    ev = tu_recorder_find(&rec, "llm_retry", 0);
    CHECK_MSG(ev != NULL, "no llm_retry event");
    CHECK_CONTAINS(ev, TU_KV("reason", "status=500"));
    CHECK_CONTAINS(ev, "\"retry\":1");
    free(ev);
    CHECK(tu_recorder_find(&rec, "llm_retry", 1) == NULL);
    char *types = tu_recorder_types(&rec);
    CHECK_STR_EQ(types, "turn_begin,turn_start,llm_call_started,llm_call_delta,llm_retry,llm_text*,"
                        "llm_call_completed,turn_end");
    free(types);
    agentao_string_free(text);
    free(last);
    tu_recorder_destroy(&rec);

    tu_section("a 400 is not retried: llm_error");
    tu_recorder_init(&rec);
    CHECK_STATUS(run_scenario("{\"fault\":{\"type\":\"http_error\",\"status\":400,\"message\":\"bad request body\"}},"
                              "{\"text\":\"must not be reached\"}",
                              &rec, &text, &last),
                 AGENTAO_STATUS_OK);
    CHECK_MSG(text && strncmp(text, "[LLM API error:", 15) == 0, "text: %s", text ? text : "(null)");
    CHECK_NOT_CONTAINS(text, "must not be reached");
    CHECK_CONTAINS(last, TU_KV("incomplete_reason", "llm_error"));
    CHECK_CONTAINS(last, TU_KV("status", "ok"));
    CHECK_CONTAINS(last, "\"error\":null");
    CHECK(tu_recorder_find(&rec, "llm_retry", 0) == NULL);
    ev = tu_recorder_find(&rec, "llm_call_completed", 0);
    CHECK_CONTAINS(ev, TU_KV("status", "error"));
    free(ev);
    agentao_string_free(text);
    free(last);
    tu_recorder_destroy(&rec);

    tu_section("a connection dropped mid-stream: llm_error after the text that arrived");
    tu_recorder_init(&rec);
    CHECK_STATUS(run_scenario("{\"chunks\":[\"first \",\"second \",\"third \",\"fourth\"],"
                              "\"fault\":{\"type\":\"drop\",\"after_events\":2}},"
                              "{\"text\":\"must not be reached\"}",
                              &rec, &text, &last),
                 AGENTAO_STATUS_OK);
    CHECK_MSG(text && strncmp(text, "[LLM API error:", 15) == 0, "text: %s", text ? text : "(null)");
    CHECK_CONTAINS(last, TU_KV("incomplete_reason", "llm_error"));
    ev = tu_recorder_find(&rec, "llm_text", 0);
    CHECK_CONTAINS(ev, TU_KV("chunk", "first "));
    free(ev);
    ev = tu_recorder_find(&rec, "llm_text", 1);
    CHECK_CONTAINS(ev, TU_KV("chunk", "second "));
    free(ev);
    CHECK(tu_recorder_find(&rec, "llm_text", 2) == NULL);
    CHECK(tu_recorder_find(&rec, "llm_retry", 0) == NULL); /* text had streamed: no retry */
    ev = tu_recorder_find(&rec, "llm_call_completed", 0);
    CHECK_CONTAINS(ev, TU_KV("status", "error"));
    CHECK_CONTAINS(ev, "\"streamed\":true");
    free(ev);
    agentao_string_free(text);
    free(last);
    tu_recorder_destroy(&rec);

    return tu_finish("test_http");
}
