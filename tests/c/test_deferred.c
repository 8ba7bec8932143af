/* Deferred replies: confirm_tool and on_max_iterations answered later from another thread,
 * or synchronously inside the callback; failed replies; reply timeouts; and late replies after
 * the turn was cancelled or the agent freed, which must be harmless. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static const char *WRITE_TURN =
    "{\"tool_calls\":[{\"id\":\"w1\",\"name\":\"write_file\",\"arguments\":{\"file_path\":\"out.txt\",\"content\":\"deferred\"}}]},"
    "{\"text\":\"written\"},"
    "{\"text\":\"second turn\"}";

static const char *LOOP_TURN =
    "{\"repeat\":3,\"text\":\"iteration {i}\",\"tool_calls\":[{\"id\":\"l{i}\",\"name\":\"list_directory\",\"arguments\":{\"directory_path\":\"./x{i}\"}}]},"
    "{\"text\":\"after the budget\"}";

struct answerer {
    tu_recorder *rec;
    unsigned delay_ms;
    int kind; /* 0 confirm allow, 1 json, 2 fail */
    const char *json;
    atomic_int status;
    pthread_t thread;
    pthread_t self_seen;
};

static void *answer_later(void *arg) {
    struct answerer *an = arg;
    agentao_reply *r = NULL;
    uint64_t end = tu_now_ms() + 10000;
    while (!(r = atomic_exchange(&an->rec->pending_reply, NULL)) && tu_now_ms() < end) tu_sleep_ms(2);
    if (!r) {
        atomic_store(&an->status, -1);
        return NULL;
    }
    tu_sleep_ms(an->delay_ms);
    agentao_status st;
    agentao_error *err = NULL;
    if (an->kind == 0) st = agentao_reply_confirm(r, AGENTAO_CONFIRMATION_ALLOW, &err);
    else if (an->kind == 1) st = agentao_reply_json(r, an->json, &err);
    else st = agentao_reply_fail(r, "the operator said no", &err);
    agentao_error_free(err);
    atomic_store(&an->status, (int)st);
    return NULL;
}

static void start_answerer(struct answerer *an, tu_recorder *rec, int kind, const char *json, unsigned delay) {
    an->rec = rec;
    an->kind = kind;
    an->json = json;
    an->delay_ms = delay;
    atomic_store(&an->status, -2);
    pthread_create(&an->thread, NULL, answer_later, an);
}

static void test_confirm_deferred(void) {
    tu_section("confirm_tool answered later from another thread");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.confirm_mode = TU_CONFIRM_DEFER;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        struct answerer an;
        start_answerer(&an, &rec, 0, NULL, 150);
        uint64_t t0 = tu_now_ms();
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        uint64_t took = tu_now_ms() - t0;
        pthread_join(an.thread, NULL);
        CHECK_STATUS(atomic_load(&an.status), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "written");
        CHECK_MSG(took >= 140, "the turn did not wait for the deferred answer (%llu ms)",
                  (unsigned long long)took);
        agentao_string_free(text);
        char *path = tu_printf("%s/out.txt", dir);
        char *got = tu_read_file(path);
        CHECK_STR_EQ(got, "deferred");
        free(got);
        free(path);
        CHECK(atomic_load(&rec.confirms) == 1);
        agentao_agent_free(a);
    }
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
    tu_recorder_destroy(&rec);
}

static void test_confirm_sync(void) {
    tu_section("confirm_tool answered synchronously inside the callback (deny)");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.confirm_mode = TU_CONFIRM_DENY;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "written"); /* the scripted model does not care */
        agentao_string_free(text);
        char *path = tu_printf("%s/out.txt", dir);
        CHECK(!tu_file_exists(path));
        free(path);
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "Tool execution declined: 'write_file' needed approval and was not approved.");
        free(hist);
        agentao_agent_free(a);
    }
    tu_recorder_destroy(&rec);
}

static void test_confirm_fail_deferred(void) {
    tu_section("confirm_tool failed later: HOST_ERROR, turn status error");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.confirm_mode = TU_CONFIRM_DEFER;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        struct answerer an;
        start_answerer(&an, &rec, 2, NULL, 20);
        char *text = (char *)1;
        agentao_error *err = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, &err), AGENTAO_STATUS_HOST_ERROR);
        CHECK(text == NULL);
        CHECK_CONTAINS(agentao_error_message(err), "the operator said no");
        agentao_error_free(err);
        pthread_join(an.thread, NULL);
        CHECK_STATUS(atomic_load(&an.status), AGENTAO_STATUS_OK);
        char *last = tu_last_turn(a);
        CHECK_CONTAINS(last, TU_KV("status", "error"));
        CHECK_CONTAINS(last, TU_KV("error", "the operator said no"));
        CHECK_CONTAINS(last, TU_KV("text", ""));
        free(last);
        /* The unanswered call was backfilled in history. */
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "\"tool_call_id\":\"w1\"");
        free(hist);
        agentao_agent_free(a);
    }
    tu_recorder_destroy(&rec);
}

static void test_max_iterations_deferred(void) {
    for (int sync = 0; sync < 2; sync++) {
        tu_section(sync ? "on_max_iterations answered inside the callback (continue)"
                        : "on_max_iterations answered later from another thread (continue)");
        const char *dir = tu_workspace();
        char *cfg = tu_config(dir, LOOP_TURN, NULL);
        tu_recorder rec;
        tu_recorder_init(&rec);
        rec.max_iter_answer = sync ? "{\"action\":\"continue\"}" : NULL;
        agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
        agentao_agent *a = tu_agent(cfg, &t);
        free(cfg);
        if (!a) {
            tu_recorder_destroy(&rec);
            continue;
        }
        struct answerer an;
        if (!sync) start_answerer(&an, &rec, 1, "{\"action\":\"continue\"}", 100);
        /* Budget 2: two tool calls, the callback says continue, one more tool call, then the
         * final text. Exactly one on_max_iterations. */
        uint64_t t0 = tu_now_ms();
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "loop", 2, NULL, &text, NULL), AGENTAO_STATUS_OK);
        uint64_t took = tu_now_ms() - t0;
        if (!sync) {
            pthread_join(an.thread, NULL);
            CHECK_STATUS(atomic_load(&an.status), AGENTAO_STATUS_OK);
            CHECK_MSG(took >= 95, "the turn did not wait for the deferred answer (%llu ms)",
                      (unsigned long long)took);
        }
        CHECK_STR_EQ(text, "after the budget");
        agentao_string_free(text);
        CHECK(atomic_load(&rec.max_iters) == 1);
        CHECK(rec.last_max_count == 2);
        CHECK_CONTAINS(rec.last_pending_calls, TU_KV("name", "list_directory"));
        char *last = tu_last_turn(a);
        CHECK_CONTAINS(last, "\"tool_count\":3");
        CHECK_CONTAINS(last, "\"incomplete_reason\":null");
        free(last);
        agentao_agent_free(a);
        CHECK(tu_wait_count(&rec.freed, 1, 5000));
        tu_recorder_destroy(&rec);
    }
}

static void test_late_reply_after_cancel(void) {
    tu_section("a late confirm reply after cancellation is harmless");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.confirm_mode = TU_CONFIRM_DEFER;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    agentao_cancel_token *tok = agentao_cancel_token_new();
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(a, "write", -1, tok, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&rec.confirms, 1, 10000));
    agentao_cancel_token_cancel(tok, "host-gave-up");
    CHECK(tu_wait_count(&d.calls, 1, 5000));
    CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);
    CHECK_CONTAINS(d.outcome, TU_KV("error", "host-gave-up"));
    /* Now the host answers: accepted and ignored. */
    agentao_reply *r = atomic_exchange(&rec.pending_reply, NULL);
    CHECK(r != NULL);
    if (r) CHECK_STATUS(agentao_reply_confirm(r, AGENTAO_CONFIRMATION_ALLOW, NULL), AGENTAO_STATUS_OK);
    tu_sleep_ms(100);
    char *path = tu_printf("%s/out.txt", dir);
    CHECK_MSG(!tu_file_exists(path), "the cancelled call ran after its late approval");
    free(path);
    CHECK(atomic_load(&d.calls) == 1);
    /* The agent is fine: the next turn runs (the script's next response). */
    rec.confirm_mode = TU_CONFIRM_ALLOW;
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "again", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "written");
    agentao_string_free(text);
    agentao_cancel_token_free(tok);
    tu_done_destroy(&d);
    agentao_agent_free(a);
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
out:
    tu_recorder_destroy(&rec);
}

static void test_late_max_iter_reply_after_free(void) {
    tu_section("a late on_max_iterations reply after agentao_agent_free is harmless");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, LOOP_TURN, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.max_iter_answer = NULL;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(a, "loop", 1, NULL, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&rec.max_iters, 1, 10000));
    agentao_agent_free(a);
    CHECK(tu_wait_count(&d.calls, 1, 5000));
    CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);
    CHECK_CONTAINS(d.outcome, TU_KV("error", "session-closed"));
    /* The header's promise: userdata_free waits for every pending request. The host still
     * holds the reply (and may keep its state in userdata), so userdata must stay alive. */
    tu_sleep_ms(200);
    CHECK_MSG(atomic_load(&rec.freed) == 0,
              "userdata_free ran while the host still held an unanswered reply");
    agentao_reply *r = atomic_exchange(&rec.pending_reply, NULL);
    CHECK(r != NULL);
    if (r) CHECK_STATUS(agentao_reply_json(r, "{\"action\":\"continue\"}", NULL), AGENTAO_STATUS_OK);
    /* Answering the last pending request released the transport. */
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
    tu_sleep_ms(50);
    CHECK(atomic_load(&d.calls) == 1);
    tu_done_destroy(&d);
out:
    tu_recorder_destroy(&rec);
}

static void test_reply_timeout(void) {
    tu_section("reply_timeout_ms: an unanswered confirmation ends the turn with TIMEOUT");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, "\"reply_timeout_ms\":200");
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.confirm_mode = TU_CONFIRM_DEFER;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    uint64_t t0 = tu_now_ms();
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, NULL), AGENTAO_STATUS_TIMEOUT);
    uint64_t took = tu_now_ms() - t0;
    CHECK_MSG(took >= 190 && took < 5000, "timed out after %llu ms", (unsigned long long)took);
    char *last = tu_last_turn(a);
    CHECK_CONTAINS(last, TU_KV("status", "error"));
    free(last);
    /* The late answer is harmless. */
    CHECK_STATUS(tu_answer_confirm(&rec, AGENTAO_CONFIRMATION_ALLOW, 1000), AGENTAO_STATUS_OK);
    agentao_agent_free(a);
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
out:
    tu_recorder_destroy(&rec);
}

int main(void) {
    test_confirm_deferred();
    test_confirm_sync();
    test_confirm_fail_deferred();
    test_max_iterations_deferred();
    test_late_reply_after_cancel();
    test_late_max_iter_reply_after_free();
    test_reply_timeout();
    return tu_finish("test_deferred");
}
