/* Bad input everywhere: NULL arguments (outputs set to NULL), invalid UTF-8, bad JSON, bad
 * configs (the message names the field), bad struct_size, bad history, unknown permission
 * mode, bad reply values. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static atomic_int freed;
static void count_free(void *ud) {
    (void)ud;
    atomic_fetch_add(&freed, 1);
}

static void test_agent_new(const char *dir) {
    tu_section("agentao_agent_new");
    char *good = tu_config(dir, "{\"text\":\"x\"}", NULL);
    agentao_agent *a = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_new(NULL, NULL, &a, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(a == NULL);
    CHECK_FAILS_WITH(agentao_agent_new(good, NULL, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    /* err_out may be NULL. */
    a = TU_JUNK;
    CHECK_STATUS(agentao_agent_new(NULL, NULL, &a, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(a == NULL);

    a = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_new("{\"working_directory\":\"\xff\xfe\"}", NULL, &a, &err),
                AGENTAO_STATUS_INVALID_UTF8);
    CHECK(a == NULL);
    a = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_new("{\"working_directory\": ", NULL, &a, &err),
                AGENTAO_STATUS_INVALID_JSON);
    CHECK(a == NULL);
    CHECK_FAILS_WITH(agentao_agent_new("", NULL, &a, &err), AGENTAO_STATUS_INVALID_JSON);
    CHECK_FAILS_WITH(agentao_agent_new("[1,2", NULL, &a, &err), AGENTAO_STATUS_INVALID_JSON);

    struct {
        const char *json;
        const char *field;
    } bad[] = {
        {"{\"working_directory\":\"%s\",\"frobnicate\":true,\"llm\":{\"provider\":\"scripted\",\"script\":[]}}", "frobnicate"},
        {"{\"llm\":{\"provider\":\"scripted\",\"script\":[]}}", "working_directory"},
        {"{\"working_directory\":\"%s\",\"llm\":{\"provider\":\"carrier-pigeon\"}}", "llm.provider"},
        {"{\"working_directory\":\"%s\",\"llm\":{\"provider\":\"scripted\"}}", "llm.script"},
        {"{\"working_directory\":\"%s\",\"max_iterations\":\"many\",\"llm\":{\"provider\":\"scripted\",\"script\":[]}}", "max_iterations"},
        {"{\"working_directory\":\"%s/does/not/exist\",\"llm\":{\"provider\":\"scripted\",\"script\":[]}}", "working_directory"},
        {"{\"working_directory\":\"%s\",\"llm\":{\"provider\":\"openai\",\"base_url\":\"ftp://x\",\"api_key\":\"k\",\"model\":\"m\"}}", "llm.base_url"},
        {"{\"working_directory\":\"%s\",\"llm\":{\"provider\":\"scripted\",\"script\":{\"responses\":[{\"txet\":\"typo\"}]}}}", "txet"},
        {"{\"working_directory\":\"%s\",\"tools\":{\"enabled\":[\"teleport\"]},\"llm\":{\"provider\":\"scripted\",\"script\":[]}}", "teleport"},
        {"{\"working_directory\":\"%s\",\"permissions\":{\"mode\":\"yolo\"},\"llm\":{\"provider\":\"scripted\",\"script\":[]}}", "permissions.mode"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *cfg = tu_printf(bad[i].json, dir);
        agentao_error *err = NULL;
        a = TU_JUNK;
        agentao_status st = agentao_agent_new(cfg, NULL, &a, &err);
        CHECK_MSG(st == AGENTAO_STATUS_INVALID_CONFIG, "config %zu: got %s, want INVALID_CONFIG",
                  i, agentao_status_name(st));
        CHECK(a == NULL);
        CHECK_MSG(err && strstr(agentao_error_message(err), bad[i].field),
                  "config %zu: the message does not name `%s`: %s", i, bad[i].field,
                  agentao_error_message(err));
        agentao_error_free(err);
        free(cfg);
    }

    tu_section("bad struct_size; userdata_free once on every failure");
    agentao_transport t;
    memset(&t, 0, sizeof t);
    t.userdata = &freed;
    t.userdata_free = count_free;
    t.struct_size = 4; /* not even the userdata_free slot */
    atomic_store(&freed, 0);
    a = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_new(good, &t, &a, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK(a == NULL);
    CHECK(atomic_load(&freed) == 1);
    t.struct_size = 0;
    CHECK_FAILS_WITH(agentao_agent_new(good, &t, &a, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK(atomic_load(&freed) == 2);
    /* A failing config with a good transport also releases it, exactly once. */
    t.struct_size = (uint32_t)sizeof t;
    CHECK_FAILS_WITH(agentao_agent_new("{}", &t, &a, &err), AGENTAO_STATUS_INVALID_CONFIG);
    CHECK(atomic_load(&freed) == 3);
    CHECK_FAILS_WITH(agentao_agent_new(NULL, &t, &a, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == 4);
    CHECK_FAILS_WITH(agentao_agent_new(good, &t, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == 5);
    /* The minimal valid size: up to and including userdata_free. */
    t.struct_size = (uint32_t)(offsetof(agentao_transport, userdata_free) + sizeof(void *));
    a = tu_agent(good, &t);
    CHECK(a != NULL);
    CHECK(atomic_load(&freed) == 5);
    agentao_agent_free(a);
    CHECK(atomic_load(&freed) == 6);
    tu_sleep_ms(50);
    CHECK(atomic_load(&freed) == 6);
    free(good);
}

static void bad_confirm(void *ud, const char *tool, const char *desc, const char *args,
                        const char *call_id, struct agentao_reply *reply) {
    atomic_int *st = ud;
    agentao_error *err = NULL;
    /* An unknown confirmation value: INVALID_ARGUMENT, and the request is failed. */
    atomic_store(st, (int)agentao_reply_confirm(reply, 7, &err));
    if (!err || agentao_error_status(err) != AGENTAO_STATUS_INVALID_ARGUMENT)
        tu_fail_at(__FILE__, __LINE__, "reply_confirm(7): no INVALID_ARGUMENT error object");
    agentao_error_free(err);
}

static void wrong_kind_confirm(void *ud, const char *tool, const char *desc, const char *args,
                               const char *call_id, struct agentao_reply *reply) {
    atomic_int *st = ud;
    /* A text answer to a confirmation: the wrong kind. */
    atomic_store(st, (int)agentao_reply_text(reply, "yes please", NULL));
}

static void bad_utf8_fail_confirm(void *ud, const char *tool, const char *desc, const char *args,
                                  const char *call_id, struct agentao_reply *reply) {
    atomic_int *st = ud;
    /* A failure whose message is not UTF-8: INVALID_UTF8, and the request is still failed. */
    atomic_store(st, (int)agentao_reply_fail(reply, "\xff\xfe no", NULL));
}

static void bad_json_max_iter(void *ud, uint32_t count, const char *pending, struct agentao_reply *reply) {
    atomic_int *st = ud;
    atomic_store(st, (int)agentao_reply_json(reply, "[\"not an object\"]", NULL));
}

static bool st_is_set(void *arg) { return atomic_load((atomic_int *)arg) != -1; }

static void test_replies(const char *dir) {
    tu_section("reply functions");
    CHECK_FAILS_WITH(agentao_reply_confirm(NULL, AGENTAO_CONFIRMATION_ALLOW, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_reply_text(NULL, "x", &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_reply_json(NULL, "{}", &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_reply_fail(NULL, "x", &err), AGENTAO_STATUS_NULL_ARGUMENT);

    const char *script =
        "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"write_file\","
        "\"arguments\":{\"file_path\":\"out.txt\",\"content\":\"x\"}}]},"
        "{\"text\":\"done\"}";
    char *cfg = tu_config(dir, script, NULL);
    void (*confirms[])(void *, const char *, const char *, const char *, const char *,
                       struct agentao_reply *) = {bad_confirm, wrong_kind_confirm, bad_utf8_fail_confirm};
    const agentao_status expected[] = {AGENTAO_STATUS_INVALID_ARGUMENT, AGENTAO_STATUS_INVALID_ARGUMENT,
                                       AGENTAO_STATUS_INVALID_UTF8};
    for (int i = 0; i < 3; i++) {
        atomic_int st = -1;
        agentao_transport t;
        memset(&t, 0, sizeof t);
        t.struct_size = sizeof t;
        t.userdata = &st;
        t.confirm_tool = confirms[i];
        agentao_agent *a = tu_agent(cfg, &t);
        if (!a) continue;
        char *text = TU_JUNK;
        agentao_error *err = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, &err), AGENTAO_STATUS_HOST_ERROR);
        CHECK(text == NULL);
        CHECK(err && agentao_error_status(err) == AGENTAO_STATUS_HOST_ERROR);
        agentao_error_free(err);
        /* The failed reply wakes the turn before the callback has stored what the reply call
           returned, so the turn can end first: wait for the callback's store. */
        CHECK(tu_wait_until(st_is_set, &st, 5000));
        CHECK_STATUS(atomic_load(&st), expected[i]);
        char *last = tu_last_turn(a);
        CHECK_CONTAINS(last, TU_KV("status", "error"));
        free(last);
        char *path = tu_printf("%s/out.txt", dir);
        CHECK_MSG(!tu_file_exists(path), "a failed confirmation still ran write_file");
        free(path);
        agentao_agent_free(a);
    }
    free(cfg);

    /* on_max_iterations answered with JSON that is not an object. */
    cfg = tu_config(dir, "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"list_directory\",\"arguments\":{}}]}", NULL);
    atomic_int st = -1;
    agentao_transport t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.userdata = &st;
    t.on_max_iterations = bad_json_max_iter;
    agentao_agent *a = tu_agent(cfg, &t);
    if (a) {
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "loop", 1, NULL, &text, NULL), AGENTAO_STATUS_HOST_ERROR);
        CHECK(tu_wait_until(st_is_set, &st, 5000));
        CHECK_STATUS(atomic_load(&st), AGENTAO_STATUS_INVALID_JSON);
        agentao_agent_free(a);
    }
    free(cfg);
}

static void never_called_done(void *ud, agentao_status s, const char *o, const agentao_error *e) {
    tu_fail_at(__FILE__, __LINE__, "on_done called for a call that failed");
}
static void never_called_delta(void *ud, const char *d) {
    tu_fail_at(__FILE__, __LINE__, "on_delta called for a call that failed");
}
static void observer(void *ud, const char *ev) {}

static void test_agent_calls(const char *dir) {
    tu_section("agent calls with NULL / bad arguments");
    char *cfg = tu_config(dir, "{\"text\":\"x\"}",
                          "\"permissions\":{\"mode\":\"workspace-write\"}");
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    char *s = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_chat(NULL, "hi", -1, NULL, &s, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(s == NULL);
    s = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_chat(a, NULL, -1, NULL, &s, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(s == NULL);
    CHECK_FAILS_WITH(agentao_agent_chat(a, "hi", -1, NULL, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    s = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_chat(a, "bad \xc3\x28 utf8", -1, NULL, &s, &err), AGENTAO_STATUS_INVALID_UTF8);
    CHECK(s == NULL);

    tu_done d;
    tu_done_init(&d);
    CHECK_FAILS_WITH(agentao_agent_run(NULL, "hi", -1, NULL, tu_on_done, &d, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_run(a, NULL, -1, NULL, never_called_done, &d, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_run(a, "hi", -1, NULL, NULL, &d, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_run(a, "\xff", -1, NULL, never_called_done, &d, &err), AGENTAO_STATUS_INVALID_UTF8);
    CHECK_FAILS_WITH(agentao_agent_stream(a, "hi", -1, NULL, NULL, never_called_done, &d, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_stream(a, "hi", -1, NULL, never_called_delta, NULL, &d, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_stream(NULL, "hi", -1, NULL, never_called_delta, never_called_done, &d, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    tu_done_destroy(&d);

    agentao_stream *stream = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_stream_open(NULL, "hi", -1, NULL, &stream, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(stream == NULL);
    CHECK_FAILS_WITH(agentao_agent_stream_open(a, "hi", -1, NULL, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    stream = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_stream_open(a, "\xff", -1, NULL, &stream, &err), AGENTAO_STATUS_INVALID_UTF8);
    CHECK(stream == NULL);
    s = TU_JUNK;
    CHECK_FAILS_WITH(agentao_stream_next(NULL, 10, &s, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(s == NULL);

    agentao_host_event_stream *hs = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_host_events_open(NULL, NULL, &hs, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(hs == NULL);
    CHECK_FAILS_WITH(agentao_agent_host_events_open(a, NULL, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_host_events_open(a, "\xff", &hs, &err), AGENTAO_STATUS_INVALID_UTF8);
    s = TU_JUNK;
    CHECK_FAILS_WITH(agentao_host_event_stream_next(NULL, 10, &s, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(s == NULL);

    uint64_t id = 0;
    CHECK_FAILS_WITH(agentao_agent_add_host_event_observer(a, NULL, NULL, NULL, &id, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_add_host_event_observer(a, observer, NULL, NULL, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_add_host_event_observer(NULL, observer, NULL, NULL, &id, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    /* A failed registration releases the userdata: its free function runs once per call. */
    int freed_before = atomic_load(&freed);
    CHECK_FAILS_WITH(agentao_agent_add_host_event_observer(a, NULL, NULL, count_free, &id, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_add_host_event_observer(a, observer, NULL, count_free, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_add_host_event_observer(NULL, observer, NULL, count_free, &id, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == freed_before + 3);
    CHECK(!agentao_agent_remove_host_event_observer(a, 12345));

    s = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_last_turn(NULL, &s, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(s == NULL);
    CHECK_FAILS_WITH(agentao_agent_last_turn(a, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    s = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_history(NULL, &s, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(s == NULL);
    CHECK_FAILS_WITH(agentao_agent_history(a, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_active_permissions(a, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_active_permissions(NULL, &s, &err), AGENTAO_STATUS_NULL_ARGUMENT);

    tu_section("set_history");
    CHECK_FAILS_WITH(agentao_agent_set_history(NULL, "[]", &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_set_history(a, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_set_history(a, "[{\"role\":", &err), AGENTAO_STATUS_INVALID_JSON);
    CHECK_FAILS_WITH(agentao_agent_set_history(a, "{\"role\":\"user\"}", &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_set_history(a, "\"text\"", &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_set_history(a, "[{\"role\":\"wizard\",\"content\":\"x\"}]", &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_set_history(a, "[{\"content\":\"no role\"}]", &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_set_history(a, "[\"\xff\"]", &err), AGENTAO_STATUS_INVALID_UTF8);
    char *h = tu_history(a);
    CHECK_STR_EQ(h, "[]"); /* nothing was replaced by the failures */
    free(h);
    CHECK_STATUS(agentao_agent_set_history(a, "[{\"role\":\"user\",\"content\":\"earlier question\"},"
                                              "{\"role\":\"assistant\",\"content\":\"earlier answer\"}]", NULL),
                 AGENTAO_STATUS_OK);
    h = tu_history(a);
    CHECK_CONTAINS(h, "earlier question");
    CHECK_CONTAINS(h, "earlier answer");
    free(h);

    tu_section("permission mode");
    s = TU_JUNK;
    CHECK_FAILS_WITH(agentao_agent_set_permission_mode(a, "yolo", &s, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK(s == NULL);
    CHECK_FAILS_WITH(agentao_agent_set_permission_mode(a, NULL, &s, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_set_permission_mode(NULL, "plan", &s, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    s = NULL;
    CHECK_STATUS(agentao_agent_set_permission_mode(a, "read-only", &s, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(s, "workspace-write");
    agentao_string_free(s);
    CHECK_STATUS(agentao_agent_set_permission_mode(a, "full-access", NULL, NULL), AGENTAO_STATUS_OK);
    char *perms = NULL;
    CHECK_STATUS(agentao_agent_active_permissions(a, &perms, NULL), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(perms, "full-access");
    agentao_string_free(perms);
    agentao_agent_free(a);

    /* Without an engine: NO_ENGINE, but a bad mode is still INVALID_ARGUMENT. */
    cfg = tu_config(dir, "{\"text\":\"x\"}", NULL);
    a = tu_agent(cfg, NULL);
    free(cfg);
    if (a) {
        CHECK_FAILS_WITH(agentao_agent_set_permission_mode(a, "plan", &s, &err), AGENTAO_STATUS_NO_ENGINE);
        CHECK_FAILS_WITH(agentao_agent_set_permission_mode(a, "unknown-mode", &s, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
        agentao_agent_free(a);
    }
}

static void test_tokens_and_broadcaster(void) {
    tu_section("cancel tokens and broadcaster with NULL");
    agentao_cancel_token_cancel(NULL, "x");
    CHECK(!agentao_cancel_token_is_cancelled(NULL));
    CHECK(agentao_cancel_token_child(NULL) == NULL);
    char *s = TU_JUNK;
    CHECK_FAILS_WITH(agentao_cancel_token_reason(NULL, &s, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(s == NULL);
    agentao_cancel_token *t = agentao_cancel_token_new();
    CHECK_FAILS_WITH(agentao_cancel_token_reason(t, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    /* A reason that is not UTF-8 does not crash; the token is cancelled. */
    agentao_cancel_token_cancel(t, "\xff\xfe");
    CHECK(agentao_cancel_token_is_cancelled(t));
    agentao_cancel_token_free(t);

    CHECK_FAILS_WITH(agentao_broadcaster_notify(NULL, "{}", &err), AGENTAO_STATUS_NULL_ARGUMENT);
    agentao_broadcaster *b = agentao_broadcaster_new();
    CHECK_FAILS_WITH(agentao_broadcaster_notify(b, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_broadcaster_notify(b, "\xff", &err), AGENTAO_STATUS_INVALID_UTF8);
    uint64_t id = 0;
    CHECK_STATUS(agentao_broadcaster_subscribe(NULL, observer, NULL, &id), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_broadcaster_subscribe(b, NULL, NULL, &id), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_broadcaster_subscribe(b, observer, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    agentao_broadcaster_unsubscribe(NULL, 1);
    agentao_broadcaster_unsubscribe(b, 999);
    agentao_broadcaster_free(b);
}

int main(void) {
    const char *dir = tu_workspace();
    test_agent_new(dir);
    test_agent_calls(dir);
    test_replies(dir);
    test_tokens_and_broadcaster();
    return tu_finish("test_bad_input");
}
