/* The ShellExecutor vtable: run_shell_command routed to a recording executor written in C
 * (the "docker exec" case). The command never reaches /bin/sh, chunks stream as tool_output
 * events, cancel reaches the executor, a hardline command is refused before the executor sees
 * it, failing to start is an error, background runs, and bad vtables / wrong answers get a
 * clear status with the turn intact. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

enum mode {
    M_SYNC,       /* output + finish inside the callback */
    M_DEFER,      /* a thread answers when the run's token is cancelled */
    M_FAIL,       /* could not start */
    M_WRONG,      /* answers a foreground run with started() */
    M_BAD_UTF8,   /* fails with a message that is not UTF-8 */
    M_SILENT,     /* never answers until its token is cancelled (library timeout backstop) */
    M_WATCH,      /* a watch of the run's token answers the run from inside the cancel */
};

typedef struct recorder {
    pthread_mutex_t mu;
    enum mode mode;
    atomic_int runs;
    atomic_int backgrounds;
    atomic_int freed;
    char *last_command;
    char *last_cwd;
    uint64_t last_timeout_ms;
    bool saw_path_env;
    /* deferred runs */
    pthread_t thread;
    atomic_int thread_started;
    agentao_shell_run *pending;
    const agentao_cancel_token *pending_cancel;
    atomic_int saw_cancel;
    char *cancel_reason;
    atomic_int answer_status;
} recorder;

static void note(recorder *r, const agentao_shell_request *req) {
    pthread_mutex_lock(&r->mu);
    free(r->last_command);
    free(r->last_cwd);
    r->last_command = strdup(req->command);
    r->last_cwd = strdup(req->cwd);
    r->last_timeout_ms = req->timeout_ms;
    r->saw_path_env = false;
    for (size_t i = 0; i < req->env_len; i++)
        if (strncmp(req->env[i], "PATH=", 5) == 0) r->saw_path_env = true;
    pthread_mutex_unlock(&r->mu);
}

/* Waits for the run's token, then answers: what a real executor does with `docker kill`. */
static void *deferred(void *arg) {
    recorder *r = arg;
    agentao_shell_run *run = r->pending;
    const agentao_cancel_token *cancel = r->pending_cancel;
    CHECK_STATUS(agentao_shell_run_output(run, AGENTAO_SHELL_STREAM_STDOUT, (const uint8_t *)"started\n", 8, NULL),
                 AGENTAO_STATUS_OK);
    for (int i = 0; i < 2000 && !agentao_cancel_token_is_cancelled(cancel); i++) tu_sleep_ms(5);
    if (agentao_cancel_token_is_cancelled(cancel)) {
        atomic_store(&r->saw_cancel, 1);
        char *reason = NULL;
        CHECK_STATUS(agentao_cancel_token_reason(cancel, &reason, NULL), AGENTAO_STATUS_OK);
        r->cancel_reason = strdup(reason ? reason : "");
        agentao_string_free(reason);
    }
    bool silent = r->mode == M_SILENT;
    atomic_store(&r->answer_status,
                 agentao_shell_run_finish(run, -9, silent, !silent, NULL));
    return NULL;
}

/* M_WATCH's answer: from the thread that cancels the run's token, inside that cancel. */
static void finish_on_cancel(void *ud, const char *reason) {
    recorder *r = ud;
    r->cancel_reason = strdup(reason);
    atomic_store(&r->saw_cancel, 1);
    atomic_store(&r->answer_status, agentao_shell_run_finish(r->pending, -9, true, false, NULL));
}

static void exec_run(void *ud, const agentao_shell_request *req, agentao_shell_run *run) {
    recorder *r = ud;
    atomic_fetch_add(&r->runs, 1);
    note(r, req);
    CHECK(req->struct_size == sizeof(agentao_shell_request));
    CHECK(req->cancel != NULL);
    agentao_error *err = NULL;
    switch (r->mode) {
    case M_SYNC: {
        char *out = tu_printf("container says: %s\n", req->command);
        CHECK_STATUS(agentao_shell_run_output(run, AGENTAO_SHELL_STREAM_STDOUT, (const uint8_t *)out, strlen(out), NULL),
                     AGENTAO_STATUS_OK);
        free(out);
        CHECK_STATUS(agentao_shell_run_output(run, AGENTAO_SHELL_STREAM_STDERR, (const uint8_t *)"warn\n", 5, NULL),
                     AGENTAO_STATUS_OK);
        CHECK_STATUS(agentao_shell_run_output(run, 7, (const uint8_t *)"x", 1, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "7 is not an agentao_shell_stream");
        agentao_error_free(err);
        CHECK_STATUS(agentao_shell_run_output(run, AGENTAO_SHELL_STREAM_STDOUT, NULL, 3, NULL),
                     AGENTAO_STATUS_NULL_ARGUMENT);
        CHECK_STATUS(agentao_shell_run_finish(run, 3, false, false, NULL), AGENTAO_STATUS_OK);
        break;
    }
    case M_DEFER:
    case M_SILENT:
        r->pending = run;
        r->pending_cancel = req->cancel;
        CHECK(pthread_create(&r->thread, NULL, deferred, r) == 0);
        atomic_store(&r->thread_started, 1);
        break;
    case M_WATCH: {
        r->pending = run;
        uint64_t id = 0;
        CHECK_STATUS(agentao_cancel_token_watch(req->cancel, finish_on_cancel, r, NULL, &id, NULL),
                     AGENTAO_STATUS_OK);
        break;
    }
    case M_FAIL:
        CHECK_STATUS(agentao_shell_run_fail(run, "container agentao-1 is not running", NULL), AGENTAO_STATUS_OK);
        break;
    case M_WRONG:
        CHECK_STATUS(agentao_shell_run_started(run, 12, 12, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "a foreground run cannot be answered with a background start");
        agentao_error_free(err);
        break;
    case M_BAD_UTF8:
        CHECK_STATUS(agentao_shell_run_fail(run, "bad \xff\xfe", NULL), AGENTAO_STATUS_INVALID_UTF8);
        break;
    }
}

static void exec_background(void *ud, const agentao_shell_request *req, agentao_shell_run *run) {
    recorder *r = ud;
    atomic_fetch_add(&r->backgrounds, 1);
    note(r, req);
    CHECK_STATUS(agentao_shell_run_started(run, 4242, 4242, NULL), AGENTAO_STATUS_OK);
}

static void exec_free(void *ud) { atomic_fetch_add(&((recorder *)ud)->freed, 1); }

static agentao_shell_executor executor(recorder *r, bool background) {
    agentao_shell_executor e = {
        .struct_size = sizeof(agentao_shell_executor),
        .userdata = r,
        .userdata_free = exec_free,
        .dialect = AGENTAO_SHELL_DIALECT_POSIX,
        .interpreter = "/usr/bin/docker-sh",
        .run = exec_run,
        .run_background = background ? exec_background : NULL,
    };
    return e;
}

#define SHELL(id, args) "{\"tool_calls\":[{\"id\":\"" id "\",\"name\":\"run_shell_command\",\"arguments\":" args "}]},{\"text\":\"turn " id "\"}"

/* The first tool_output event of call `id` (malloc'd) or NULL. */
static char *find_output(tu_recorder *rec, const char *id) {
    char *kv = tu_printf("\"call_id\":\"%s\"", id);
    char *found = NULL;
    for (int i = 0; !found; i++) {
        char *ev = tu_recorder_find(rec, "tool_output", i);
        if (!ev) break;
        if (strstr(ev, kv)) found = ev;
        else free(ev);
    }
    free(kv);
    return found;
}

int main(void) {
    const char *dir = tu_workspace();
    char *marker = tu_printf("%s/marker", dir);
    char *touch = tu_printf("{\"command\":\"touch %s\",\"timeout\":7}", marker);
    char *script = tu_printf(
        "{\"tool_calls\":[{\"id\":\"s1\",\"name\":\"run_shell_command\",\"arguments\":%s}]},{\"text\":\"turn s1\"},"
        SHELL("h1", "{\"command\":\"rm -rf /\"}") ","
        SHELL("f1", "{\"command\":\"make\"}") ","
        SHELL("b1", "{\"command\":\"serve\",\"is_background\":true}") ","
        SHELL("w1", "{\"command\":\"ls\"}") ","
        SHELL("u1", "{\"command\":\"ls\"}") ","
        SHELL("c1", "{\"command\":\"sleep 100\"}") ","
        SHELL("t1", "{\"command\":\"sleep 100\",\"timeout\":0.2}") ","
        SHELL("t2", "{\"command\":\"sleep 100\",\"timeout\":0.2}") ","
        SHELL("n1", "{\"command\":\"serve\",\"is_background\":true}"),
        touch);
    free(touch);
    char *cfg = tu_config(dir, script, NULL);
    free(script);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_EMIT);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    recorder r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    agentao_shell_executor e = executor(&r, true);
    CHECK_STATUS(agentao_agent_set_shell_executor(a, &e, NULL), AGENTAO_STATUS_OK);

    tu_section("the command goes to the executor, never to /bin/sh");
    r.mode = M_SYNC;
    free(tu_chat(a, "run it"));
    CHECK(atomic_load(&r.runs) == 1);
    char *want = tu_printf("touch %s", marker);
    CHECK_STR_EQ(r.last_command, want);
    free(want);
    CHECK_STR_EQ(r.last_cwd, dir);
    CHECK(r.last_timeout_ms == 7000);
    CHECK(r.saw_path_env);
    CHECK_MSG(!tu_file_exists(marker), "the command ran on the local shell");
    char *res = tu_last_tool_result(a);
    CHECK_CONTAINS(res, "STDOUT:\ncontainer says: touch ");
    CHECK_CONTAINS(res, "STDERR:\nwarn\n");
    CHECK_CONTAINS(res, "Exit code: 3");
    free(res);
    char *ev = tu_recorder_find(&rec, "tool_output", 0);
    CHECK_CONTAINS(ev, "container says: touch ");
    CHECK_CONTAINS(ev, TU_KV("call_id", "s1"));
    free(ev);

    tu_section("a hardline command is refused before the executor sees it");
    free(tu_chat(a, "wipe"));
    CHECK(atomic_load(&r.runs) == 1);
    res = tu_last_tool_result(a);
    CHECK_CONTAINS(res, "Error: hardline:recursive delete of root");
    free(res);

    tu_section("failing to start is an error, not a result");
    r.mode = M_FAIL;
    free(tu_chat(a, "build"));
    res = tu_last_tool_result(a);
    CHECK_STR_EQ(res, "Error starting command: container agentao-1 is not running");
    free(res);

    tu_section("background run");
    free(tu_chat(a, "serve"));
    CHECK(atomic_load(&r.backgrounds) == 1);
    res = tu_last_tool_result(a);
    CHECK_CONTAINS(res, "Background process started.\nPID: 4242\nPGID: 4242\nCommand: serve");
    free(res);

    tu_section("a wrong answer and a bad message fail the run, and the turn goes on");
    r.mode = M_WRONG;
    char *text = tu_chat(a, "ls");
    CHECK_STR_EQ(text, "turn w1");
    free(text);
    res = tu_last_tool_result(a);
    CHECK_CONTAINS(res, "Error starting command: the shell executor answered wrongly");
    free(res);
    r.mode = M_BAD_UTF8;
    free(tu_chat(a, "ls"));
    res = tu_last_tool_result(a);
    CHECK_STR_EQ(res, "Error starting command: the shell executor could not start the command");
    free(res);

    tu_section("cancel reaches the executor");
    r.mode = M_DEFER;
    agentao_cancel_token *tok = agentao_cancel_token_new();
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(a, "sleep", -1, tok, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&r.thread_started, 1, 10000));
    /* Installing while a turn runs is refused, and the refused vtable is released. */
    recorder r2;
    memset(&r2, 0, sizeof r2);
    agentao_shell_executor e2 = executor(&r2, false);
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_shell_executor(a, &e2, &err), AGENTAO_STATUS_TURN_IN_PROGRESS);
    agentao_error_free(err);
    err = NULL;
    CHECK(atomic_load(&r2.freed) == 1);
    CHECK_STATUS(agentao_agent_set_file_system(a, NULL, NULL), AGENTAO_STATUS_TURN_IN_PROGRESS);
    uint64_t t0 = tu_now_ms();
    agentao_cancel_token_cancel(tok, "user-stop");
    CHECK(tu_wait_count(&d.calls, 1, 10000));
    uint64_t took = tu_now_ms() - t0;
    printf("cancel to turn end with a deferred executor: %llu ms\n", (unsigned long long)took);
    CHECK_MSG(took < 1500, "the turn took %llu ms to end after cancel", (unsigned long long)took);
    CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);
    pthread_join(r.thread, NULL);
    CHECK(atomic_load(&r.saw_cancel) == 1);
    CHECK_STR_EQ(r.cancel_reason, "user-stop");
    CHECK_STATUS(atomic_load(&r.answer_status), AGENTAO_STATUS_OK);
    tu_done_destroy(&d);
    agentao_cancel_token_free(tok);
    free(r.cancel_reason);
    r.cancel_reason = NULL;
    /* The turn's history still ends well-formed; the next response of the script is unused. */
    free(tu_chat(a, "again")); /* consumes "turn c1" */

    tu_section("a silent executor is stopped by the inactivity backstop");
    r.mode = M_SILENT;
    atomic_store(&r.thread_started, 0);
    t0 = tu_now_ms();
    text = tu_chat(a, "sleep");
    took = tu_now_ms() - t0;
    printf("silent executor with timeout 0.2 s: turn took %llu ms\n", (unsigned long long)took);
    CHECK_STR_EQ(text, "turn t1");
    free(text);
    pthread_join(r.thread, NULL);
    CHECK(atomic_load(&r.saw_cancel) == 1);
    CHECK_STR_EQ(r.cancel_reason, "timeout");
    free(r.cancel_reason);
    r.cancel_reason = NULL;
    res = tu_last_tool_result(a);
    CHECK_CONTAINS(res, "Command timed out after 0s of inactivity.\nCommand: sleep 100");
    CHECK_CONTAINS(res, "started");
    free(res);
    ev = find_output(&rec, "t1");
    CHECK_CONTAINS(ev, "started");
    free(ev);

    tu_section("a watch of the run's token may answer the run from inside the cancel");
    /* The library cancels the token when the run is silent too long; the host's watch runs
     * inside that cancel and answers at once (it must not find the run's state locked). */
    r.mode = M_WATCH;
    atomic_store(&r.saw_cancel, 0);
    atomic_store(&r.answer_status, -1);
    text = tu_chat(a, "sleep");
    CHECK_STR_EQ(text, "turn t2");
    free(text);
    CHECK(atomic_load(&r.saw_cancel) == 1);
    CHECK_STR_EQ(r.cancel_reason, "timeout");
    CHECK_STATUS(atomic_load(&r.answer_status), AGENTAO_STATUS_OK);
    free(r.cancel_reason);
    r.cancel_reason = NULL;
    res = tu_last_tool_result(a);
    CHECK_CONTAINS(res, "Command timed out after 0s of inactivity.\nCommand: sleep 100");
    free(res);

    tu_section("no background slot: background runs are refused");
    agentao_shell_executor e3 = executor(&r, false);
    e3.userdata_free = NULL;
    CHECK_STATUS(agentao_agent_set_shell_executor(a, &e3, NULL), AGENTAO_STATUS_OK);
    CHECK(atomic_load(&r.freed) == 1); /* the first vtable was replaced */
    free(tu_chat(a, "serve"));
    res = tu_last_tool_result(a);
    CHECK_CONTAINS(res, "does not support background execution");
    free(res);
    CHECK(atomic_load(&r.backgrounds) == 1);

    tu_section("bad vtables");
    recorder r4;
    memset(&r4, 0, sizeof r4);
    agentao_shell_executor bad = executor(&r4, false);
    bad.struct_size = 8;
    CHECK_STATUS(agentao_agent_set_shell_executor(a, &bad, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "agentao_shell_executor.struct_size is 8");
    agentao_error_free(err);
    err = NULL;
    bad = executor(&r4, false);
    bad.dialect = 7;
    CHECK_STATUS(agentao_agent_set_shell_executor(a, &bad, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "only AGENTAO_SHELL_DIALECT_POSIX");
    agentao_error_free(err);
    err = NULL;
    bad = executor(&r4, false);
    bad.run = NULL;
    CHECK_STATUS(agentao_agent_set_shell_executor(a, &bad, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "agentao_shell_executor.run is NULL");
    agentao_error_free(err);
    err = NULL;
    bad = executor(&r4, false);
    bad.interpreter = "\xff";
    CHECK_STATUS(agentao_agent_set_shell_executor(a, &bad, NULL), AGENTAO_STATUS_INVALID_UTF8);
    CHECK_MSG(atomic_load(&r4.freed) == 4, "refused vtables released %d times", atomic_load(&r4.freed));
    CHECK_STATUS(agentao_shell_run_output(NULL, 1, NULL, 0, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_shell_run_finish(NULL, 0, false, false, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_shell_run_started(NULL, 1, 1, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_shell_run_fail(NULL, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);

    tu_section("NULL restores the local executor");
    CHECK_STATUS(agentao_agent_set_shell_executor(a, NULL, NULL), AGENTAO_STATUS_OK);
    agentao_agent_free(a);
    tu_recorder_destroy(&rec);

    tu_section("with a permission engine, the floor still runs before the executor");
    cfg = tu_config(dir, SHELL("h2", "{\"command\":\"rm -rf /\"}"), "\"permissions\":{\"mode\":\"full-access\"}");
    a = tu_agent(cfg, NULL);
    free(cfg);
    recorder r5;
    memset(&r5, 0, sizeof r5);
    pthread_mutex_init(&r5.mu, NULL);
    agentao_shell_executor e5 = executor(&r5, false);
    CHECK_STATUS(agentao_agent_set_shell_executor(a, &e5, NULL), AGENTAO_STATUS_OK);
    free(tu_chat(a, "wipe"));
    CHECK(atomic_load(&r5.runs) == 0);
    /* Full access allows everything but the floor. */
    res = tu_last_tool_result(a);
    CHECK_CONTAINS(res, "Tool execution denied");
    free(res);
    agentao_agent_free(a);
    CHECK(atomic_load(&r5.freed) == 1);

    free(r.last_command);
    free(r.last_cwd);
    free(marker);
    pthread_mutex_destroy(&r.mu);
    pthread_mutex_destroy(&r5.mu);
    return tu_finish("test_shell_executor");
}
