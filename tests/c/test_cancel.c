/* Cancellation: before the turn, during a streaming response, during a pending confirmation
 * (the turn wakes at once), from inside callbacks; tokens: one-way children, first reason
 * wins, the reason is copied. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static const char *WRITE_TURN =
    "{\"tool_calls\":[{\"id\":\"w1\",\"name\":\"write_file\",\"arguments\":{\"file_path\":\"out.txt\",\"content\":\"x\"}}]},"
    "{\"text\":\"written\"}";

static void test_tokens(void) {
    tu_section("tokens: reason copy, first reason wins, NULL reason");
    agentao_cancel_token *t = agentao_cancel_token_new();
    CHECK(t != NULL);
    CHECK(!agentao_cancel_token_is_cancelled(t));
    char *r = (char *)1;
    CHECK_STATUS(agentao_cancel_token_reason(t, &r, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(r, "");
    agentao_string_free(r);
    char buf[32];
    strcpy(buf, "first-reason");
    agentao_cancel_token_cancel(t, buf);
    memset(buf, 'X', sizeof buf - 1); /* the token copied the reason */
    buf[sizeof buf - 1] = '\0';
    agentao_cancel_token_cancel(t, "second-reason");
    CHECK(agentao_cancel_token_is_cancelled(t));
    CHECK_STATUS(agentao_cancel_token_reason(t, &r, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(r, "first-reason");
    /* Each call hands out its own copy. */
    char *r2 = NULL;
    CHECK_STATUS(agentao_cancel_token_reason(t, &r2, NULL), AGENTAO_STATUS_OK);
    CHECK(r2 != r);
    CHECK_STR_EQ(r2, "first-reason");
    agentao_string_free(r);
    agentao_string_free(r2);
    agentao_cancel_token_free(t);

    t = agentao_cancel_token_new();
    agentao_cancel_token_cancel(t, NULL);
    CHECK_STATUS(agentao_cancel_token_reason(t, &r, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(r, "user-cancel");
    agentao_string_free(r);
    agentao_cancel_token_free(t);

    tu_section("child tokens are linked one way");
    agentao_cancel_token *parent = agentao_cancel_token_new();
    agentao_cancel_token *a = agentao_cancel_token_child(parent);
    agentao_cancel_token *b = agentao_cancel_token_child(parent);
    agentao_cancel_token *grandchild = agentao_cancel_token_child(b);
    CHECK(a && b && grandchild);
    agentao_cancel_token_cancel(a, "child-only");
    CHECK(agentao_cancel_token_is_cancelled(a));
    CHECK_MSG(!agentao_cancel_token_is_cancelled(parent), "a child cancelled its parent");
    CHECK(!agentao_cancel_token_is_cancelled(b));
    agentao_cancel_token_cancel(parent, "parent-stop");
    CHECK(agentao_cancel_token_is_cancelled(b));
    CHECK(agentao_cancel_token_is_cancelled(grandchild));
    CHECK_STATUS(agentao_cancel_token_reason(grandchild, &r, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(r, "parent-stop");
    agentao_string_free(r);
    CHECK_STATUS(agentao_cancel_token_reason(a, &r, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(r, "child-only");
    agentao_string_free(r);
    /* A child of a cancelled parent starts cancelled. */
    agentao_cancel_token *late = agentao_cancel_token_child(parent);
    CHECK(agentao_cancel_token_is_cancelled(late));
    agentao_cancel_token_free(late);
    /* Freeing a handle does not cancel, and children outlive their parent's handle. */
    agentao_cancel_token *p2 = agentao_cancel_token_new();
    agentao_cancel_token *c2 = agentao_cancel_token_child(p2);
    agentao_cancel_token_free(p2);
    CHECK(!agentao_cancel_token_is_cancelled(c2));
    agentao_cancel_token_cancel(c2, "still usable");
    CHECK(agentao_cancel_token_is_cancelled(c2));
    agentao_cancel_token_free(c2);
    agentao_cancel_token_free(a);
    agentao_cancel_token_free(b);
    agentao_cancel_token_free(grandchild);
    agentao_cancel_token_free(parent);
}

static void test_cancel_before(void) {
    tu_section("cancel before the turn");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"first response\"}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    agentao_cancel_token *tok = agentao_cancel_token_new();
    agentao_cancel_token_cancel(tok, "stopped-early");
    char *text = (char *)1;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "hi", -1, tok, &text, &err), AGENTAO_STATUS_CANCELLED);
    CHECK(text == NULL);
    CHECK(err && agentao_error_status(err) == AGENTAO_STATUS_CANCELLED);
    CHECK_CONTAINS(agentao_error_message(err), "stopped-early");
    agentao_error_free(err);
    char *last = tu_last_turn(a);
    CHECK_CONTAINS(last, TU_KV("status", "cancelled"));
    CHECK_CONTAINS(last, TU_KV("error", "stopped-early"));
    CHECK_CONTAINS(last, TU_KV("text", "[Cancelled: stopped-early]"));
    CHECK_CONTAINS(last, "\"incomplete_reason\":null");
    free(last);
    CHECK(tu_recorder_find(&rec, "llm_call_started", 0) == NULL); /* no model call */
    char *ev = tu_recorder_find(&rec, "turn_end", 0);
    CHECK_CONTAINS(ev, TU_KV("status", "cancelled"));
    free(ev);
    /* The script's first response is still unused. */
    CHECK_STATUS(agentao_agent_chat(a, "hi", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "first response");
    agentao_string_free(text);
    agentao_cancel_token_free(tok);
    agentao_agent_free(a);
out:
    tu_recorder_destroy(&rec);
}

struct canceller {
    agentao_cancel_token *tok;
    atomic_int *wait_for; /* counter to reach 1 first (may be NULL) */
    unsigned delay_ms;
    const char *reason;
    uint64_t at_ms;
    pthread_t thread;
};

static void *cancel_later(void *arg) {
    struct canceller *c = arg;
    if (c->wait_for) tu_wait_count(c->wait_for, 1, 10000);
    tu_sleep_ms(c->delay_ms);
    c->at_ms = tu_now_ms();
    agentao_cancel_token_cancel(c->tok, c->reason);
    return NULL;
}

static void test_cancel_during_stream(void) {
    tu_section("cancel during a slow stream");
    const char *dir = tu_workspace();
    /* 100 chunks, 20 ms apart: two seconds if nobody cancels. */
    char *cfg = tu_config(dir, "{\"repeat_text\":{\"unit\":\"word \",\"count\":100},\"delay_ms\":20}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    struct canceller c = {agentao_cancel_token_new(), NULL, 300, "user-hit-stop", 0, 0};
    pthread_create(&c.thread, NULL, cancel_later, &c);
    char *text = (char *)1;
    CHECK_STATUS(agentao_agent_chat(a, "talk", -1, c.tok, &text, NULL), AGENTAO_STATUS_CANCELLED);
    uint64_t returned = tu_now_ms();
    pthread_join(c.thread, NULL);
    CHECK(text == NULL);
    CHECK_MSG(returned - c.at_ms < TU_BOUND_MS(500), "chat returned %llu ms after the cancel",
              (unsigned long long)(returned - c.at_ms));
    char *last = tu_last_turn(a);
    CHECK_CONTAINS(last, TU_KV("status", "cancelled"));
    CHECK_CONTAINS(last, TU_KV("error", "user-hit-stop"));
    CHECK_CONTAINS(last, "\"finish_reason_missing\":false");
    char *partial = tu_json_str(last, "text");
    CHECK_MSG(partial && strncmp(partial, "word word ", 10) == 0, "partial text: %s", partial);
    CHECK_MSG(partial && strlen(partial) < 500, "the whole text streamed: no partial");
    /* The partial text is what was streamed. */
    char *streamed = tu_printf("%s", "");
    for (int i = 0;; i++) {
        char *ev = tu_recorder_find(&rec, "llm_text", i);
        if (!ev) break;
        char *chunk = tu_json_str(ev, "chunk");
        char *joined = tu_printf("%s%s", streamed, chunk ? chunk : "");
        free(streamed);
        streamed = joined;
        free(chunk);
        free(ev);
    }
    CHECK_STR_EQ(partial, streamed);
    free(streamed);
    free(partial);
    free(last);
    agentao_cancel_token_free(c.tok);
    agentao_agent_free(a);
out:
    tu_recorder_destroy(&rec);
}

static void test_cancel_pending_confirmation(void) {
    tu_section("cancel during a pending confirmation wakes the turn at once");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.confirm_mode = TU_CONFIRM_DEFER; /* the host never answers (until after) */
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    struct canceller c = {agentao_cancel_token_new(), &rec.confirms, 50, "no-answer-coming", 0, 0};
    pthread_create(&c.thread, NULL, cancel_later, &c);
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "write", -1, c.tok, &text, NULL), AGENTAO_STATUS_CANCELLED);
    uint64_t returned = tu_now_ms();
    pthread_join(c.thread, NULL);
    printf("FIGURE host.never_answered_confirm cancel_to_return_ms=%llu\n",
           (unsigned long long)(returned - c.at_ms));
    CHECK_MSG(returned - c.at_ms < TU_BOUND_MS(1000), "chat returned %llu ms after the cancel",
              (unsigned long long)(returned - c.at_ms));
    char *last = tu_last_turn(a);
    CHECK_CONTAINS(last, TU_KV("status", "cancelled"));
    CHECK_CONTAINS(last, TU_KV("error", "no-answer-coming"));
    free(last);
    /* Orphaned call backfilled, then the cancel marker. */
    char *hist = tu_history(a);
    CHECK_CONTAINS(hist, "\"tool_call_id\":\"w1\"");
    CHECK_CONTAINS(hist, "[Cancelled: no-answer-coming]");
    free(hist);
    /* The late answer is harmless and runs nothing. */
    CHECK_STATUS(tu_answer_confirm(&rec, AGENTAO_CONFIRMATION_ALLOW, 1000), AGENTAO_STATUS_OK);
    tu_sleep_ms(50);
    char *path = tu_printf("%s/out.txt", dir);
    CHECK(!tu_file_exists(path));
    free(path);
    agentao_cancel_token_free(c.tok);
    agentao_agent_free(a);
out:
    tu_recorder_destroy(&rec);
}

static void cancel_on_text(tu_recorder *rec, const char *ev) {
    if (strstr(ev, "\"type\":\"llm_text\"")) agentao_cancel_token_cancel(rec->user, "cancelled-in-emit");
}

static void cancel_in_confirm(void *ud, const char *tool, const char *desc, const char *args,
                              const char *call_id, struct agentao_reply *reply) {
    tu_recorder *rec = ud;
    agentao_cancel_token_cancel(rec->user, "cancelled-in-confirm");
    /* Approve anyway: the cancel must win, the call must not run. */
    agentao_reply_confirm(reply, AGENTAO_CONFIRMATION_ALLOW, NULL);
    atomic_fetch_add(&rec->confirms, 1);
}

static void test_cancel_in_callbacks(void) {
    tu_section("cancel inside emit");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"abcdefghijklmnopqrstuvwxyz\",\"chunk_size\":1,\"delay_ms\":5}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_cancel_token *tok = agentao_cancel_token_new();
    rec.user = tok;
    rec.on_event = cancel_on_text;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "abc", -1, tok, &text, NULL), AGENTAO_STATUS_CANCELLED);
        char *last = tu_last_turn(a);
        CHECK_CONTAINS(last, TU_KV("error", "cancelled-in-emit"));
        char *partial = tu_json_str(last, "text");
        CHECK_MSG(partial && strlen(partial) < 26, "not cut short: %s", partial);
        free(partial);
        free(last);
        agentao_agent_free(a);
    }
    agentao_cancel_token_free(tok);
    tu_recorder_destroy(&rec);

    tu_section("cancel inside confirm_tool (then approve): the call does not run");
    dir = tu_workspace();
    cfg = tu_config(dir, WRITE_TURN, NULL);
    tu_recorder_init(&rec);
    tok = agentao_cancel_token_new();
    rec.user = tok;
    t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    t.confirm_tool = cancel_in_confirm;
    a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        tu_done d;
        tu_done_init(&d);
        CHECK_STATUS(agentao_agent_run(a, "write", -1, tok, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
        CHECK(tu_wait_count(&d.calls, 1, 10000));
        CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);
        CHECK_CONTAINS(d.outcome, TU_KV("error", "cancelled-in-confirm"));
        CHECK(atomic_load(&rec.confirms) == 1);
        char *path = tu_printf("%s/out.txt", dir);
        CHECK_MSG(!tu_file_exists(path), "write_file ran in a cancelled turn");
        free(path);
        tu_done_destroy(&d);
        agentao_agent_free(a);
    }
    agentao_cancel_token_free(tok);
    tu_recorder_destroy(&rec);
}

static void test_turn_link_is_one_way(void) {
    tu_section("the host token is linked one way to the turn");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"slow\",\"chunk_size\":1,\"delay_ms\":200}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    agentao_cancel_token *tok = agentao_cancel_token_new();
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(a, "x", -1, tok, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    tu_sleep_ms(50);
    agentao_agent_free(a); /* cancels the turn with "session-closed" */
    CHECK(tu_wait_count(&d.calls, 1, 5000));
    CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);
    CHECK_CONTAINS(d.outcome, TU_KV("error", "session-closed"));
    CHECK_MSG(!agentao_cancel_token_is_cancelled(tok), "cancelling the turn cancelled the host's token");
    agentao_cancel_token_free(tok);
    tu_done_destroy(&d);
}

/* ---- watches ------------------------------------------------------------------------------- */

typedef struct watch {
    atomic_int fired;
    atomic_int freed;
    atomic_int freed_after_fired; /* userdata_free came after the callback */
    pthread_t thread;             /* the thread the callback ran on */
    char reason[64];
    agentao_cancel_token *inner;  /* a blocking-call probe: set to cancel this one from the callback */
    agentao_agent *agent;         /* when set, a blocking call on it is tried in the callback */
    agentao_status reentrant;     /* what that call answered */
} watch;

static void watch_fired(void *ud, const char *reason) {
    watch *w = ud;
    w->thread = pthread_self();
    snprintf(w->reason, sizeof w->reason, "%s", reason);
    /* Cancelling another token from inside the callback is allowed (no lock is held). */
    if (w->inner) agentao_cancel_token_cancel(w->inner, "from a watch");
    if (w->agent) {
        char *text = NULL;
        w->reentrant = agentao_agent_chat(w->agent, "x", -1, NULL, &text, NULL);
        agentao_string_free(text);
    }
    atomic_fetch_add(&w->fired, 1);
}

static void watch_freed(void *ud) {
    watch *w = ud;
    if (atomic_load(&w->fired)) atomic_fetch_add(&w->freed_after_fired, 1);
    atomic_fetch_add(&w->freed, 1);
}

typedef struct canceller_arg {
    agentao_cancel_token *tok;
    pthread_t thread;
} canceller_arg;

static void *cancel_from_thread(void *arg) {
    canceller_arg *c = arg;
    c->thread = pthread_self();
    agentao_cancel_token_cancel(c->tok, "from a thread");
    return NULL;
}

static void free_the_handle(void *ud, const char *reason) {
    (void)reason;
    agentao_cancel_token_free(ud);
}

static void test_watches(void) {
    tu_section("a watch runs once, on the cancelling thread, then userdata_free");
    agentao_cancel_token *tok = agentao_cancel_token_new();
    watch w;
    memset(&w, 0, sizeof w);
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"hi\"}", NULL);
    w.agent = tu_agent(cfg, NULL);
    free(cfg);
    CHECK(w.agent != NULL);
    uint64_t id = 0;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_cancel_token_watch(tok, watch_fired, &w, watch_freed, &id, &err), AGENTAO_STATUS_OK);
    CHECK(err == NULL);
    CHECK(id != 0);
    CHECK(atomic_load(&w.fired) == 0 && atomic_load(&w.freed) == 0);
    canceller_arg c = {.tok = tok};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancel_from_thread, &c) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(atomic_load(&w.fired) == 1);
    CHECK(pthread_equal(w.thread, c.thread));
    CHECK_STR_EQ(w.reason, "from a thread");
    CHECK_MSG(atomic_load(&w.freed) == 1 && atomic_load(&w.freed_after_fired) == 1,
              "userdata_free ran %d times (%d after the callback)", atomic_load(&w.freed),
              atomic_load(&w.freed_after_fired));
    CHECK_STATUS(w.reentrant, AGENTAO_STATUS_REENTRANT);
    agentao_agent_free(w.agent);
    agentao_cancel_token_cancel(tok, "again");
    CHECK(atomic_load(&w.fired) == 1);
    /* A watch that already fired cannot be removed. */
    CHECK(!agentao_cancel_token_unwatch(tok, id));

    tu_section("a watch of a cancelled token runs at once, on the caller's thread");
    watch now;
    memset(&now, 0, sizeof now);
    id = 7;
    CHECK_STATUS(agentao_cancel_token_watch(tok, watch_fired, &now, watch_freed, &id, NULL), AGENTAO_STATUS_OK);
    CHECK(id == 0);
    CHECK(atomic_load(&now.fired) == 1 && atomic_load(&now.freed) == 1);
    CHECK(pthread_equal(now.thread, pthread_self()));
    CHECK_STR_EQ(now.reason, "from a thread");
    agentao_cancel_token_free(tok);

    tu_section("a parent's cancel reaches its child's watch; a removed watch never runs");
    agentao_cancel_token *parent = agentao_cancel_token_new();
    agentao_cancel_token *child = agentao_cancel_token_child(parent);
    agentao_cancel_token *other = agentao_cancel_token_new();
    watch wc, removed;
    memset(&wc, 0, sizeof wc);
    memset(&removed, 0, sizeof removed);
    wc.inner = other;
    uint64_t cid = 0, rid = 0;
    CHECK_STATUS(agentao_cancel_token_watch(child, watch_fired, &wc, watch_freed, &cid, NULL), AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_cancel_token_watch(child, watch_fired, &removed, watch_freed, &rid, NULL), AGENTAO_STATUS_OK);
    CHECK(cid != rid);
    CHECK(agentao_cancel_token_unwatch(child, rid));
    CHECK_MSG(atomic_load(&removed.freed) == 1, "userdata_free of a removed watch ran %d times",
              atomic_load(&removed.freed));
    CHECK(!agentao_cancel_token_unwatch(child, rid));
    agentao_cancel_token_cancel(parent, "parent");
    CHECK(atomic_load(&wc.fired) == 1);
    CHECK_STR_EQ(wc.reason, "parent");
    CHECK(agentao_cancel_token_is_cancelled(other));
    CHECK(atomic_load(&removed.fired) == 0 && atomic_load(&removed.freed) == 1);
    agentao_cancel_token_free(parent);
    agentao_cancel_token_free(child);
    agentao_cancel_token_free(other);

    tu_section("a watch of a token nobody cancels is released with the token");
    agentao_cancel_token *lone = agentao_cancel_token_new();
    watch never;
    memset(&never, 0, sizeof never);
    CHECK_STATUS(agentao_cancel_token_watch(lone, watch_fired, &never, watch_freed, &id, NULL), AGENTAO_STATUS_OK);
    agentao_cancel_token_free(lone);
    CHECK(atomic_load(&never.fired) == 0);
    CHECK_MSG(atomic_load(&never.freed) == 1, "userdata_free ran %d times", atomic_load(&never.freed));

    tu_section("a turn's cancel reaches a watch of its host token's child");
    cfg = tu_config(dir, "{\"text\":\"slow\",\"chunk_size\":1,\"delay_ms\":200}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (a) {
        agentao_cancel_token *host = agentao_cancel_token_new();
        agentao_cancel_token *sub = agentao_cancel_token_child(host);
        watch tw;
        memset(&tw, 0, sizeof tw);
        CHECK_STATUS(agentao_cancel_token_watch(sub, watch_fired, &tw, watch_freed, &id, NULL), AGENTAO_STATUS_OK);
        tu_done d;
        tu_done_init(&d);
        CHECK_STATUS(agentao_agent_run(a, "x", -1, host, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
        tu_sleep_ms(50);
        agentao_cancel_token_cancel(host, "stop");
        CHECK(tu_wait_count(&d.calls, 1, 5000));
        CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);
        CHECK(atomic_load(&tw.fired) == 1);
        CHECK_STR_EQ(tw.reason, "stop");
        tu_done_destroy(&d);
        agentao_cancel_token_free(sub);
        agentao_cancel_token_free(host);
        agentao_agent_free(a);
    }

    tu_section("a watch may free the handle its cancel came through");
    agentao_cancel_token *gone = agentao_cancel_token_new();
    CHECK_STATUS(agentao_cancel_token_watch(gone, free_the_handle, gone, NULL, &id, NULL), AGENTAO_STATUS_OK);
    agentao_cancel_token_cancel(gone, "bye"); /* the handle is freed inside */
    gone = agentao_cancel_token_new();
    agentao_cancel_token_cancel(gone, "before");
    CHECK_STATUS(agentao_cancel_token_watch(gone, free_the_handle, gone, NULL, &id, NULL), AGENTAO_STATUS_OK);
    CHECK(id == 0);

    tu_section("watch: NULL arguments");
    watch unused;
    memset(&unused, 0, sizeof unused);
    tok = agentao_cancel_token_new();
    CHECK_STATUS(agentao_cancel_token_watch(NULL, watch_fired, &unused, watch_freed, &id, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "token");
    agentao_error_free(err);
    err = NULL;
    CHECK_STATUS(agentao_cancel_token_watch(tok, NULL, &unused, watch_freed, &id, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "callback");
    agentao_error_free(err);
    err = NULL;
    CHECK_STATUS(agentao_cancel_token_watch(tok, watch_fired, &unused, watch_freed, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "watch_id_out");
    agentao_error_free(err);
    /* The userdata is the library's from the call on: each refused watch ran its finalizer
       once, before returning. */
    CHECK(atomic_load(&unused.freed) == 3);
    CHECK(!agentao_cancel_token_unwatch(NULL, 1));
    CHECK(!agentao_cancel_token_unwatch(tok, 0));
    agentao_cancel_token_free(tok);
}

int main(void) {
    test_tokens();
    test_cancel_before();
    test_cancel_during_stream();
    test_cancel_pending_confirmation();
    test_cancel_in_callbacks();
    test_turn_link_is_one_way();
    test_watches();
    return tu_finish("test_cancel");
}
