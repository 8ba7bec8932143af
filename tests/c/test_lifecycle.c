/* Library-wide calls and the agent's life: version, schema, new/free, free(NULL), errors,
 * status names, session ids, the first chat. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static void test_version(void) {
    tu_section("version");
    CHECK_STR_EQ(agentao_version(), AGENTAO_VERSION);
    CHECK(agentao_version_number() == AGENTAO_VERSION_NUMBER);
    CHECK(AGENTAO_VERSION_NUMBER ==
          AGENTAO_VERSION_MAJOR * 1000000 + AGENTAO_VERSION_MINOR * 1000 + AGENTAO_VERSION_PATCH);
    char *parts = tu_printf("%d.%d.%d", AGENTAO_VERSION_MAJOR, AGENTAO_VERSION_MINOR,
                            AGENTAO_VERSION_PATCH);
    CHECK_STR_EQ(agentao_version(), parts);
    free(parts);
    /* Static: the same pointer every time. */
    CHECK(agentao_version() == agentao_version());
}

static void test_schema(void) {
    tu_section("host events schema");
    char *file = tu_read_file(AGENTAO_REPO_DIR "/docs/schema/host.events.v3.schema.json");
    CHECK_MSG(file != NULL, "cannot read docs/schema/host.events.v3.schema.json");
    const char *schema = agentao_host_events_schema();
    CHECK(schema != NULL);
    if (file && schema) {
        CHECK_MSG(strlen(schema) == strlen(file), "schema length %zu, file length %zu",
                  strlen(schema), strlen(file));
        CHECK_MSG(strcmp(schema, file) == 0, "agentao_host_events_schema() differs from the file");
    }
    free(file);
}

static void test_acp_schema(void) {
    tu_section("ACP schema");
    char *file = tu_read_file(AGENTAO_REPO_DIR "/docs/schema/host.acp.schema.json");
    CHECK_MSG(file != NULL, "cannot read docs/schema/host.acp.schema.json");
    const char *schema = agentao_host_acp_schema();
    CHECK(schema != NULL);
    CHECK(schema == agentao_host_acp_schema());
    if (file && schema) {
        CHECK_MSG(strlen(schema) == strlen(file), "schema length %zu, file length %zu",
                  strlen(schema), strlen(file));
        CHECK_MSG(strcmp(schema, file) == 0, "agentao_host_acp_schema() differs from the file");
        CHECK(strstr(schema, "\"AcpSessionUpdateParams\"") != NULL);
    }
    free(file);
}

static void test_worker_threads_before_runtime(void) {
    tu_section("runtime worker threads");
    agentao_error *err = (agentao_error *)1;
    CHECK_STATUS(agentao_runtime_set_worker_threads(0, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK(err != NULL && agentao_error_status(err) == AGENTAO_STATUS_INVALID_ARGUMENT);
    agentao_error_free(err);
    /* A count no machine can spawn: refused now, not an abort or a hang at the first agent. */
    const uint32_t too_many[] = {UINT32_MAX, 100000, 1025};
    for (size_t i = 0; i < sizeof too_many / sizeof *too_many; i++) {
        err = NULL;
        CHECK_STATUS(agentao_runtime_set_worker_threads(too_many[i], &err), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "at most 1024");
        agentao_error_free(err);
    }
    err = (agentao_error *)1;
    CHECK_STATUS(agentao_runtime_set_worker_threads(2, &err), AGENTAO_STATUS_OK);
    CHECK(err == NULL); /* cleared on success */
}

static void test_free_null(void) {
    tu_section("free(NULL) is a no-op everywhere");
    agentao_string_free(NULL);
    agentao_error_free(NULL);
    agentao_agent_free(NULL);
    agentao_cancel_token_free(NULL);
    agentao_stream_free(NULL);
    agentao_host_event_stream_free(NULL);
    agentao_broadcaster_free(NULL);
    CHECK(agentao_agent_session_id(NULL) == NULL);
    CHECK(!agentao_agent_remove_host_event_observer(NULL, 1));
}

static void test_errors_and_status_names(const char *dir) {
    tu_section("error objects and status names");
    CHECK_STATUS(agentao_error_status(NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STR_EQ(agentao_error_message(NULL), "");

    char *cfg = tu_printf("{\"working_directory\":\"%s\",\"bogus_key\":1}", dir);
    agentao_agent *agent = (agentao_agent *)1;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_new(cfg, NULL, &agent, &err), AGENTAO_STATUS_INVALID_CONFIG);
    CHECK(agent == NULL);
    CHECK(err != NULL);
    CHECK_STATUS(agentao_error_status(err), AGENTAO_STATUS_INVALID_CONFIG);
    CHECK_CONTAINS(agentao_error_message(err), "bogus_key");
    /* The message is borrowed from the error: the same pointer until freed. */
    CHECK(agentao_error_message(err) == agentao_error_message(err));
    agentao_error_free(err);
    free(cfg);

    static const char *names[] = {
        "OK", "NULL_ARGUMENT", "INVALID_ARGUMENT", "INVALID_UTF8", "INVALID_JSON",
        "INVALID_CONFIG", "TURN_IN_PROGRESS", "NO_SUBSCRIBE", "STREAM_SUBSCRIBE", "CANCELLED",
        "TIMEOUT", "REENTRANT", "PANIC", "INTERNAL", "HOST_ERROR", "CLOSED", "NO_ENGINE",
        "EVENTS_DROPPED", "CONFLICT", "STORE_UNAVAILABLE", "CORRUPT_SESSION",
    };
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        CHECK_STR_EQ(agentao_status_name(i), names[i]);
    CHECK(AGENTAO_STATUS_NO_ENGINE == 16 && AGENTAO_STATUS_CLOSED == 15 && AGENTAO_STATUS_PANIC == 12);
    CHECK(AGENTAO_STATUS_EVENTS_DROPPED == 17 && AGENTAO_STATUS_CORRUPT_SESSION == 20);
    CHECK_STR_EQ(agentao_status_name(-1), "UNKNOWN");
    CHECK_STR_EQ(agentao_status_name(21), "UNKNOWN");
    CHECK_STR_EQ(agentao_status_name(INT32_MAX), "UNKNOWN");
}

static void test_new_free(const char *dir) {
    tu_section("new / free / session id / first turn");
    char *cfg = tu_config(dir, "{\"text\":\"Hello from the script\",\"chunk_size\":4}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    agentao_agent *b = tu_agent(cfg, NULL);
    if (!a || !b) {
        agentao_agent_free(a);
        agentao_agent_free(b);
        free(cfg);
        return;
    }
    const char *sid = agentao_agent_session_id(a);
    CHECK(sid != NULL && strlen(sid) == 36);
    CHECK(sid && sid[8] == '-' && sid[13] == '-' && sid[18] == '-' && sid[23] == '-');
    CHECK(sid == agentao_agent_session_id(a)); /* borrowed, stable */
    CHECK(strcmp(sid, agentao_agent_session_id(b)) != 0);

    char *last = tu_last_turn(a);
    CHECK_STR_EQ(last, "null");
    free(last);
    char *hist = tu_history(a);
    CHECK_STR_EQ(hist, "[]");
    free(hist);
    char *perms = NULL;
    CHECK_STATUS(agentao_agent_active_permissions(a, &perms, NULL), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(perms, "no-engine");
    agentao_string_free(perms);

    /* After the first agent the runtime exists: the worker count is fixed. */
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_runtime_set_worker_threads(4, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK(agentao_error_status(err) == AGENTAO_STATUS_INVALID_ARGUMENT);
    agentao_error_free(err);

    char *text = (char *)1;
    err = (agentao_error *)1;
    CHECK_STATUS(agentao_agent_chat(a, "hi", -1, NULL, &text, &err), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "Hello from the script");
    CHECK(err == NULL);
    agentao_string_free(text);

    last = tu_last_turn(a);
    CHECK_CONTAINS(last, TU_KV("type", "turn_outcome"));
    CHECK_CONTAINS(last, TU_KV("status", "ok"));
    CHECK_CONTAINS(last, TU_KV("text", "Hello from the script"));
    CHECK_CONTAINS(last, "\"incomplete_reason\":null");
    CHECK_CONTAINS(last, "\"is_answer\":true");
    free(last);
    hist = tu_history(a);
    CHECK_CONTAINS(hist, TU_KV("role", "user"));
    CHECK_CONTAINS(hist, TU_KV("role", "assistant"));
    CHECK_CONTAINS(hist, "Hello from the script");
    free(hist);
    /* b is untouched by a's turn. */
    last = tu_last_turn(b);
    CHECK_STR_EQ(last, "null");
    free(last);

    agentao_agent_free(a);
    agentao_agent_free(b);
    free(cfg);
}

static void test_many_agents(const char *dir) {
    tu_section("many agents created and freed");
    char *cfg = tu_config(dir, "{\"text\":\"x\"}", NULL);
    for (int i = 0; i < 20; i++) {
        agentao_agent *a = tu_agent(cfg, NULL);
        if (!a) break;
        if (i % 5 == 0) {
            char *text = NULL;
            CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
            agentao_string_free(text);
        }
        agentao_agent_free(a);
    }
    free(cfg);
}

int main(void) {
    /* Before anything starts the runtime. */
    test_worker_threads_before_runtime();
    test_version();
    test_schema();
    test_acp_schema();
    test_free_null();
    const char *dir = tu_workspace();
    test_errors_and_status_names(dir);
    test_new_free(dir);
    test_many_agents(dir);
    return tu_finish("test_lifecycle");
}
