/* Host tools through the C ABI (spec §2): registration rules, results and errors, streamed
 * output, deferred answers, cancellation and late answers, permissions in every mode, batching
 * (serialised unless re-entrant), and every kind of bad input: each a clear status, nothing
 * registered, no userdata taken, and the agent still works. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"key\":{\"type\":\"string\"}},\"required\":[\"key\"]}";

/* What a tool does when it is called. */
enum behaviour {
    B_RESULT,      /* output a chunk, answer "value of <args>" inside the callback */
    B_ERROR,       /* answer KeyError inside the callback */
    B_DEFER,       /* keep the reply and call for the test */
    B_BAD_UTF8,    /* answer with bytes that are not UTF-8 */
    B_WRONG_KIND,  /* answer with agentao_reply_confirm */
    B_ADD_INSIDE,  /* try to add a tool from inside the call, then answer */
    B_OVERLAP,     /* count calls in flight; wait for a partner (re-entrant) or sleep */
};

typedef struct tool_state {
    enum behaviour b;
    atomic_int calls;
    atomic_int freed;
    atomic_int in_flight;
    atomic_int max_in_flight;
    atomic_int status; /* status of the answer call made by the tool, -1 before */
    _Atomic(agentao_reply *) reply;
    _Atomic(const agentao_tool_call *) call;
    agentao_agent *agent; /* for B_ADD_INSIDE */
    int wait_for_partner; /* B_OVERLAP: a re-entrant call waits for the other to be in flight */
    pthread_mutex_t mu;   /* calls of one tool run in parallel: guards last_args and last_id */
    char last_args[256];
    char last_id[64];
} tool_state;

static void state_init(tool_state *s, enum behaviour b) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->b = b;
    atomic_store(&s->status, -1);
}

static void on_free(void *ud) { atomic_fetch_add(&((tool_state *)ud)->freed, 1); }

static void execute(void *ud, const char *args_json, const agentao_tool_call *call, agentao_reply *reply) {
    tool_state *s = ud;
    atomic_fetch_add(&s->calls, 1);
    pthread_mutex_lock(&s->mu);
    snprintf(s->last_args, sizeof s->last_args, "%s", args_json);
    snprintf(s->last_id, sizeof s->last_id, "%s", agentao_tool_call_id(call));
    pthread_mutex_unlock(&s->mu);
    agentao_error *err = NULL;
    int st = -1;
    switch (s->b) {
    case B_RESULT: {
        CHECK_STATUS(agentao_tool_call_output(call, "chunk from the host", NULL), AGENTAO_STATUS_OK);
        CHECK_STATUS(agentao_tool_call_output(call, "second chunk", NULL), AGENTAO_STATUS_OK);
        char *text = tu_printf("value of %s", args_json);
        st = agentao_reply_tool_result(reply, text, &err);
        free(text);
        break;
    }
    case B_ERROR:
        st = agentao_reply_tool_error(reply, "KeyError", "no such key", &err);
        break;
    case B_DEFER:
        atomic_store(&s->call, call);
        atomic_store(&s->reply, reply);
        return;
    case B_BAD_UTF8:
        st = agentao_reply_tool_result(reply, "bad \xff\xfe bytes", &err);
        break;
    case B_WRONG_KIND:
        st = agentao_reply_confirm(reply, AGENTAO_CONFIRMATION_ALLOW, &err);
        break;
    case B_ADD_INSIDE: {
        agentao_tool_desc d = {sizeof d, "late", "d", SCHEMA, false, false, false, false, s, on_free, execute};
        agentao_error *e2 = NULL;
        CHECK_STATUS(agentao_agent_add_tool(s->agent, &d, false, &e2), AGENTAO_STATUS_TURN_IN_PROGRESS);
        agentao_error_free(e2);
        st = agentao_reply_tool_result(reply, "answered", &err);
        break;
    }
    case B_OVERLAP: {
        int now = atomic_fetch_add(&s->in_flight, 1) + 1;
        int prev = atomic_load(&s->max_in_flight);
        while (now > prev && !atomic_compare_exchange_weak(&s->max_in_flight, &prev, now)) {}
        if (s->wait_for_partner && strstr(args_json, "reentrant")) {
            /* A re-entrant call waits (at most 5 s) for its partner to be in flight too. */
            uint64_t end = tu_now_ms() + 5000;
            while (atomic_load(&s->max_in_flight) < 2 && tu_now_ms() < end) tu_sleep_ms(2);
        } else {
            tu_sleep_ms(60);
        }
        atomic_fetch_sub(&s->in_flight, 1);
        st = agentao_reply_tool_result(reply, "overlap done", &err);
        break;
    }
    }
    atomic_store(&s->status, st);
    agentao_error_free(err);
}

static agentao_tool_desc desc_for(const char *name, tool_state *s, bool ro, bool confirm) {
    agentao_tool_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.name = name;
    d.description = "Looks a key up in the host's table.";
    d.parameters_json = SCHEMA;
    d.is_read_only = ro;
    d.requires_confirmation = confirm;
    d.userdata = s;
    d.userdata_free = on_free;
    d.execute = execute;
    return d;
}

static char *call_script(const char *name, const char *args, const char *final_text) {
    return tu_printf("{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"%s\",\"arguments\":%s}]},{\"text\":\"%s\"}",
                     name, args, final_text);
}

static void add_ok(agentao_agent *a, const agentao_tool_desc *d, bool replace) {
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_add_tool(a, d, replace, &err);
    CHECK_MSG(st == AGENTAO_STATUS_OK, "add_tool(%s): %s: %s", d->name, agentao_status_name(st),
              agentao_error_message(err));
    agentao_error_free(err);
}

/* Host events seen by an observer, concatenated. */
typedef struct {
    pthread_mutex_t mu;
    char buf[65536];
} host_events;

static void on_host_event(void *ud, const char *json) {
    host_events *h = ud;
    pthread_mutex_lock(&h->mu);
    strncat(h->buf, json, sizeof h->buf - strlen(h->buf) - 2);
    strcat(h->buf, "\n");
    pthread_mutex_unlock(&h->mu);
}

static void test_result_and_output(void) {
    tu_section("a host tool's result and streamed output");
    tool_state s;
    state_init(&s, B_RESULT);
    char *script = call_script("lookup", "{\"key\":\"k1\"}", "done");
    char *cfg = tu_config(tu_workspace(), script, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    if (a) {
        agentao_tool_desc d = desc_for("lookup", &s, true, false);
        add_ok(a, &d, false);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "look k1 up", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "done");
        agentao_string_free(text);
        CHECK(atomic_load(&s.calls) == 1);
        CHECK_STATUS(atomic_load(&s.status), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(s.last_args, "{\"key\":\"k1\"}");
        CHECK_STR_EQ(s.last_id, "c1");
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "value of {\\\"key\\\":\\\"k1\\\"}");
        free(hist);
        char *out = tu_recorder_find(&rec, "tool_output", 0);
        CHECK_CONTAINS(out, TU_KV("chunk", "chunk from the host"));
        CHECK_CONTAINS(out, TU_KV("call_id", "c1"));
        free(out);
        /* One event per agentao_tool_call_output, as the header promises and the reference
         * does: the host's two calls are not merged while the host keeps up. */
        char *second = tu_recorder_find(&rec, "tool_output", 1);
        CHECK_CONTAINS(second, TU_KV("chunk", "second chunk"));
        free(second);
        char *done = tu_recorder_find(&rec, "tool_complete", 0);
        CHECK_CONTAINS(done, TU_KV("status", "ok"));
        free(done);
        char *types = tu_recorder_types(&rec);
        CHECK_CONTAINS(types, "tool_start,tool_output,tool_output,tool_complete");
        free(types);
        CHECK(atomic_load(&s.freed) == 0);
        agentao_agent_free(a);
    }
    tu_recorder_destroy(&rec);
    CHECK_MSG(atomic_load(&s.freed) == 1, "userdata_free ran %d times", atomic_load(&s.freed));
    free(cfg);
    free(script);
}

static void test_error(void) {
    tu_section("a host tool's failure: text, status and error_type");
    tool_state s;
    state_init(&s, B_ERROR);
    char *script = call_script("lookup", "{\"key\":\"nope\"}", "done");
    char *cfg = tu_config(tu_workspace(), script, NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    if (a) {
        host_events h = {.mu = PTHREAD_MUTEX_INITIALIZER};
        uint64_t id = 0;
        CHECK_STATUS(agentao_agent_add_host_event_observer(a, on_host_event, &h, NULL, &id, NULL), AGENTAO_STATUS_OK);
        agentao_tool_desc d = desc_for("lookup", &s, true, false);
        add_ok(a, &d, false);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "look it up", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        agentao_string_free(text);
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "Error executing lookup: no such key");
        free(hist);
        pthread_mutex_lock(&h.mu);
        CHECK_CONTAINS(h.buf, "\"error_type\":\"KeyError\"");
        CHECK_CONTAINS(h.buf, "\"summary\":\"lookup failed\"");
        CHECK_NOT_CONTAINS(h.buf, "no such key");
        pthread_mutex_unlock(&h.mu);
        agentao_agent_free(a);
    }
    CHECK(atomic_load(&s.freed) == 1);
    free(cfg);
    free(script);
}

/* Answers a deferred call later from this thread, streaming a chunk first. */
static void *answer_later(void *arg) {
    tool_state *s = arg;
    uint64_t end = tu_now_ms() + 10000;
    agentao_reply *r = NULL;
    while (!(r = atomic_exchange(&s->reply, NULL)) && tu_now_ms() < end) tu_sleep_ms(2);
    if (!r) return NULL;
    tu_sleep_ms(100);
    const agentao_tool_call *call = atomic_load(&s->call);
    CHECK_STATUS(agentao_tool_call_output(call, "later chunk", NULL), AGENTAO_STATUS_OK);
    atomic_store(&s->status, agentao_reply_tool_result(r, "answered later", NULL));
    return NULL;
}

static void test_deferred(void) {
    tu_section("answered later from another thread");
    tool_state s;
    state_init(&s, B_DEFER);
    char *script = call_script("lookup", "{\"key\":\"k\"}", "done");
    char *cfg = tu_config(tu_workspace(), script, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    if (a) {
        agentao_tool_desc d = desc_for("lookup", &s, false, false);
        add_ok(a, &d, false);
        pthread_t th;
        pthread_create(&th, NULL, answer_later, &s);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        pthread_join(th, NULL);
        CHECK_STATUS(atomic_load(&s.status), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "done");
        agentao_string_free(text);
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "answered later");
        free(hist);
        char *out = tu_recorder_find(&rec, "tool_output", 0);
        CHECK_CONTAINS(out, "later chunk");
        free(out);
        agentao_agent_free(a);
    }
    tu_recorder_destroy(&rec);
    CHECK(atomic_load(&s.freed) == 1);
    free(cfg);
    free(script);
}

static void *cancel_later(void *arg) {
    tool_state *s = arg;
    uint64_t end = tu_now_ms() + 10000;
    while (!atomic_load(&s->reply) && tu_now_ms() < end) tu_sleep_ms(2);
    const agentao_tool_call *call = atomic_load(&s->call);
    if (call) {
        /* The token is the turn's: cancelling it from the tool ends the turn. */
        const agentao_cancel_token *tok = agentao_tool_call_cancel_token(call);
        CHECK(tok != NULL);
        CHECK(!agentao_cancel_token_is_cancelled(tok));
        agentao_cancel_token_cancel(tok, "host-stop");
    }
    return NULL;
}

static void test_cancel_and_late_answer(void) {
    tu_section("a cancelled call reports cancellation; a late answer is ignored");
    tool_state s;
    state_init(&s, B_DEFER);
    char *script = call_script("lookup", "{\"key\":\"k\"}", "never");
    char *cfg = tu_config(tu_workspace(), script, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    if (a) {
        agentao_tool_desc d = desc_for("lookup", &s, true, false);
        add_ok(a, &d, false);
        pthread_t th;
        pthread_create(&th, NULL, cancel_later, &s);
        uint64_t t0 = tu_now_ms();
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_CANCELLED);
        printf("  cancel to turn end: %llu ms after the call started\n", (unsigned long long)(tu_now_ms() - t0));
        pthread_join(th, NULL);
        CHECK(text == NULL);
        char *done = tu_recorder_find(&rec, "tool_complete", 0);
        CHECK_CONTAINS(done, TU_KV("status", "cancelled"));
        free(done);
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "Tool execution cancelled.");
        CHECK_NOT_CONTAINS(hist, "never");
        free(hist);
        /* The call context stays valid until the reply is answered; output is refused now. */
        const agentao_tool_call *call = atomic_load(&s.call);
        CHECK_STATUS(agentao_tool_call_output(call, "too late", NULL), AGENTAO_STATUS_CLOSED);
        agentao_reply *r = atomic_exchange(&s.reply, NULL);
        CHECK(r != NULL);
        CHECK(atomic_load(&s.freed) == 0);
        agentao_agent_free(a);
        /* The pending reply keeps the userdata: freed only once it is answered. */
        tu_sleep_ms(50);
        CHECK_MSG(atomic_load(&s.freed) == 0, "userdata freed while a reply was pending");
        CHECK_STATUS(agentao_reply_tool_result(r, "late answer", NULL), AGENTAO_STATUS_OK);
        CHECK(atomic_load(&s.freed) == 1);
    }
    tu_recorder_destroy(&rec);
    free(cfg);
    free(script);
}

static void test_permissions(void) {
    tu_section("permission treatment in every mode (spec §2.3)");
    const char *modes[] = {"read-only", "workspace-write", "full-access"};
    for (int ro = 0; ro < 2; ro++) {
        for (int confirm = 0; confirm < 2; confirm++) {
            for (int m = 0; m < 3; m++) {
                tool_state s;
                state_init(&s, B_RESULT);
                char *script = call_script("lookup", "{\"key\":\"k\"}", "done");
                char *perm = tu_printf("\"permissions\":{\"mode\":\"%s\"}", modes[m]);
                char *cfg = tu_config(tu_workspace(), script, perm);
                tu_recorder rec;
                tu_recorder_init(&rec);
                rec.confirm_mode = TU_CONFIRM_ALLOW;
                agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
                agentao_agent *a = tu_agent(cfg, &t);
                if (a) {
                    agentao_tool_desc d = desc_for("lookup", &s, ro, confirm);
                    add_ok(a, &d, false);
                    char *pre = NULL;
                    CHECK_STATUS(agentao_agent_preflight(a, "lookup", "{\"key\":\"k\"}", &pre, NULL), AGENTAO_STATUS_OK);
                    char *text = NULL;
                    CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
                    agentao_string_free(text);
                    bool denied = m == 0 && !ro;
                    bool asked = !denied && m != 2 && confirm;
                    CHECK_MSG(atomic_load(&s.calls) == (denied ? 0 : 1), "%s ro=%d confirm=%d: %d calls",
                              modes[m], ro, confirm, atomic_load(&s.calls));
                    CHECK_MSG(atomic_load(&rec.confirms) == (asked ? 1 : 0), "%s ro=%d confirm=%d: %d prompts",
                              modes[m], ro, confirm, atomic_load(&rec.confirms));
                    const char *want = denied ? "\"outcome\":\"deny\"" : asked ? "\"outcome\":\"prompt\"" : "\"outcome\":\"allow\"";
                    CHECK_CONTAINS(pre, want);
                    if (asked) CHECK_STR_EQ(rec.last_confirm_tool, "lookup");
                    agentao_string_free(pre);
                    agentao_agent_free(a);
                }
                tu_recorder_destroy(&rec);
                CHECK(atomic_load(&s.freed) == 1);
                free(cfg);
                free(perm);
                free(script);
            }
        }
    }
}

static void test_batching(void) {
    tu_section("batching: one tool serialised, a re-entrant one side by side (spec §2.5)");
    for (int reentrant = 0; reentrant < 2; reentrant++) {
        tool_state s;
        state_init(&s, B_OVERLAP);
        s.wait_for_partner = reentrant;
        const char *arg = reentrant ? "reentrant" : "serial";
        char *script = tu_printf(
            "{\"tool_calls\":[{\"id\":\"b1\",\"name\":\"lookup\",\"arguments\":{\"key\":\"%s 1\"}},"
            "{\"id\":\"b2\",\"name\":\"lookup\",\"arguments\":{\"key\":\"%s 2\"}}]},{\"text\":\"done\"}",
            arg, arg);
        char *cfg = tu_config(tu_workspace(), script, NULL);
        agentao_agent *a = tu_agent(cfg, NULL);
        if (a) {
            agentao_tool_desc d = desc_for("lookup", &s, true, false);
            d.reentrant = reentrant;
            add_ok(a, &d, false);
            char *text = NULL;
            CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
            agentao_string_free(text);
            CHECK(atomic_load(&s.calls) == 2);
            CHECK_MSG(atomic_load(&s.max_in_flight) == (reentrant ? 2 : 1),
                      "reentrant=%d: %d calls in flight at once", reentrant, atomic_load(&s.max_in_flight));
            agentao_agent_free(a);
        }
        free(cfg);
        free(script);
    }
}

static void test_registration_rules(void) {
    tu_section("registration: replace, remove, reserved names, between turns");
    tool_state s, s2, s3;
    state_init(&s, B_RESULT);
    state_init(&s2, B_RESULT);
    state_init(&s3, B_ADD_INSIDE);
    char *script = tu_printf("%s,%s", "{\"tool_calls\":[{\"id\":\"r1\",\"name\":\"read_file\",\"arguments\":{\"key\":\"x\"}}]},{\"text\":\"one\"}",
                             "{\"tool_calls\":[{\"id\":\"i1\",\"name\":\"inside\",\"arguments\":{\"key\":\"x\"}}]},{\"text\":\"two\"}");
    char *cfg = tu_config(tu_workspace(), script, NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    if (a) {
        agentao_error *err = NULL;
        /* A built-in's name needs replace. */
        agentao_tool_desc d = desc_for("read_file", &s, true, false);
        CHECK_STATUS(agentao_agent_add_tool(a, &d, false, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "'read_file'");
        agentao_error_free(err);
        err = NULL;
        /* The refusal released the userdata (the library owns it from the call on). */
        CHECK(atomic_load(&s.freed) == 1);
        add_ok(a, &d, true);
        /* A duplicate host tool without replace. */
        CHECK_STATUS(agentao_agent_add_tool(a, &d, false, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "already registered");
        agentao_error_free(err);
        err = NULL;
        s3.agent = a;
        agentao_tool_desc d3 = desc_for("inside", &s3, false, false);
        add_ok(a, &d3, false);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "read", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        agentao_string_free(text);
        CHECK_MSG(atomic_load(&s.calls) == 1, "the host tool did not replace read_file");
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "value of");
        free(hist);
        /* Adding from inside a call is refused: a turn is running. */
        CHECK_STATUS(agentao_agent_chat(a, "inside", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        agentao_string_free(text);
        CHECK_STATUS(atomic_load(&s3.status), AGENTAO_STATUS_OK);
        CHECK(atomic_load(&s3.calls) == 1);
        /* Remove. */
        bool removed = false;
        CHECK_STATUS(agentao_agent_remove_tool(a, "read_file", &removed, NULL), AGENTAO_STATUS_OK);
        CHECK(removed);
        /* Two refusals above, then the removal. */
        CHECK_MSG(atomic_load(&s.freed) == 3, "userdata_free after remove: %d", atomic_load(&s.freed));
        CHECK_STATUS(agentao_agent_remove_tool(a, "read_file", &removed, NULL), AGENTAO_STATUS_OK);
        CHECK(!removed);
        CHECK_STATUS(agentao_agent_remove_tool(a, "plan_save", &removed, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "plan_save");
        agentao_error_free(err);
        err = NULL;
        CHECK_STATUS(agentao_agent_remove_tool(a, NULL, &removed, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
        char *pre = NULL;
        CHECK_STATUS(agentao_agent_preflight(a, "read_file", "{}", &pre, NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK(pre == NULL);
        /* A replaced host tool is released. */
        agentao_tool_desc d2 = desc_for("inside", &s2, false, false);
        add_ok(a, &d2, true);
        /* Once for the refused add inside the call, once for the replaced tool. */
        CHECK(atomic_load(&s3.freed) == 2);
        agentao_agent_free(a);
    }
    CHECK(atomic_load(&s2.freed) == 1);
    CHECK(atomic_load(&s3.freed) == 2);
    free(cfg);
    free(script);
}

static void expect_refused(agentao_agent *a, const agentao_tool_desc *d, agentao_status want, const char *needle) {
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_add_tool(a, d, false, &err);
    CHECK_MSG(st == want, "add_tool(%s): got %s, want %s (%s)", d && d->name ? d->name : "(null)",
              agentao_status_name(st), agentao_status_name(want), agentao_error_message(err));
    CHECK_MSG(err != NULL, "no error object");
    if (needle) CHECK_CONTAINS(agentao_error_message(err), needle);
    agentao_error_free(err);
}

static void test_bad_input(void) {
    tu_section("bad descriptors and answers: clear statuses, nothing registered, userdata released");
    tool_state s, bad, wrong;
    state_init(&s, B_RESULT);
    state_init(&bad, B_BAD_UTF8);
    state_init(&wrong, B_WRONG_KIND);
    char *script = tu_printf("%s,%s,%s",
                             "{\"tool_calls\":[{\"id\":\"u1\",\"name\":\"bad_utf8\",\"arguments\":{\"key\":\"x\"}}]},{\"text\":\"one\"}",
                             "{\"tool_calls\":[{\"id\":\"w1\",\"name\":\"wrong_kind\",\"arguments\":{\"key\":\"x\"}}]},{\"text\":\"two\"}",
                             "{\"text\":\"still fine\"}");
    char *cfg = tu_config(tu_workspace(), script, NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    if (a) {
        agentao_tool_desc d = desc_for("lookup", &s, true, false);
        expect_refused(a, NULL, AGENTAO_STATUS_NULL_ARGUMENT, "desc");
        CHECK_STATUS(agentao_agent_add_tool(NULL, &d, false, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
        d.struct_size = 8;
        expect_refused(a, &d, AGENTAO_STATUS_INVALID_ARGUMENT, "struct_size");
        d = desc_for("lookup", &s, true, false);
        d.execute = NULL;
        expect_refused(a, &d, AGENTAO_STATUS_NULL_ARGUMENT, "'lookup': `execute` is NULL");
        d = desc_for("lookup", &s, true, false);
        d.parameters_json = "{\"type\":";
        expect_refused(a, &d, AGENTAO_STATUS_INVALID_JSON, "'lookup'");
        d.parameters_json = "[1,2]";
        expect_refused(a, &d, AGENTAO_STATUS_INVALID_ARGUMENT, "'lookup'");
        d.parameters_json = "{\"type\":\"string\"}";
        expect_refused(a, &d, AGENTAO_STATUS_INVALID_ARGUMENT, "\"object\"");
        d.parameters_json = NULL;
        expect_refused(a, &d, AGENTAO_STATUS_NULL_ARGUMENT, "parameters_json");
        d = desc_for("", &s, true, false);
        expect_refused(a, &d, AGENTAO_STATUS_INVALID_ARGUMENT, "non-empty name");
        d = desc_for("mcp_github_search", &s, true, false);
        expect_refused(a, &d, AGENTAO_STATUS_INVALID_ARGUMENT, "'mcp_github_search'");
        d = desc_for("plan_finalize", &s, true, false);
        expect_refused(a, &d, AGENTAO_STATUS_INVALID_ARGUMENT, "'plan_finalize'");
        d = desc_for("bad\xff", &s, true, false);
        expect_refused(a, &d, AGENTAO_STATUS_INVALID_UTF8, "name");
        d = desc_for("lookup", &s, true, false);
        d.description = NULL;
        expect_refused(a, &d, AGENTAO_STATUS_NULL_ARGUMENT, "description");
        /* Each of the 12 refusals that carried `s` released it once (the library owns the
         * userdata from the call on). */
        CHECK_MSG(atomic_load(&s.freed) == 12, "a refused descriptor's userdata_free ran %d times",
                  atomic_load(&s.freed));
        char *pre = NULL;
        CHECK_STATUS(agentao_agent_preflight(a, "lookup", "{}", &pre, NULL), AGENTAO_STATUS_INVALID_ARGUMENT);

        agentao_tool_desc db = desc_for("bad_utf8", &bad, true, false);
        add_ok(a, &db, false);
        agentao_tool_desc dw = desc_for("wrong_kind", &wrong, true, false);
        add_ok(a, &dw, false);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "bad utf8", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "one");
        agentao_string_free(text);
        CHECK_STATUS(atomic_load(&bad.status), AGENTAO_STATUS_INVALID_UTF8);
        CHECK_STATUS(agentao_agent_chat(a, "wrong kind", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "two");
        agentao_string_free(text);
        CHECK_STATUS(atomic_load(&wrong.status), AGENTAO_STATUS_INVALID_ARGUMENT);
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "Error executing bad_utf8: the tool's result: `text` is not valid UTF-8");
        CHECK_CONTAINS(hist, "Error executing wrong_kind: the host answered with the wrong kind");
        free(hist);
        /* The turn machinery is intact. */
        CHECK_STATUS(agentao_agent_chat(a, "again", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "still fine");
        agentao_string_free(text);
        /* Replies and call contexts: NULL is refused, not a crash. */
        CHECK_STATUS(agentao_reply_tool_result(NULL, "x", NULL), AGENTAO_STATUS_NULL_ARGUMENT);
        CHECK_STATUS(agentao_reply_tool_error(NULL, "E", "x", NULL), AGENTAO_STATUS_NULL_ARGUMENT);
        CHECK_STATUS(agentao_tool_call_output(NULL, "x", NULL), AGENTAO_STATUS_NULL_ARGUMENT);
        CHECK(agentao_tool_call_id(NULL) == NULL);
        CHECK(agentao_tool_call_cancel_token(NULL) == NULL);
        agentao_agent_free(a);
    }
    CHECK(atomic_load(&bad.freed) == 1);
    CHECK(atomic_load(&wrong.freed) == 1);
    CHECK(atomic_load(&s.freed) == 12);
    free(cfg);
    free(script);
}

/* A finalizer that calls back into the agent: it must not find a library lock held. */
static agentao_agent *reentry_agent;
static atomic_int reentry_status = -1;
static void free_and_reenter(void *ud) {
    on_free(ud);
    bool removed = false;
    atomic_store(&reentry_status, agentao_agent_remove_tool(reentry_agent, "nothing_here", &removed, NULL));
}

static void test_finalizer_reenters(void) {
    tu_section("userdata_free may call the agent (no lock held across it)");
    tool_state s, s2;
    state_init(&s, B_RESULT);
    state_init(&s2, B_RESULT);
    char *cfg = tu_config(tu_workspace(), "{\"text\":\"x\"}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    reentry_agent = a;
    agentao_tool_desc d = desc_for("lookup", &s, true, false);
    d.userdata_free = free_and_reenter;
    add_ok(a, &d, false);
    agentao_tool_desc d2 = desc_for("lookup", &s2, true, false);
    add_ok(a, &d2, true); /* replaces the first: its finalizer runs here */
    CHECK(atomic_load(&s.freed) == 1);
    CHECK_STATUS(atomic_load(&reentry_status), AGENTAO_STATUS_OK);
    atomic_store(&reentry_status, -1);
    d = desc_for("other", &s, true, false);
    d.userdata_free = free_and_reenter;
    add_ok(a, &d, false);
    bool removed = false;
    CHECK_STATUS(agentao_agent_remove_tool(a, "other", &removed, NULL), AGENTAO_STATUS_OK);
    CHECK(removed && atomic_load(&s.freed) == 2);
    CHECK_STATUS(atomic_load(&reentry_status), AGENTAO_STATUS_OK);
    agentao_agent_free(a);
    CHECK(atomic_load(&s2.freed) == 1);
}

/* ---- a host tool that streams far more output than anyone reads ---- */

static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

static bool reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void flood_execute(void *ud, const char *args_json, const agentao_tool_call *call, agentao_reply *reply) {
    (void)ud;
    (void)args_json;
    /* 256 MiB in 64 KiB chunks, all inside the callback (nothing drains while it runs). */
    char *chunk = malloc(64 * 1024 + 1);
    memset(chunk, 'y', 64 * 1024);
    chunk[64 * 1024] = 0;
    for (int i = 0; i < 4096; i++) agentao_tool_call_output(call, chunk, NULL);
    free(chunk);
    agentao_reply_tool_result(reply, "flooded", NULL);
}

static void test_output_flood_is_bounded(void) {
    tu_section("a host tool's output flood is bounded, not buffered");
    const char *dir = tu_workspace();
    char *script = call_script("flood", "{\"key\":\"x\"}", "done");
    char *cfg = tu_config(dir, script, NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    agentao_tool_desc d = desc_for("flood", NULL, true, false);
    d.userdata_free = NULL;
    d.execute = flood_execute;
    add_ok(a, &d, false);
    if (!reset_peak_rss()) {
        printf("SKIPPED: no /proc/self/clear_refs here; the flood's memory is not measured\n");
    } else {
        long before = peak_rss_kib();
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "done");
        agentao_string_free(text);
        long grew_mib = (peak_rss_kib() - before) / 1024;
        printf("FIGURE host-tool-output-flood: peak RSS grew %ld MiB for 256 MiB of output\n", grew_mib);
        CHECK_MSG(grew_mib < 64, "the flood was held: peak RSS grew %ld MiB", grew_mib);
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "flooded");
        free(hist);
    }
    agentao_agent_free(a);
    free(cfg);
    free(script);
}

int main(void) {
    test_result_and_output();
    test_error();
    test_deferred();
    test_cancel_and_late_answer();
    test_permissions();
    test_batching();
    test_registration_rules();
    test_bad_input();
    test_finalizer_reenters();
    test_output_flood_is_bounded();
    return tu_finish("test_host_tools");
}
