/* One rule for every request handle (docs/c-api.md, "Answering a request"): each capability's
 * request answered from another thread after its callback returned (a file system's read, a
 * memory store's upsert, a shell run, a confirmation); a request never answered fails after
 * reply_timeout_ms instead of hanging its turn, and one still unanswered when its turn is
 * cancelled ends with the cancel; and a second finishing call on any handle gets
 * AGENTAO_STATUS_INVALID_ARGUMENT instead of touching freed memory. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* A host thread that answers once the callback has returned. */
typedef struct later {
    atomic_int returned;    /* set by the callback as its last act */
    atomic_int finished;    /* set by the thread when it is done */
    atomic_int first, second, after; /* statuses of the finishing calls and a call after */
    void *handle;
    pthread_t thread;
    bool started;
} later;

static void later_reset(later *l) {
    atomic_store(&l->returned, 0);
    atomic_store(&l->finished, 0);
    atomic_store(&l->first, -1);
    atomic_store(&l->second, -1);
    atomic_store(&l->after, -1);
    l->handle = NULL;
    l->started = false;
}

static void later_wait_return(later *l) {
    while (!atomic_load(&l->returned)) tu_sleep_ms(1);
    tu_sleep_ms(20); /* well past the callback's return */
}

static void later_join(later *l) {
    if (l->started) pthread_join(l->thread, NULL);
    l->started = false;
}

/* ---- the file system: read answered later, or never --------------------------------------- */

static later fs_later;
static atomic_int fs_freed;
static atomic_int fs_never; /* 1: defer and never finish */
static agentao_fs_out *fs_abandoned;

static void *fs_answer(void *arg) {
    later *l = arg;
    later_wait_return(l);
    agentao_fs_out *out = l->handle;
    static const char text[] = "served from the host thread\n";
    CHECK_STATUS(agentao_fs_out_set_data(out, (const uint8_t *)text, sizeof text - 1, NULL), AGENTAO_STATUS_OK);
    atomic_store(&l->first, agentao_fs_out_finish(out, 0, NULL));
    agentao_error *err = NULL;
    atomic_store(&l->second, agentao_fs_out_finish(out, 0, &err));
    CHECK_CONTAINS(agentao_error_message(err), "already finished");
    agentao_error_free(err);
    atomic_store(&l->after, agentao_fs_out_set_data(out, (const uint8_t *)"x", 1, NULL));
    atomic_store(&l->finished, 1);
    return NULL;
}

static int32_t fs_read(void *ud, const char *path, uint64_t max_bytes, agentao_fs_out *out) {
    (void)ud, (void)path, (void)max_bytes;
    CHECK_STATUS(agentao_fs_out_defer(out, NULL), AGENTAO_STATUS_OK);
    if (atomic_load(&fs_never)) {
        fs_abandoned = out;
    } else {
        fs_later.handle = out;
        fs_later.started = pthread_create(&fs_later.thread, NULL, fs_answer, &fs_later) == 0;
    }
    atomic_store(&fs_later.returned, 1);
    return 5; /* ignored: the request is deferred */
}

static void fs_free(void *ud) {
    (void)ud;
    atomic_fetch_add(&fs_freed, 1);
}

static agentao_file_system host_fs(void) {
    agentao_file_system fs = {
        .struct_size = sizeof(agentao_file_system),
        .userdata_free = fs_free,
        .read = fs_read,
    };
    return fs;
}

static const char *READ_TURN =
    "{\"tool_calls\":[{\"id\":\"r1\",\"name\":\"read_file\",\"arguments\":{\"file_path\":\"a.txt\"}}]},"
    "{\"text\":\"read it\"}";

static void write_disk_file(const char *dir) {
    char *path = tu_printf("%s/a.txt", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) fputs("on the disk\n", f), fclose(f);
    free(path);
}

/* An agent on host_fs(), whose workspace holds a.txt on the disk too; the read is answered later
 * (never: not at all). */
static agentao_agent *fs_agent(int never, const char *extra, char **cfg_out) {
    later_reset(&fs_later);
    atomic_store(&fs_never, never);
    const char *dir = tu_workspace();
    write_disk_file(dir);
    *cfg_out = tu_config(dir, READ_TURN, extra);
    agentao_agent *a = tu_agent(*cfg_out, NULL);
    agentao_file_system fs = host_fs();
    CHECK_STATUS(agentao_agent_set_file_system(a, &fs, NULL), AGENTAO_STATUS_OK);
    return a;
}

static void test_fs_read_later(void) {
    tu_section("file system: a read answered from another thread after the callback returned");
    char *cfg;
    agentao_agent *a = fs_agent(0, NULL, &cfg);
    free(tu_chat(a, "read a.txt"));
    char *result = tu_last_tool_result(a);
    CHECK_CONTAINS(result, "served from the host thread");
    CHECK_NOT_CONTAINS(result, "on the disk");
    free(result);
    later_join(&fs_later);
    CHECK_STATUS(atomic_load(&fs_later.first), AGENTAO_STATUS_OK);
    CHECK_STATUS(atomic_load(&fs_later.second), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(atomic_load(&fs_later.after), AGENTAO_STATUS_INVALID_ARGUMENT);
    agentao_agent_free(a);
    CHECK(tu_wait_count(&fs_freed, 1, 5000));
    free(cfg);
}

static void test_fs_never_answered(void) {
    tu_section("file system: a read never answered fails after reply_timeout_ms, no hang");
    char *cfg;
    agentao_agent *a = fs_agent(1, "\"reply_timeout_ms\":300", &cfg);
    uint64_t t0 = tu_now_ms();
    free(tu_chat(a, "read a.txt"));
    CHECK_MSG(tu_now_ms() - t0 < TU_BOUND_MS(5000), "the turn waited %llu ms for an unanswered read",
              (unsigned long long)(tu_now_ms() - t0));
    char *result = tu_last_tool_result(a);
    CHECK_CONTAINS(result, "did not finish `read` within reply_timeout_ms");
    free(result);
    /* A late answer is harmless: accepted, dropped; then the handle is finished. */
    CHECK_STATUS(agentao_fs_out_finish(fs_abandoned, 0, NULL), AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_fs_out_finish(fs_abandoned, 0, NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
    agentao_agent_free(a);
    CHECK(tu_wait_count(&fs_freed, 2, 5000));
    free(cfg);
}

/* Cancels `arg` (a token) once the file system's callback has deferred its read. */
static void *cancel_after_deferral(void *arg) {
    while (!atomic_load(&fs_later.returned)) tu_sleep_ms(1);
    agentao_cancel_token_cancel(arg, "user-stop");
    return NULL;
}

static void test_fs_unanswered_at_cancel(void) {
    tu_section("file system: a read still unanswered when its turn is cancelled ends with the cancel");
    /* The default reply_timeout_ms (300 s): only the cancel can end the wait. */
    char *cfg;
    agentao_agent *a = fs_agent(1, NULL, &cfg);
    agentao_cancel_token *tok = agentao_cancel_token_new();
    pthread_t canceller;
    CHECK(pthread_create(&canceller, NULL, cancel_after_deferral, tok) == 0);
    char *text = NULL;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "read a.txt", -1, tok, &text, &err), AGENTAO_STATUS_CANCELLED);
    agentao_error_free(err);
    pthread_join(canceller, NULL);
    /* The call ended with the cancel, not after the grace a callback still running gets. */
    char *result = tu_last_tool_result(a);
    CHECK_NOT_CONTAINS(result, "left behind");
    CHECK_CONTAINS(result, "cancelled while the host file system's `read` was unanswered");
    free(result);
    /* A late answer is harmless: accepted, dropped; then the handle is finished. */
    CHECK_STATUS(agentao_fs_out_finish(fs_abandoned, 0, NULL), AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_fs_out_finish(fs_abandoned, 0, NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
    agentao_cancel_token_free(tok);
    agentao_agent_free(a);
    CHECK(tu_wait_count(&fs_freed, 3, 5000));
    free(cfg);
}

/* ---- the memory store: upsert answered later, or never ------------------------------------ */

static later mem_later;
static atomic_int mem_never;
static agentao_memory_answer *mem_abandoned;

static void *mem_answer(void *arg) {
    later *l = arg;
    later_wait_return(l);
    atomic_store(&l->first, agentao_memory_answer_ok(l->handle, NULL));
    atomic_store(&l->second, agentao_memory_answer_json(l->handle, "[]", NULL));
    atomic_store(&l->after, agentao_memory_answer_defer(l->handle, NULL));
    atomic_store(&l->finished, 1);
    return NULL;
}

static void mem_upsert(void *ud, const char *record_json, agentao_memory_answer *answer) {
    (void)ud, (void)record_json;
    CHECK_STATUS(agentao_memory_answer_defer(answer, NULL), AGENTAO_STATUS_OK);
    if (atomic_load(&mem_never)) {
        mem_abandoned = answer;
    } else {
        mem_later.handle = answer;
        mem_later.started = pthread_create(&mem_later.thread, NULL, mem_answer, &mem_later) == 0;
    }
    atomic_store(&mem_later.returned, 1);
}

static void mem_list(void *ud, const char *scope, agentao_memory_answer *answer) {
    (void)ud, (void)scope;
    CHECK_STATUS(agentao_memory_answer_json(answer, "[]", NULL), AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_memory_answer_json(answer, "[]", NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
}

static const char *SAVE_TURN =
    "{\"tool_calls\":[{\"id\":\"m1\",\"name\":\"save_memory\",\"arguments\":{\"key\":\"editor\",\"value\":\"vim\"}}]},"
    "{\"text\":\"saved\"}";

static void test_memory(bool never) {
    tu_section(never ? "memory store: an upsert never answered fails after reply_timeout_ms"
                     : "memory store: an upsert answered from another thread after the callback returned");
    later_reset(&mem_later);
    atomic_store(&mem_never, never);
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, SAVE_TURN, never ? "\"reply_timeout_ms\":300" : NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    agentao_memory_store store = {
        .struct_size = sizeof(agentao_memory_store),
        .upsert = mem_upsert,
        .list = mem_list,
    };
    CHECK_STATUS(agentao_agent_set_memory_store(a, &store, NULL), AGENTAO_STATUS_OK);
    free(tu_chat(a, "remember"));
    char *result = tu_last_tool_result(a);
    if (never) {
        CHECK_CONTAINS(result, "Error saving memory");
        CHECK_CONTAINS(result, "did not finish `upsert` within reply_timeout_ms");
        CHECK_STATUS(agentao_memory_answer_ok(mem_abandoned, NULL), AGENTAO_STATUS_OK);
        CHECK_STATUS(agentao_memory_answer_ok(mem_abandoned, NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
    } else {
        CHECK_CONTAINS(result, "Saved memory: editor");
        later_join(&mem_later);
        CHECK_STATUS(atomic_load(&mem_later.first), AGENTAO_STATUS_OK);
        CHECK_STATUS(atomic_load(&mem_later.second), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_STATUS(atomic_load(&mem_later.after), AGENTAO_STATUS_INVALID_ARGUMENT);
    }
    free(result);
    agentao_agent_free(a);
    free(cfg);
}

/* ---- the shell executor: a run finished later, then finished again ------------------------ */

static later sh_later;

static void *sh_answer(void *arg) {
    later *l = arg;
    later_wait_return(l);
    agentao_shell_run *run = l->handle;
    CHECK_STATUS(agentao_shell_run_output(run, AGENTAO_SHELL_STREAM_STDOUT, (const uint8_t *)"late output\n", 12, NULL),
                 AGENTAO_STATUS_OK);
    atomic_store(&l->first, agentao_shell_run_finish(run, 0, false, false, NULL));
    atomic_store(&l->second, agentao_shell_run_finish(run, 0, false, false, NULL));
    atomic_store(&l->after, agentao_shell_run_output(run, AGENTAO_SHELL_STREAM_STDOUT, (const uint8_t *)"x", 1, NULL));
    atomic_store(&l->finished, 1);
    return NULL;
}

static void sh_run(void *ud, const agentao_shell_request *req, agentao_shell_run *run) {
    (void)ud, (void)req;
    sh_later.handle = run;
    sh_later.started = pthread_create(&sh_later.thread, NULL, sh_answer, &sh_later) == 0;
    atomic_store(&sh_later.returned, 1);
}

static void test_shell(void) {
    tu_section("shell executor: a run finished from another thread, then finished again");
    later_reset(&sh_later);
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir,
                          "{\"tool_calls\":[{\"id\":\"s1\",\"name\":\"run_shell_command\",\"arguments\":{\"command\":\"echo hi\"}}]},"
                          "{\"text\":\"ran\"}",
                          NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    agentao_shell_executor exec = {
        .struct_size = sizeof(agentao_shell_executor),
        .dialect = AGENTAO_SHELL_DIALECT_POSIX,
        .run = sh_run,
    };
    CHECK_STATUS(agentao_agent_set_shell_executor(a, &exec, NULL), AGENTAO_STATUS_OK);
    free(tu_chat(a, "run"));
    char *result = tu_last_tool_result(a);
    CHECK_CONTAINS(result, "late output");
    free(result);
    later_join(&sh_later);
    CHECK_STATUS(atomic_load(&sh_later.first), AGENTAO_STATUS_OK);
    CHECK_STATUS(atomic_load(&sh_later.second), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(atomic_load(&sh_later.after), AGENTAO_STATUS_INVALID_ARGUMENT);
    agentao_agent_free(a);
    free(cfg);
}

/* ---- the transport: a confirmation answered twice ----------------------------------------- */

static void test_reply_twice(void) {
    tu_section("transport: a confirmation answered from another thread, then again");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir,
                          "{\"tool_calls\":[{\"id\":\"w1\",\"name\":\"write_file\",\"arguments\":{\"file_path\":\"o.txt\",\"content\":\"x\"}}]},"
                          "{\"text\":\"written\"}",
                          NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.confirm_mode = TU_CONFIRM_DEFER;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_CONFIRM);
    agentao_agent *a = tu_agent(cfg, &t);
    tu_done done;
    tu_done_init(&done);
    CHECK_STATUS(agentao_agent_run(a, "write", -1, NULL, tu_on_done, &done, NULL), AGENTAO_STATUS_OK);
    agentao_reply *r = NULL;
    uint64_t end = tu_now_ms() + 10000;
    while (!(r = atomic_exchange(&rec.pending_reply, NULL)) && tu_now_ms() < end) tu_sleep_ms(2);
    CHECK(r != NULL);
    if (r) {
        tu_sleep_ms(20);
        CHECK_STATUS(agentao_reply_confirm(r, AGENTAO_CONFIRMATION_ALLOW, NULL), AGENTAO_STATUS_OK);
        agentao_error *err = NULL;
        CHECK_STATUS(agentao_reply_confirm(r, AGENTAO_CONFIRMATION_DENY, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "already finished");
        agentao_error_free(err);
        CHECK_STATUS(agentao_reply_fail(r, "again", NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
    }
    CHECK(tu_wait_count(&done.calls, 1, 10000));
    CHECK_STATUS(atomic_load(&done.status), AGENTAO_STATUS_OK);
    char *path = tu_printf("%s/o.txt", dir);
    CHECK_MSG(tu_file_exists(path), "the first answer (allow) did not take");
    free(path);
    agentao_agent_free(a);
    tu_done_destroy(&done);
    tu_recorder_destroy(&rec);
    free(cfg);
}

int main(void) {
    test_fs_read_later();
    test_fs_never_answered();
    test_fs_unanswered_at_cancel();
    test_memory(false);
    test_memory(true);
    test_shell();
    test_reply_twice();
    return tu_finish("test_answer_handles");
}
