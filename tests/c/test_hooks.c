/* Lifecycle hooks as a C host capability (its registration rules are in test_registration.c):
 * the request's facts, a PreToolUse deny, a rewrite of the call answered later from another
 * thread, context after a call, a Stop that sends the agent back to work, a failed or refused
 * answer denying the call (fail closed), and the finalizer run once. Every answer is the JSON a
 * command hook prints (docs/hooks.md). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

enum mode { DENY, REWRITE_LATER, CONTEXT, STOP_ONCE, FAIL, BAD_OUTPUT, WRONG_KIND, NO_OPINION };

typedef struct hooks_state {
    enum mode mode;
    atomic_int calls;
    atomic_int freed;
    atomic_int stops;
    char events[256];
    char *tool_name;
    char *call_id;
    char *input;
    pthread_t thread;
    int threaded;
    atomic_int answer_status;
    atomic_int returned;
} hooks_state;

static void state_free(void *ud) { atomic_fetch_add(&((hooks_state *)ud)->freed, 1); }

static const char REWRITE[] =
    "{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"allow\","
    "\"updatedInput\":{\"file_path\":\"b.txt\"}}}";

static void *answer_later(void *reply) {
    tu_sleep_ms(30);
    CHECK_STATUS(agentao_reply_hook(reply, REWRITE, NULL), AGENTAO_STATUS_OK);
    return NULL;
}

static void on_hook(void *ud, const agentao_hook_request *req, agentao_reply *reply) {
    hooks_state *s = ud;
    atomic_fetch_add(&s->calls, 1);
    CHECK(req->struct_size >= sizeof *req);
    char code[4];
    snprintf(code, sizeof code, "%d", (int)req->event);
    strncat(s->events, code, sizeof s->events - strlen(s->events) - 1);
    if (req->event == AGENTAO_HOOK_EVENT_PRE_TOOL_USE) {
        free(s->tool_name);
        free(s->call_id);
        free(s->input);
        s->tool_name = strdup(req->tool_name);
        s->call_id = strdup(req->call_id);
        s->input = strdup(req->input_json);
    } else if (req->event == AGENTAO_HOOK_EVENT_STOP || req->event == AGENTAO_HOOK_EVENT_USER_PROMPT_SUBMIT) {
        CHECK(req->tool_name == NULL && req->call_id == NULL);
    }
    agentao_error *err = NULL;
    agentao_status st = AGENTAO_STATUS_OK;
    int pre = req->event == AGENTAO_HOOK_EVENT_PRE_TOOL_USE;
    switch (s->mode) {
    case DENY:
        st = agentao_reply_hook(reply, pre ? "{\"hookSpecificOutput\":{\"permissionDecision\":\"deny\","
                                             "\"permissionDecisionReason\":\"not from C\"}}"
                                           : NULL,
                                &err);
        break;
    case REWRITE_LATER:
        if (pre) {
            /* The reply outlives the callback: answered from a thread of the host's own. */
            s->threaded = pthread_create(&s->thread, NULL, answer_later, reply) == 0;
            CHECK(s->threaded);
        } else {
            st = agentao_reply_hook(reply, "", &err);
        }
        break;
    case CONTEXT:
        st = agentao_reply_hook(reply, req->event == AGENTAO_HOOK_EVENT_POST_TOOL_USE
                                           ? "{\"hookSpecificOutput\":{\"additionalContext\":\"checked by C\"}}"
                                           : NULL,
                                &err);
        break;
    case STOP_ONCE:
        if (req->event == AGENTAO_HOOK_EVENT_STOP && atomic_fetch_add(&s->stops, 1) == 0) {
            st = agentao_reply_hook(reply, "{\"decision\":\"block\",\"reason\":\"one more thing\"}", &err);
        } else {
            st = agentao_reply_hook(reply, NULL, &err);
        }
        break;
    case FAIL:
        st = pre ? agentao_reply_fail(reply, "host says no", &err) : agentao_reply_hook(reply, NULL, &err);
        break;
    case BAD_OUTPUT:
        st = agentao_reply_hook(reply, pre ? "{\"hookSpecificOutput\":{\"permissionDecision\":\"maybe\"}}" : NULL,
                                &err);
        break;
    case WRONG_KIND:
        st = pre ? agentao_reply_confirm(reply, AGENTAO_CONFIRMATION_ALLOW, &err)
                 : agentao_reply_hook(reply, NULL, &err);
        break;
    case NO_OPINION:
        st = agentao_reply_hook(reply, NULL, &err);
        break;
    }
    if (pre) atomic_store(&s->answer_status, st);
    agentao_error_free(err);
    atomic_fetch_add(&s->returned, 1);
}

static const char READ_A[] =
    "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"read_file\",\"arguments\":{\"file_path\":\"a.txt\"}}]},"
    "{\"text\":\"done\"}";

static agentao_agent *agent_with_hooks(const char *dir, const char *responses, hooks_state *s) {
    char *cfg = tu_config(dir, responses, NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return NULL;
    agentao_hooks h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    h.userdata = s;
    h.userdata_free = state_free;
    h.on_hook = on_hook;
    CHECK_STATUS(agentao_agent_set_hooks(a, &h, NULL), AGENTAO_STATUS_OK);
    return a;
}

static void write_file(const char *dir, const char *name, const char *text) {
    char *path = tu_printf("%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    free(path);
}

/* One turn of `responses` with the hooks in `mode`; the last tool result (malloc'd). */
static char *turn(const char *dir, enum mode mode, const char *responses, hooks_state *s) {
    memset(s, 0, sizeof *s);
    s->mode = mode;
    agentao_agent *a = agent_with_hooks(dir, responses, s);
    if (!a) return strdup("");
    char *text = tu_chat(a, "go");
    free(text);
    char *result = tu_last_tool_result(a);
    CHECK(tu_wait_count(&s->returned, atomic_load(&s->calls), 5000));
    if (s->threaded) pthread_join(s->thread, NULL);
    agentao_agent_free(a);
    CHECK_MSG(atomic_load(&s->freed) == 1, "userdata_free ran %d times", atomic_load(&s->freed));
    return result;
}

static void clear(hooks_state *s) {
    free(s->tool_name);
    free(s->call_id);
    free(s->input);
    s->tool_name = s->call_id = s->input = NULL;
}

int main(void) {
    const char *dir = tu_workspace();
    write_file(dir, "a.txt", "alpha\n");
    write_file(dir, "b.txt", "bravo\n");
    hooks_state s;

    tu_section("PreToolUse deny, with the request's facts");
    char *r = turn(dir, DENY, READ_A, &s);
    CHECK_CONTAINS(r, "Tool execution blocked by a PreToolUse hook: 'read_file'.");
    CHECK_CONTAINS(r, "Hook reason: not from C");
    CHECK_STATUS(atomic_load(&s.answer_status), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(s.tool_name, "read_file");
    CHECK_STR_EQ(s.call_id, "c1");
    CHECK_CONTAINS(s.input, TU_KV("hook_event_name", "PreToolUse"));
    CHECK_CONTAINS(s.input, "\"tool_input\":{\"file_path\":\"a.txt\"}");
    /* UserPromptSubmit, SessionStart (the agent's first turn), PreToolUse, Stop. */
    CHECK_STR_EQ(s.events, "5304");
    free(r);
    clear(&s);

    tu_section("a rewrite answered later from another thread");
    r = turn(dir, REWRITE_LATER, READ_A, &s);
    CHECK_CONTAINS(r, "bravo");
    CHECK_NOT_CONTAINS(r, "alpha");
    free(r);
    clear(&s);

    tu_section("context after the call");
    r = turn(dir, CONTEXT, READ_A, &s);
    CHECK_CONTAINS(r, "alpha");
    CHECK_CONTAINS(r, "<system-reminder>\nchecked by C\n</system-reminder>");
    free(r);
    clear(&s);

    tu_section("Stop sends the agent back to work once");
    memset(&s, 0, sizeof s);
    s.mode = STOP_ONCE;
    agentao_agent *a = agent_with_hooks(dir, "{\"text\":\"first\"},{\"text\":\"second\"}", &s);
    if (a) {
        char *text = tu_chat(a, "go");
        CHECK_STR_EQ(text, "second");
        free(text);
        char *h = tu_history(a);
        CHECK_CONTAINS(h, TU_KV("content", "one more thing"));
        free(h);
        agentao_agent_free(a);
        CHECK(atomic_load(&s.freed) == 1);
    }
    clear(&s);

    tu_section("a failed or refused PreToolUse answer denies the call");
    r = turn(dir, FAIL, READ_A, &s);
    CHECK_CONTAINS(r, "Tool execution blocked by a PreToolUse hook");
    CHECK_CONTAINS(r, "the host's hook failed: host says no");
    free(r);
    clear(&s);
    r = turn(dir, BAD_OUTPUT, READ_A, &s);
    CHECK_STATUS(atomic_load(&s.answer_status), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(r, "Tool execution blocked by a PreToolUse hook");
    CHECK_CONTAINS(r, "is not allow, deny or ask");
    free(r);
    clear(&s);
    r = turn(dir, WRONG_KIND, READ_A, &s);
    CHECK_STATUS(atomic_load(&s.answer_status), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(r, "the host answered with the wrong kind");
    free(r);
    clear(&s);
    CHECK_STATUS(agentao_reply_hook(NULL, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);

    tu_section("no opinion lets the call run; removing the hooks releases them");
    memset(&s, 0, sizeof s);
    s.mode = NO_OPINION;
    a = agent_with_hooks(dir, READ_A, &s);
    if (a) {
        char *text = tu_chat(a, "go");
        free(text);
        char *last = tu_last_tool_result(a);
        CHECK_CONTAINS(last, "alpha");
        free(last);
        CHECK_STATUS(agentao_agent_set_hooks(a, NULL, NULL), AGENTAO_STATUS_OK);
        CHECK(atomic_load(&s.freed) == 1);
        agentao_agent_free(a);
        CHECK(atomic_load(&s.freed) == 1);
    }
    clear(&s);
    return tu_finish("test_hooks");
}
