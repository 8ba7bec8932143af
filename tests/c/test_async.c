/* Asynchronous turns: the completion fires exactly once with the outcome; a second concurrent
 * turn is refused with TURN_IN_PROGRESS; blocking calls inside callbacks are refused with
 * REENTRANT (never a deadlock); freeing the agent while a turn runs (or from inside its own
 * callback) cancels it, the completion still fires, and userdata_free runs once, after it. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static const char *WRITE_TURN =
    "{\"text\":\"About to write.\",\"tool_calls\":[{\"id\":\"w1\",\"name\":\"write_file\",\"arguments\":{\"file_path\":\"out.txt\",\"content\":\"x\"}}]},"
    "{\"text\":\"written\"}";

static void test_completion_once(void) {
    tu_section("agentao_agent_run: completion exactly once, with the outcome");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"async hello\",\"chunk_size\":3}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        tu_done d;
        tu_done_init(&d);
        agentao_error *err = (agentao_error *)1;
        CHECK_STATUS(agentao_agent_run(a, "hi", -1, NULL, tu_on_done, &d, &err), AGENTAO_STATUS_OK);
        CHECK(err == NULL);
        CHECK(tu_wait_count(&d.calls, 1, 10000));
        tu_sleep_ms(200);
        CHECK_MSG(atomic_load(&d.calls) == 1, "completion fired %d times", atomic_load(&d.calls));
        CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_OK);
        CHECK(d.message == NULL);
        CHECK_CONTAINS(d.outcome, TU_KV("type", "turn_outcome"));
        CHECK_CONTAINS(d.outcome, TU_KV("text", "async hello"));
        CHECK_CONTAINS(d.outcome, TU_KV("status", "ok"));
        CHECK_CONTAINS(d.outcome, "\"is_answer\":true");
        /* turn_end was emitted before the completion. */
        char *ev = tu_recorder_find(&rec, "turn_end", 0);
        CHECK(ev != NULL);
        free(ev);
        char *last = tu_last_turn(a);
        CHECK_STR_EQ(last, d.outcome);
        free(last);
        tu_done_destroy(&d);
        agentao_agent_free(a);
    }
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
    tu_recorder_destroy(&rec);
}

static void never_delta(void *ud, const char *d) {
    tu_fail_at(__FILE__, __LINE__, "on_delta fired for a refused call");
}

static void test_turn_in_progress(void) {
    tu_section("TURN_IN_PROGRESS for a second concurrent turn");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.confirm_mode = TU_CONFIRM_DEFER;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(a, "first", -1, NULL, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&rec.confirms, 1, 10000)); /* the first turn is waiting on us */
    size_t events_before = tu_recorder_count(&rec);

    uint64_t t0 = tu_now_ms();
    char *text = (char *)1;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "second", -1, NULL, &text, &err), AGENTAO_STATUS_TURN_IN_PROGRESS);
    CHECK(text == NULL);
    CHECK(err && agentao_error_status(err) == AGENTAO_STATUS_TURN_IN_PROGRESS);
    agentao_error_free(err);
    CHECK_STATUS(agentao_agent_run(a, "second", -1, NULL, tu_never_done, NULL, NULL), AGENTAO_STATUS_TURN_IN_PROGRESS);
    CHECK_STATUS(agentao_agent_stream(a, "second", -1, NULL, never_delta, tu_never_done, NULL, NULL),
                 AGENTAO_STATUS_TURN_IN_PROGRESS);
    agentao_stream *s = (agentao_stream *)1;
    CHECK_STATUS(agentao_agent_stream_open(a, "second", -1, NULL, &s, NULL), AGENTAO_STATUS_TURN_IN_PROGRESS);
    CHECK(s == NULL);
    CHECK_STATUS(agentao_agent_set_history(a, "[]", NULL), AGENTAO_STATUS_TURN_IN_PROGRESS);
    CHECK_MSG(tu_now_ms() - t0 < 1000, "the refusals were not immediate");
    /* Refused turns emit nothing and leave last_turn alone. */
    CHECK(tu_recorder_count(&rec) == events_before);
    char *last = tu_last_turn(a);
    CHECK_STR_EQ(last, "null");
    free(last);

    CHECK_STATUS(tu_answer_confirm(&rec, AGENTAO_CONFIRMATION_ALLOW, 1000), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&d.calls, 1, 10000));
    CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(d.outcome, TU_KV("text", "written"));
    CHECK(tu_recorder_find(&rec, "turn_begin", 1) == NULL);
    tu_done_destroy(&d);
    agentao_agent_free(a);
out:
    tu_recorder_destroy(&rec);
}

/* ---- REENTRANT ---------------------------------------------------------------------------- */

struct reentry {
    agentao_agent *agent;       /* the agent whose callbacks we are in */
    agentao_agent *other;       /* an idle agent */
    agentao_stream *stream;     /* a pull stream of the other agent */
    agentao_host_event_stream *events;
    atomic_int emit_chat, emit_other_chat, emit_next, emit_host_next, emit_checked;
    atomic_int confirm_chat, confirm_next, confirm_checked;
    atomic_int done_chat, done_next, done_checked;
};

static int chat_status(agentao_agent *a) {
    char *text = (char *)1;
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_chat(a, "nested", -1, NULL, &text, &err);
    if (text != NULL) tu_fail_at(__FILE__, __LINE__, "nested chat left text_out set");
    if (st != AGENTAO_STATUS_OK && agentao_error_status(err) != st)
        tu_fail_at(__FILE__, __LINE__, "nested chat: error object disagrees");
    agentao_error_free(err);
    agentao_string_free(text == (char *)1 ? NULL : text);
    return (int)st;
}

static int next_status(agentao_stream *s) {
    char *item = (char *)1;
    agentao_status st = agentao_stream_next(s, 0, &item, NULL);
    if (item == (char *)1) tu_fail_at(__FILE__, __LINE__, "stream_next did not reset item_json_out");
    agentao_string_free(item == (char *)1 ? NULL : item);
    return (int)st;
}

static void reentry_on_event(tu_recorder *rec, const char *ev) {
    struct reentry *re = rec->user;
    if (!strstr(ev, "\"type\":\"turn_begin\"")) return;
    atomic_store(&re->emit_chat, chat_status(re->agent));
    atomic_store(&re->emit_other_chat, chat_status(re->other));
    atomic_store(&re->emit_next, next_status(re->stream));
    char *item = (char *)1;
    atomic_store(&re->emit_host_next, (int)agentao_host_event_stream_next(re->events, 0, &item, NULL));
    if (item != NULL) tu_fail_at(__FILE__, __LINE__, "host_event_stream_next left its output set");
    atomic_fetch_add(&re->emit_checked, 1);
}

static void reentry_confirm(void *ud, const char *tool, const char *desc, const char *args,
                            const char *call_id, struct agentao_reply *reply) {
    tu_recorder *rec = ud;
    struct reentry *re = rec->user;
    atomic_store(&re->confirm_chat, chat_status(re->agent));
    atomic_store(&re->confirm_next, next_status(re->stream));
    atomic_fetch_add(&re->confirm_checked, 1);
    agentao_reply_confirm(reply, AGENTAO_CONFIRMATION_ALLOW, NULL);
}

static void reentry_done(void *ud, agentao_status status, const char *outcome, const agentao_error *err) {
    struct reentry *re = ud;
    atomic_store(&re->done_chat, chat_status(re->agent));
    atomic_store(&re->done_next, next_status(re->stream));
    atomic_fetch_add(&re->done_checked, 1);
}

static void test_reentrant(void) {
    tu_section("REENTRANT inside emit, confirm_tool and the completion");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, NULL);
    char *other_cfg = tu_config(dir, "{\"text\":\"other\",\"delay_ms\":3000}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    struct reentry re;
    memset(&re, 0, sizeof re);
    rec.user = &re;
    rec.on_event = reentry_on_event;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    t.confirm_tool = reentry_confirm;
    re.agent = tu_agent(cfg, &t);
    re.other = tu_agent(other_cfg, NULL);
    free(cfg);
    free(other_cfg);
    if (!re.agent || !re.other) goto out;
    CHECK_STATUS(agentao_agent_host_events_open(re.agent, NULL, &re.events, NULL), AGENTAO_STATUS_OK);
    /* A pull stream whose turn is slow, so a nested next would have to block. */
    CHECK_STATUS(agentao_agent_stream_open(re.other, "slow", -1, NULL, &re.stream, NULL), AGENTAO_STATUS_OK);
    uint64_t t0 = tu_now_ms();
    CHECK_STATUS(agentao_agent_run(re.agent, "write", -1, NULL, reentry_done, &re, NULL), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&re.done_checked, 1, 10000));
    CHECK_MSG(tu_now_ms() - t0 < 2500, "a nested call blocked");
    CHECK(atomic_load(&re.emit_checked) == 1);
    CHECK(atomic_load(&re.confirm_checked) == 1);
    CHECK_STATUS(atomic_load(&re.emit_chat), AGENTAO_STATUS_REENTRANT);
    CHECK_STATUS(atomic_load(&re.emit_other_chat), AGENTAO_STATUS_REENTRANT);
    CHECK_STATUS(atomic_load(&re.emit_next), AGENTAO_STATUS_REENTRANT);
    CHECK_STATUS(atomic_load(&re.emit_host_next), AGENTAO_STATUS_REENTRANT);
    CHECK_STATUS(atomic_load(&re.confirm_chat), AGENTAO_STATUS_REENTRANT);
    CHECK_STATUS(atomic_load(&re.confirm_next), AGENTAO_STATUS_REENTRANT);
    CHECK_STATUS(atomic_load(&re.done_chat), AGENTAO_STATUS_REENTRANT);
    CHECK_STATUS(atomic_load(&re.done_next), AGENTAO_STATUS_REENTRANT);
    /* The outer turn itself was fine. */
    char *last = tu_last_turn(re.agent);
    CHECK_CONTAINS(last, TU_KV("text", "written"));
    free(last);
    /* The other agent's stream was not disturbed: it still yields its delta. */
    char *item = NULL;
    CHECK_STATUS(agentao_stream_next(re.stream, 10000, &item, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(item, "{\"type\":\"text_delta\",\"text\":\"other\"}");
    agentao_string_free(item);
out:
    agentao_stream_free(re.stream);
    agentao_host_event_stream_free(re.events);
    agentao_agent_free(re.agent);
    agentao_agent_free(re.other);
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
    tu_recorder_destroy(&rec);
}

/* ---- agent_free while a turn runs ---------------------------------------------------------- */

struct free_order {
    atomic_int done_calls;
    atomic_int done_status;
    atomic_int freed_before_done; /* userdata_free had run when the completion fired */
    atomic_int freed;
    atomic_int done_before_free;  /* the completion had fired when userdata_free ran */
    char *outcome;
};

static void order_done(void *ud, agentao_status status, const char *outcome, const agentao_error *err) {
    struct free_order *fo = ud;
    atomic_store(&fo->freed_before_done, atomic_load(&fo->freed));
    free(fo->outcome);
    fo->outcome = outcome ? strdup(outcome) : NULL;
    atomic_store(&fo->done_status, (int)status);
    tu_sleep_ms(20); /* a slow completion: userdata_free must still wait for it */
    atomic_fetch_add(&fo->done_calls, 1);
}

static void order_free(void *ud) {
    struct free_order *fo = ud;
    atomic_store(&fo->done_before_free, atomic_load(&fo->done_calls));
    atomic_fetch_add(&fo->freed, 1);
}

static void slow_emit(void *ud, const char *ev) {}

static void test_free_while_running(void) {
    tu_section("agentao_agent_free while a turn streams");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"a long slow answer\",\"chunk_size\":1,\"delay_ms\":50}", NULL);
    struct free_order fo;
    memset(&fo, 0, sizeof fo);
    agentao_transport t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.userdata = &fo;
    t.userdata_free = order_free;
    t.emit = slow_emit;
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) return;
    CHECK_STATUS(agentao_agent_run(a, "talk", -1, NULL, order_done, &fo, NULL), AGENTAO_STATUS_OK);
    tu_sleep_ms(150);
    uint64_t t0 = tu_now_ms();
    agentao_agent_free(a); /* does not wait */
    CHECK_MSG(tu_now_ms() - t0 < 200, "agentao_agent_free waited for the turn");
    CHECK(tu_wait_count(&fo.done_calls, 1, 5000));
    CHECK(tu_wait_count(&fo.freed, 1, 5000));
    tu_sleep_ms(100);
    CHECK(atomic_load(&fo.done_calls) == 1);
    CHECK(atomic_load(&fo.freed) == 1);
    CHECK_STATUS(atomic_load(&fo.done_status), AGENTAO_STATUS_CANCELLED);
    CHECK_CONTAINS(fo.outcome, TU_KV("status", "cancelled"));
    CHECK_CONTAINS(fo.outcome, TU_KV("error", "session-closed"));
    CHECK_MSG(atomic_load(&fo.freed_before_done) == 0,
              "userdata_free ran before the turn's completion");
    CHECK_MSG(atomic_load(&fo.done_before_free) == 1,
              "userdata_free ran while the completion was still running");
    free(fo.outcome);
}

static void free_in_callback(tu_recorder *rec, const char *ev) {
    if (strstr(ev, "\"type\":\"llm_text\"")) {
        agentao_agent *a = atomic_exchange((_Atomic(agentao_agent *) *)&rec->user, NULL);
        if (a) agentao_agent_free(a);
    }
}

static void test_free_inside_callback(void) {
    tu_section("agentao_agent_free inside the agent's own emit callback");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"one two three four\",\"chunk_size\":2,\"delay_ms\":20}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.on_event = free_in_callback;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        rec.user = a;
        tu_done d;
        tu_done_init(&d);
        CHECK_STATUS(agentao_agent_run(a, "go", -1, NULL, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
        CHECK(tu_wait_count(&d.calls, 1, 10000));
        CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);
        CHECK_CONTAINS(d.outcome, TU_KV("error", "session-closed"));
        CHECK(tu_wait_count(&rec.freed, 1, 5000));
        tu_sleep_ms(50);
        CHECK(atomic_load(&d.calls) == 1);
        CHECK(tu_wait_count(&rec.freed, 1, 5000));
        char *ev = tu_recorder_find(&rec, "turn_end", 0);
        CHECK_CONTAINS(ev, TU_KV("status", "cancelled"));
        free(ev);
        tu_done_destroy(&d);
    }
    tu_recorder_destroy(&rec);
}

int main(void) {
    test_completion_once();
    test_turn_in_progress();
    test_reentrant();
    test_free_while_running();
    test_free_inside_callback();
    return tu_finish("test_async");
}
