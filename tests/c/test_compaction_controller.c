/* The compaction controller from C (its registration rules are in test_registration.c). Each
 * answer drives `agentao_agent_compact` on a scripted agent: cancel with a reason, a failed
 * request, an empty summary and an answer of the wrong kind (both refused, and the compaction
 * cancelled), the host's own summary answered from another thread, and allow (the scripted
 * model writes the summary). The request's facts are checked, and the compaction events stay
 * in their canonical order. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

enum mode { CANCEL, FAIL, EMPTY, WRONG_KIND, SUMMARY_LATER, ALLOW };

typedef struct ctl {
    enum mode mode;
    atomic_int calls;
    atomic_int freed;
    int32_t trigger, kind;
    uint64_t window, to_summarize, kept, estimated;
    char *reason;
    char *messages;
    int child_null;
    pthread_t thread;
    int threaded;
    /* Written after the answer, which may already have woken the compaction: atomics, read
       once `returned` caught up with `calls`. */
    atomic_int answer_status;
    atomic_int returned;
} ctl;

static void ctl_free(void *ud) { atomic_fetch_add(&((ctl *)ud)->freed, 1); }

static void *answer_later(void *arg) {
    tu_sleep_ms(30);
    agentao_status st = agentao_reply_compaction_summary(arg, "C SUMMARY: the port is 8443", NULL);
    CHECK_STATUS(st, AGENTAO_STATUS_OK);
    return NULL;
}

static void decide(void *ud, const agentao_compaction_request *req, agentao_reply *reply) {
    ctl *c = ud;
    atomic_fetch_add(&c->calls, 1);
    CHECK(req->struct_size >= sizeof *req);
    c->trigger = req->trigger;
    c->kind = req->kind;
    c->window = req->window;
    c->to_summarize = req->messages_to_summarize;
    c->kept = req->messages_kept;
    c->estimated = req->estimated_tokens;
    free(c->reason);
    free(c->messages);
    c->reason = strdup(req->reason);
    c->messages = strdup(req->messages_json);
    c->child_null = req->child_task_id == NULL;
    agentao_error *err = NULL;
    switch (c->mode) {
    case CANCEL:
        c->answer_status = agentao_reply_compaction_cancel(reply, "not now", &err);
        break;
    case FAIL:
        c->answer_status = agentao_reply_fail(reply, "host says no", &err);
        break;
    case EMPTY:
        c->answer_status = agentao_reply_compaction_summary(reply, "  ", &err);
        break;
    case WRONG_KIND:
        c->answer_status = agentao_reply_confirm(reply, AGENTAO_CONFIRMATION_ALLOW, &err);
        break;
    case SUMMARY_LATER:
        /* The reply outlives the callback: answered from a thread of the host's own. */
        c->threaded = pthread_create(&c->thread, NULL, answer_later, reply) == 0;
        CHECK(c->threaded);
        c->answer_status = AGENTAO_STATUS_OK;
        break;
    case ALLOW:
        c->answer_status = agentao_reply_compaction_allow(reply, &err);
        /* A callback that lingers after answering: the compaction it woke must still not end
           (and let the controller be removed) before the callback has returned. */
        tu_sleep_ms(100);
        break;
    }
    agentao_error_free(err);
    atomic_fetch_add(&c->returned, 1);
}

/* The status the last decide's answering call returned, once that decide has returned. */
static agentao_status answered(ctl *c) {
    CHECK(tu_wait_count(&c->returned, atomic_load(&c->calls), 5000));
    return (agentao_status)atomic_load(&c->answer_status);
}

/* Twelve messages of about 400 characters each: long enough for a short summary to shrink. */
static char *long_history(void) {
    char filler[401];
    memset(filler, 'x', 400);
    filler[400] = '\0';
    char *h = strdup("[");
    for (int i = 0; i < 6; i++) {
        char *next = tu_printf("%s%s{\"role\":\"user\",\"content\":\"request %d %s\"},"
                               "{\"role\":\"assistant\",\"content\":\"answer %d %s\"}",
                               h, i ? "," : "", i, filler, i, filler);
        free(h);
        h = next;
    }
    char *done = tu_printf("%s]", h);
    free(h);
    return done;
}

static char *compact(agentao_agent *a) {
    char *result = NULL;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_compact(a, "host", NULL, &result, &err), AGENTAO_STATUS_OK);
    agentao_error_free(err);
    return result;
}

int main(void) {
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"S1 summary from the model\"}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_EMIT);
    agentao_agent *a = tu_agent(cfg, &t);
    if (!a) return tu_finish("test_compaction_controller");
    char *history = long_history();
    CHECK_STATUS(agentao_agent_set_history(a, history, NULL), AGENTAO_STATUS_OK);

    ctl c;
    memset(&c, 0, sizeof c);
    agentao_compaction_controller cc;
    memset(&cc, 0, sizeof cc);
    cc.struct_size = sizeof cc;
    cc.userdata = &c;
    cc.userdata_free = ctl_free;
    cc.decide = decide;
    CHECK_STATUS(agentao_agent_set_compaction_controller(a, &cc, NULL), AGENTAO_STATUS_OK);

    tu_section("cancel, with the request's facts");
    c.mode = CANCEL;
    char *r = compact(a);
    CHECK_CONTAINS(r, TU_KV("status", "cancelled"));
    CHECK_CONTAINS(r, TU_KV("detail", "cancelled by the compaction controller: not now"));
    agentao_string_free(r);
    CHECK(atomic_load(&c.calls) == 1);
    CHECK_STATUS(answered(&c), AGENTAO_STATUS_OK);
    CHECK(c.trigger == AGENTAO_COMPACTION_TRIGGER_MANUAL);
    CHECK(c.kind == AGENTAO_COMPACTION_KIND_FULL);
    CHECK_STR_EQ(c.reason, "host");
    CHECK(c.window == 200000);
    CHECK_MSG(c.to_summarize >= 5 && c.kept >= 1 && c.to_summarize + c.kept == 12,
              "summarize %llu, keep %llu", (unsigned long long)c.to_summarize,
              (unsigned long long)c.kept);
    CHECK(c.estimated > 1000);
    /* The older messages, not the kept ones. */
    CHECK(c.messages[0] == '[');
    CHECK_CONTAINS(c.messages, "\"content\":\"request 0 xxx");
    CHECK_NOT_CONTAINS(c.messages, "answer 5");
    CHECK(c.child_null);
    char *now = tu_history(a);
    CHECK_STR_EQ(now, history);
    free(now);

    tu_section("a failed request cancels");
    c.mode = FAIL;
    r = compact(a);
    CHECK_CONTAINS(r, TU_KV("status", "cancelled"));
    CHECK_CONTAINS(r, TU_KV("detail", "the compaction controller failed: host says no"));
    agentao_string_free(r);

    tu_section("refused answers cancel");
    c.mode = EMPTY;
    r = compact(a);
    CHECK_STATUS(answered(&c), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(r, TU_KV("status", "cancelled"));
    CHECK_CONTAINS(r, "the summary is empty");
    agentao_string_free(r);
    c.mode = WRONG_KIND;
    r = compact(a);
    CHECK_STATUS(answered(&c), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(r, TU_KV("status", "cancelled"));
    CHECK_CONTAINS(r, "the compaction controller failed: the host answered with the wrong kind");
    agentao_string_free(r);
    CHECK_STATUS(agentao_reply_compaction_allow(NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_reply_compaction_summary(NULL, "x", NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_reply_compaction_cancel(NULL, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);

    tu_section("the host's summary, from another thread");
    tu_recorder_clear(&rec);
    c.mode = SUMMARY_LATER;
    r = compact(a);
    CHECK_STATUS(answered(&c), AGENTAO_STATUS_OK);
    if (c.threaded) pthread_join(c.thread, NULL);
    CHECK_CONTAINS(r, TU_KV("status", "success"));
    agentao_string_free(r);
    now = tu_history(a);
    CHECK_CONTAINS(now, "C SUMMARY: the port is 8443\\n--- END OF CONTEXT SUMMARY ---");
    free(now);
    char *types = tu_recorder_types(&rec);
    CHECK_STR_EQ(types, "compaction_started,compaction_settled,context_compressed,"
                        "session_summary_written");
    free(types);

    tu_section("allow: the model summarises");
    CHECK_STATUS(agentao_agent_set_history(a, history, NULL), AGENTAO_STATUS_OK);
    c.mode = ALLOW;
    r = compact(a);
    CHECK_CONTAINS(r, TU_KV("status", "success"));
    agentao_string_free(r);
    now = tu_history(a);
    CHECK_CONTAINS(now, "S1 summary from the model");
    free(now);
    CHECK(atomic_load(&c.calls) == 6);

    tu_section("removed, then freed once");
    CHECK(atomic_load(&c.freed) == 0);
    CHECK_STATUS(agentao_agent_set_compaction_controller(a, NULL, NULL), AGENTAO_STATUS_OK);
    CHECK(atomic_load(&c.freed) == 1);
    agentao_agent_free(a);
    CHECK(atomic_load(&c.freed) == 1);
    tu_recorder_destroy(&rec);
    free(c.reason);
    free(c.messages);
    free(history);
    free(cfg);
    return tu_finish("test_compaction_controller");
}
