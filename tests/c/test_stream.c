/* Streaming: the callback stream (deltas in order, one completion after them; a transport
 * without a subscribe slot, or with no slot at all, streams just the same); the pull stream (deltas, turn_outcome,
 * CLOSED; TIMEOUT; closing early cancels the turn with "async-cancel"); the host-event pull
 * stream (one per filter, permission_decision / tool_lifecycle events) and observers. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static const char *WRITE_TURN =
    "{\"tool_calls\":[{\"id\":\"w1\",\"name\":\"write_file\",\"arguments\":{\"file_path\":\"out.txt\",\"content\":\"x\"}}]},"
    "{\"text\":\"written\"}";

static void test_callback_stream(void) {
    tu_section("callback stream: deltas in order, then one completion");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir,
                          "{\"text\":\"Narration. \",\"tool_calls\":[{\"id\":\"l1\",\"name\":\"list_directory\",\"arguments\":{}}]},"
                          "{\"chunks\":[\"Hel\",\"lo \",\"wor\",\"ld\"]}",
                          NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        tu_done d;
        tu_done_init(&d);
        CHECK_STATUS(agentao_agent_stream(a, "hi", -1, NULL, tu_on_delta, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
        CHECK(tu_wait_count(&d.calls, 1, 10000));
        tu_sleep_ms(100);
        CHECK(atomic_load(&d.calls) == 1);
        CHECK(atomic_load(&d.deltas_after_done) == 0);
        CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_OK);
        CHECK(atomic_load(&d.n_deltas) == 5);
        CHECK_STR_EQ(d.deltas,
                     "{\"type\":\"text_delta\",\"text\":\"Narration. \"}\n"
                     "{\"type\":\"text_delta\",\"text\":\"Hel\"}\n"
                     "{\"type\":\"text_delta\",\"text\":\"lo \"}\n"
                     "{\"type\":\"text_delta\",\"text\":\"wor\"}\n"
                     "{\"type\":\"text_delta\",\"text\":\"ld\"}\n");
        /* Deltas are display-only: the outcome is the last call's text. */
        CHECK_CONTAINS(d.outcome, TU_KV("text", "Hello world"));
        tu_done_destroy(&d);
        agentao_agent_free(a);
    }
    tu_recorder_destroy(&rec);

    tu_section("no subscribe slot: both streams work, the library owns the fan-out");
    dir = tu_workspace();
    cfg = tu_config(dir, "{\"chunks\":[\"no \",\"stub\"]},{\"chunks\":[\"pulled \",\"too\"]}", NULL);
    tu_recorder_init(&rec);
    t = tu_recorder_transport(&rec, TU_SLOT_ALL & ~TU_SLOT_SUBSCRIBE);
    CHECK(t.subscribe == NULL && t.unsubscribe == NULL);
    a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        tu_done d;
        tu_done_init(&d);
        CHECK_STATUS(agentao_agent_stream(a, "hi", -1, NULL, tu_on_delta, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
        CHECK(tu_wait_count(&d.calls, 1, 10000));
        CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_OK);
        CHECK(atomic_load(&d.n_deltas) == 2);
        CHECK_STR_EQ(d.deltas,
                     "{\"type\":\"text_delta\",\"text\":\"no \"}\n"
                     "{\"type\":\"text_delta\",\"text\":\"stub\"}\n");
        CHECK_CONTAINS(d.outcome, TU_KV("text", "no stub"));
        CHECK(atomic_load(&rec.emits) > 0); /* the transport's own emit still hears the turn */
        agentao_stream *s = NULL;
        CHECK_STATUS(agentao_agent_stream_open(a, "again", -1, NULL, &s, NULL), AGENTAO_STATUS_OK);
        const char *want[] = {
            "{\"type\":\"text_delta\",\"text\":\"pulled \"}",
            "{\"type\":\"text_delta\",\"text\":\"too\"}",
        };
        for (int i = 0; i < 2; i++) {
            char *item = NULL;
            CHECK_STATUS(agentao_stream_next(s, 10000, &item, NULL), AGENTAO_STATUS_OK);
            CHECK_STR_EQ(item, want[i]);
            agentao_string_free(item);
        }
        char *item = NULL;
        CHECK_STATUS(agentao_stream_next(s, 10000, &item, NULL), AGENTAO_STATUS_OK);
        CHECK_CONTAINS(item, TU_KV("text", "pulled too"));
        agentao_string_free(item);
        CHECK_STATUS(agentao_stream_next(s, 100, &item, NULL), AGENTAO_STATUS_CLOSED);
        agentao_stream_free(s);
        tu_done_destroy(&d);
        agentao_agent_free(a);
    }
    tu_recorder_destroy(&rec);

    tu_section("a transport with no slot at all streams too");
    dir = tu_workspace();
    cfg = tu_config(dir, "{\"chunks\":[\"bare\"]}", NULL);
    agentao_transport bare;
    memset(&bare, 0, sizeof bare);
    bare.struct_size = (uint32_t)sizeof bare;
    a = tu_agent(cfg, &bare);
    free(cfg);
    if (a) {
        tu_done d;
        tu_done_init(&d);
        CHECK_STATUS(agentao_agent_stream(a, "hi", -1, NULL, tu_on_delta, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
        CHECK(tu_wait_count(&d.calls, 1, 10000));
        CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(d.deltas, "{\"type\":\"text_delta\",\"text\":\"bare\"}\n");
        tu_done_destroy(&d);
        agentao_agent_free(a);
    }
}

static void test_pull_stream(void) {
    tu_section("pull stream: deltas, turn_outcome, CLOSED");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir,
                          "{\"chunks\":[\"one \",\"two \",\"three\"]},"
                          "{\"text\":\"slow\",\"fault\":{\"type\":\"stall\",\"ms\":400}},"
                          "{\"repeat_text\":{\"unit\":\"tick \",\"count\":200},\"delay_ms\":10}",
                          NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    agentao_stream *s = NULL;
    CHECK_STATUS(agentao_agent_stream_open(a, "count", -1, NULL, &s, NULL), AGENTAO_STATUS_OK);
    const char *want[] = {
        "{\"type\":\"text_delta\",\"text\":\"one \"}",
        "{\"type\":\"text_delta\",\"text\":\"two \"}",
        "{\"type\":\"text_delta\",\"text\":\"three\"}",
    };
    for (int i = 0; i < 3; i++) {
        char *item = NULL;
        CHECK_STATUS(agentao_stream_next(s, 10000, &item, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(item, want[i]);
        agentao_string_free(item);
    }
    char *item = NULL;
    CHECK_STATUS(agentao_stream_next(s, 10000, &item, NULL), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(item, "{\"type\":\"turn_outcome\",");
    CHECK_CONTAINS(item, TU_KV("text", "one two three"));
    CHECK_CONTAINS(item, TU_KV("status", "ok"));
    agentao_string_free(item);
    for (int i = 0; i < 2; i++) { /* and stays closed */
        item = (char *)1;
        agentao_error *err = NULL;
        CHECK_STATUS(agentao_stream_next(s, 100, &item, &err), AGENTAO_STATUS_CLOSED);
        CHECK(item == NULL);
        CHECK(err && agentao_error_status(err) == AGENTAO_STATUS_CLOSED);
        agentao_error_free(err);
    }
    agentao_stream_free(s);

    tu_section("pull stream: TIMEOUT while nothing has arrived");
    CHECK_STATUS(agentao_agent_stream_open(a, "stall", -1, NULL, &s, NULL), AGENTAO_STATUS_OK);
    uint64_t t0 = tu_now_ms();
    item = (char *)1;
    CHECK_STATUS(agentao_stream_next(s, 50, &item, NULL), AGENTAO_STATUS_TIMEOUT);
    uint64_t took = tu_now_ms() - t0;
    CHECK(item == NULL);
    CHECK_MSG(took >= 45 && took < 350, "TIMEOUT after %llu ms", (unsigned long long)took);
    CHECK_STATUS(agentao_stream_next(s, 0, &item, NULL), AGENTAO_STATUS_TIMEOUT);
    CHECK_STATUS(agentao_stream_next(s, 10000, &item, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(item, "{\"type\":\"text_delta\",\"text\":\"slow\"}");
    agentao_string_free(item);
    CHECK_STATUS(agentao_stream_next(s, 10000, &item, NULL), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(item, TU_KV("type", "turn_outcome"));
    agentao_string_free(item);
    agentao_stream_free(s);

    tu_section("pull stream: closing early cancels the turn (async-cancel)");
    CHECK_STATUS(agentao_agent_stream_open(a, "ticks", -1, NULL, &s, NULL), AGENTAO_STATUS_OK);
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(agentao_stream_next(s, 10000, &item, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(item, "{\"type\":\"text_delta\",\"text\":\"tick \"}");
        agentao_string_free(item);
    }
    t0 = tu_now_ms();
    agentao_stream_free(s);
    CHECK_MSG(tu_now_ms() - t0 < 200, "agentao_stream_free waited for the turn");
    /* The turn ends soon, cancelled; then the agent takes a new turn. */
    char *last = NULL;
    for (uint64_t end = tu_now_ms() + 5000; tu_now_ms() < end; tu_sleep_ms(10)) {
        free(last);
        last = tu_last_turn(a);
        if (strstr(last, "\"cancelled\"")) break;
    }
    CHECK_CONTAINS(last, TU_KV("status", "cancelled"));
    CHECK_CONTAINS(last, TU_KV("error", "async-cancel"));
    char *partial = tu_json_str(last, "text");
    CHECK_MSG(partial && strncmp(partial, "tick tick tick ", 15) == 0 && strlen(partial) < 1000,
              "partial text: %s", partial ? partial : "(null)");
    free(partial);
    free(last);
    char *text = NULL;
    agentao_status st;
    for (uint64_t end = tu_now_ms() + 5000;; tu_sleep_ms(10)) {
        st = agentao_agent_chat(a, "again", -1, NULL, &text, NULL);
        if (st != AGENTAO_STATUS_TURN_IN_PROGRESS || tu_now_ms() > end) break;
    }
    CHECK_STATUS(st, AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "(script exhausted)");
    agentao_string_free(text);

    tu_section("pull stream of a cancelled turn: deltas, CANCELLED, CLOSED");
    agentao_cancel_token *tok = agentao_cancel_token_new();
    agentao_cancel_token_cancel(tok, "before-start");
    CHECK_STATUS(agentao_agent_stream_open(a, "x", -1, tok, &s, NULL), AGENTAO_STATUS_OK);
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_stream_next(s, 10000, &item, &err), AGENTAO_STATUS_CANCELLED);
    CHECK_CONTAINS(agentao_error_message(err), "before-start");
    agentao_error_free(err);
    CHECK_STATUS(agentao_stream_next(s, 100, &item, NULL), AGENTAO_STATUS_CLOSED);
    agentao_stream_free(s);
    agentao_cancel_token_free(tok);

    tu_section("a stream outlives its agent");
    CHECK_STATUS(agentao_agent_stream_open(a, "x", -1, NULL, &s, NULL), AGENTAO_STATUS_OK);
    agentao_agent_free(a);
    int n = 0;
    for (;;) {
        st = agentao_stream_next(s, 5000, &item, NULL);
        if (st != AGENTAO_STATUS_OK) break;
        agentao_string_free(item);
        n++;
    }
    CHECK_MSG(st == AGENTAO_STATUS_CANCELLED || st == AGENTAO_STATUS_CLOSED, "ended with %s",
              agentao_status_name(st));
    CHECK_STATUS(agentao_stream_next(s, 100, &item, NULL), AGENTAO_STATUS_CLOSED);
    agentao_stream_free(s);
    (void)n;
}

/* ---- host events ---------------------------------------------------------------------------- */

struct obs {
    atomic_int events;
    atomic_int freed;
    atomic_int in_call;
    atomic_int overlaps;
    pthread_mutex_t mu;
    char *first;
};

static void obs_event(void *ud, const char *ev) {
    struct obs *o = ud;
    if (atomic_exchange(&o->in_call, 1)) atomic_fetch_add(&o->overlaps, 1);
    pthread_mutex_lock(&o->mu);
    if (!o->first) o->first = strdup(ev);
    pthread_mutex_unlock(&o->mu);
    atomic_fetch_add(&o->events, 1);
    atomic_store(&o->in_call, 0);
}

static void obs_free(void *ud) {
    struct obs *o = ud;
    atomic_fetch_add(&o->freed, 1);
}

static void test_host_events(void) {
    tu_section("host-event pull stream");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    const char *sid = agentao_agent_session_id(a);
    agentao_host_event_stream *hs = NULL, *hs2 = (agentao_host_event_stream *)1, *hs3 = NULL;
    CHECK_STATUS(agentao_agent_host_events_open(a, NULL, &hs, NULL), AGENTAO_STATUS_OK);
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_host_events_open(a, NULL, &hs2, &err), AGENTAO_STATUS_STREAM_SUBSCRIBE);
    CHECK(hs2 == NULL);
    CHECK(err && agentao_error_status(err) == AGENTAO_STATUS_STREAM_SUBSCRIBE);
    agentao_error_free(err);
    /* Another filter is another stream. */
    CHECK_STATUS(agentao_agent_host_events_open(a, sid, &hs3, NULL), AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_agent_host_events_open(a, sid, &hs2, NULL), AGENTAO_STATUS_STREAM_SUBSCRIBE);

    struct obs o;
    memset(&o, 0, sizeof o);
    pthread_mutex_init(&o.mu, NULL);
    uint64_t oid = 0;
    CHECK_STATUS(agentao_agent_add_host_event_observer(a, obs_event, &o, obs_free, &oid, NULL), AGENTAO_STATUS_OK);

    char *item = (char *)1;
    CHECK_STATUS(agentao_host_event_stream_next(hs, 20, &item, NULL), AGENTAO_STATUS_TIMEOUT);
    CHECK(item == NULL);

    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    agentao_string_free(text);

    const char *want[] = {"permission_decision", "tool_lifecycle", "tool_lifecycle"};
    const char *phase[] = {NULL, "started", "completed"};
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(agentao_host_event_stream_next(hs, 5000, &item, NULL), AGENTAO_STATUS_OK);
        char *ty = tu_json_str(item, "event_type");
        CHECK_STR_EQ(ty, want[i]);
        free(ty);
        char *s = tu_json_str(item, "session_id");
        CHECK_STR_EQ(s, sid);
        free(s);
        CHECK_CONTAINS(item, TU_KV("tool_name", "write_file"));
        CHECK_CONTAINS(item, TU_KV("tool_call_id", "w1"));
        if (phase[i]) {
            char *p = tu_json_str(item, "phase");
            CHECK_STR_EQ(p, phase[i]);
            free(p);
        } else {
            CHECK_CONTAINS(item, TU_KV("outcome", "prompt")); /* v3: allow | deny | prompt */
        }
        if (i == 2) CHECK_CONTAINS(item, TU_KV("outcome", "ok"));
        agentao_string_free(item);
        /* The filtered stream sees the same events. */
        CHECK_STATUS(agentao_host_event_stream_next(hs3, 5000, &item, NULL), AGENTAO_STATUS_OK);
        CHECK_CONTAINS(item, want[i]);
        agentao_string_free(item);
    }
    CHECK_STATUS(agentao_host_event_stream_next(hs, 50, &item, NULL), AGENTAO_STATUS_TIMEOUT);

    CHECK(atomic_load(&o.events) == 3);
    CHECK(atomic_load(&o.overlaps) == 0);
    CHECK_CONTAINS(o.first, TU_KV("event_type", "permission_decision"));

    tu_section("a closed stream frees its filter");
    agentao_host_event_stream_free(hs);
    hs = NULL;
    CHECK_STATUS(agentao_agent_host_events_open(a, NULL, &hs, NULL), AGENTAO_STATUS_OK);

    tu_section("observers: remove, userdata_free once");
    CHECK(agentao_agent_remove_host_event_observer(a, oid));
    CHECK(atomic_load(&o.freed) == 1);
    CHECK(!agentao_agent_remove_host_event_observer(a, oid));
    CHECK(atomic_load(&o.freed) == 1);
    struct obs o2;
    memset(&o2, 0, sizeof o2);
    pthread_mutex_init(&o2.mu, NULL);
    uint64_t oid2 = 0;
    CHECK_STATUS(agentao_agent_add_host_event_observer(a, obs_event, &o2, obs_free, &oid2, NULL), AGENTAO_STATUS_OK);
    CHECK(oid2 != oid);
    /* A stream whose reader never reads must not keep the agent's observers alive forever. */
    agentao_host_event_stream_free(hs);
    agentao_host_event_stream_free(hs3);
    agentao_agent_free(a);
    CHECK_MSG(atomic_load(&o2.freed) == 1, "observer userdata_free ran %d times at agent_free",
              atomic_load(&o2.freed));
    CHECK(atomic_load(&o.events) == 3); /* removed: saw nothing more */
    free(o.first);
    free(o2.first);
    pthread_mutex_destroy(&o.mu);
    pthread_mutex_destroy(&o2.mu);

    tu_section("a host-event stream gives what it holds, then ends once its agent is freed");
    cfg = tu_config(dir, WRITE_TURN, NULL);
    a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    CHECK_STATUS(agentao_agent_host_events_open(a, NULL, &hs, NULL), AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    agentao_string_free(text);
    agentao_agent_free(a);
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(agentao_host_event_stream_next(hs, 5000, &item, NULL), AGENTAO_STATUS_OK);
        CHECK_CONTAINS(item, want[i]);
        agentao_string_free(item);
    }
    CHECK_STATUS(agentao_host_event_stream_next(hs, 5000, &item, NULL), AGENTAO_STATUS_CLOSED);
    CHECK(item == NULL);
    CHECK_STATUS(agentao_host_event_stream_next(hs, 0, &item, NULL), AGENTAO_STATUS_CLOSED);
    agentao_host_event_stream_free(hs);
}

/* A next() whose timeout runs out while the turn is finishing must not lose the outcome: short
 * timeouts (0 ms) polled in a loop must always see the deltas, the outcome, then CLOSED. */
static void test_short_timeouts_keep_the_outcome(void) {
    tu_section("pull stream polled with 0 ms timeouts: the outcome is never lost");
    const char *dir = tu_workspace();
    char *cfg = tu_printf("{\"working_directory\":\"%s\",\"llm\":{\"provider\":\"scripted\","
                          "\"script\":{\"responses\":[],\"exhausted\":{\"chunks\":[\"a\",\"b\"]}}}}", dir);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    int lost = 0;
    for (int turn = 0; turn < 300; turn++) {
        agentao_stream *s = NULL;
        if (agentao_agent_stream_open(a, "x", -1, NULL, &s, NULL) != AGENTAO_STATUS_OK) {
            tu_sleep_ms(1);
            continue;
        }
        int deltas = 0, outcome = 0;
        agentao_status st;
        for (;;) {
            char *item = NULL;
            st = agentao_stream_next(s, 0, &item, NULL);
            if (st == AGENTAO_STATUS_TIMEOUT) continue;
            if (st != AGENTAO_STATUS_OK) break;
            if (strstr(item, "turn_outcome")) outcome++;
            else deltas++;
            agentao_string_free(item);
        }
        if (st != AGENTAO_STATUS_CLOSED || outcome != 1 || deltas != 2) lost++;
        agentao_stream_free(s);
        agentao_agent_set_history(a, "[]", NULL);
    }
    CHECK_MSG(lost == 0, "%d of 300 turns lost their outcome or ended with another status", lost);
    agentao_agent_free(a);
}

/* ---- closing a host-event stream from another thread ----------------------------------------- */

typedef struct blocked_reader {
    agentao_host_event_stream *hs;
    agentao_status status;
    uint64_t returned_at;
} blocked_reader;

static void *read_one(void *arg) {
    blocked_reader *r = arg;
    char *item = NULL;
    r->status = agentao_host_event_stream_next(r->hs, 60000, &item, NULL);
    r->returned_at = tu_now_ms();
    agentao_string_free(item);
    return NULL;
}

static void test_host_event_stream_close(void) {
    tu_section("closing a host-event stream wakes a reader waiting on another thread");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    blocked_reader r = {.status = AGENTAO_STATUS_OK};
    CHECK_STATUS(agentao_agent_host_events_open(a, NULL, &r.hs, NULL), AGENTAO_STATUS_OK);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, read_one, &r) == 0);
    tu_sleep_ms(100);
    uint64_t closed_at = tu_now_ms();
    agentao_host_event_stream_close(r.hs);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_STATUS(r.status, AGENTAO_STATUS_CLOSED);
    CHECK_MSG(r.returned_at - closed_at < 5000, "the reader returned %llu ms after the close",
              (unsigned long long)(r.returned_at - closed_at));
    char *item = (char *)1;
    CHECK_STATUS(agentao_host_event_stream_next(r.hs, 0, &item, NULL), AGENTAO_STATUS_CLOSED);
    CHECK(item == NULL);
    agentao_host_event_stream_close(r.hs); /* idempotent */
    agentao_host_event_stream_close(NULL);
    /* Its filter is free again; the agent's turns no longer reach it. */
    agentao_host_event_stream *again = NULL;
    CHECK_STATUS(agentao_agent_host_events_open(a, NULL, &again, NULL), AGENTAO_STATUS_OK);
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    agentao_string_free(text);
    CHECK_STATUS(agentao_host_event_stream_next(r.hs, 0, &item, NULL), AGENTAO_STATUS_CLOSED);
    CHECK_STATUS(agentao_host_event_stream_next(again, 5000, &item, NULL), AGENTAO_STATUS_OK);
    agentao_string_free(item);
    agentao_host_event_stream_free(again);
    agentao_host_event_stream_free(r.hs);

    tu_section("closing an unread, full host-event stream lets the turn go on");
    /* 30 writes: 90 events, more than the 64 the stream holds. */
    char script[8192];
    size_t n = 0;
    for (int i = 1; i <= 30; i++)
        n += (size_t)snprintf(script + n, sizeof script - n,
                              "{\"tool_calls\":[{\"id\":\"w%d\",\"name\":\"write_file\",\"arguments\":"
                              "{\"file_path\":\"f%d.txt\",\"content\":\"x\"}}]},",
                              i, i);
    snprintf(script + n, sizeof script - n, "{\"text\":\"done\"}");
    cfg = tu_config(dir, script, NULL);
    agentao_agent *b = tu_agent(cfg, NULL);
    free(cfg);
    if (!b) {
        agentao_agent_free(a);
        return;
    }
    agentao_host_event_stream *full = NULL;
    CHECK_STATUS(agentao_agent_host_events_open(b, NULL, &full, NULL), AGENTAO_STATUS_OK);
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(b, "write", 40, NULL, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    tu_sleep_ms(300);
    CHECK_MSG(atomic_load(&d.calls) == 0, "the turn did not wait for the unread stream");
    agentao_host_event_stream_close(full);
    CHECK_MSG(tu_wait_count(&d.calls, 1, 10000), "the turn did not go on after the close");
    CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_OK);
    tu_done_destroy(&d);
    agentao_host_event_stream_free(full);
    agentao_agent_free(b);
    agentao_agent_free(a);
}

/* ---- two readers: each waits its own timeout ------------------------------------------------ */

typedef struct slow_reader {
    agentao_stream *s;
    agentao_host_event_stream *hs;
    agentao_status status;
} slow_reader;

static void *read_turn_long(void *arg) {
    slow_reader *r = arg;
    char *item = NULL;
    r->status = agentao_stream_next(r->s, 20000, &item, NULL);
    agentao_string_free(item);
    return NULL;
}

static void *read_events_long(void *arg) {
    slow_reader *r = arg;
    char *item = NULL;
    r->status = agentao_host_event_stream_next(r->hs, 20000, &item, NULL);
    agentao_string_free(item);
    return NULL;
}

static void test_a_second_reader_keeps_its_timeout(void) {
    tu_section("a second reader of a stream waits its own timeout, not the first reader's");
    const char *dir = tu_workspace();
    /* A turn that says nothing for 20 s (cancelled below). */
    char *cfg = tu_config(dir, "{\"text\":\"late\",\"delay_ms\":20000}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) return;
    agentao_cancel_token *tok = agentao_cancel_token_new();
    slow_reader r = {0};
    CHECK_STATUS(agentao_agent_stream_open(a, "wait", -1, tok, &r.s, NULL), AGENTAO_STATUS_OK);
    pthread_t first;
    CHECK(pthread_create(&first, NULL, read_turn_long, &r) == 0);
    tu_sleep_ms(200);
    char *item = NULL;
    uint64_t t0 = tu_now_ms();
    CHECK_STATUS(agentao_stream_next(r.s, 100, &item, NULL), AGENTAO_STATUS_TIMEOUT);
    uint64_t took = tu_now_ms() - t0;
    printf("FIGURE stream/second-reader: a 100 ms next beside a 20 s one returned after %llu ms\n",
           (unsigned long long)took);
    CHECK_MSG(took < 5000, "a 100 ms next waited %llu ms for the other reader", (unsigned long long)took);
    agentao_cancel_token_cancel(tok, "test-end");
    CHECK(pthread_join(first, NULL) == 0);
    CHECK_STATUS(r.status, AGENTAO_STATUS_CANCELLED);
    agentao_stream_free(r.s);
    agentao_cancel_token_free(tok);

    CHECK_STATUS(agentao_agent_host_events_open(a, NULL, &r.hs, NULL), AGENTAO_STATUS_OK);
    CHECK(pthread_create(&first, NULL, read_events_long, &r) == 0);
    tu_sleep_ms(200);
    t0 = tu_now_ms();
    CHECK_STATUS(agentao_host_event_stream_next(r.hs, 100, &item, NULL), AGENTAO_STATUS_TIMEOUT);
    took = tu_now_ms() - t0;
    CHECK_MSG(took < 5000, "a 100 ms next waited %llu ms for the other reader", (unsigned long long)took);
    agentao_host_event_stream_close(r.hs);
    CHECK(pthread_join(first, NULL) == 0);
    CHECK_STATUS(r.status, AGENTAO_STATUS_CLOSED);
    agentao_host_event_stream_free(r.hs);
    agentao_agent_free(a);
    tu_recorder_destroy(&rec);
}

int main(void) {
    test_a_second_reader_keeps_its_timeout();
    test_short_timeouts_keep_the_outcome();
    test_callback_stream();
    test_pull_stream();
    test_host_events();
    test_host_event_stream_close();
    return tu_finish("test_stream");
}
