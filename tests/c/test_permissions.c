/* Permissions through the C API: injected rules and sources, run-scope rules, mode switches,
 * the snapshot, NO_ENGINE without an engine, and provider usage totals. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static const char *WRITE_SECRET =
    "{\"tool_calls\":[{\"id\":\"w1\",\"name\":\"write_file\",\"arguments\":{\"file_path\":\"secret.txt\",\"content\":\"x\"}}]},"
    "{\"text\":\"done\",\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}";

int main(void) {
    tu_section("injected deny rule");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_SECRET, "\"permissions\":{\"mode\":\"workspace-write\"}");
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    CHECK(a != NULL);
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_add_permission_rules(
                     a, "[{\"tool\":\"write_file\",\"args\":{\"file_path\":\"secret\"},\"action\":\"deny\"}]", "host", &err),
                 AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_agent_add_permission_source(a, "injected:tenant-policy", NULL), AGENTAO_STATUS_OK);
    char *snap = NULL;
    CHECK_STATUS(agentao_agent_active_permissions(a, &snap, NULL), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(snap, "\"mode\":\"workspace-write\"");
    CHECK_CONTAINS(snap, "\"preset:workspace-write\"");
    CHECK_CONTAINS(snap, "\"injected:host\"");
    CHECK_CONTAINS(snap, "\"injected:tenant-policy\"");
    agentao_string_free(snap);
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "write the secret", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "done");
    agentao_string_free(text);
    char *path = tu_printf("%s/secret.txt", dir);
    CHECK_MSG(!tu_file_exists(path), "a denied write ran");
    free(path);
    char *hist = tu_history(a);
    CHECK_CONTAINS(hist, "Tool execution denied: 'write_file' is not permitted by the current permission rules.");
    free(hist);

    tu_section("usage totals");
    char *usage = NULL;
    CHECK_STATUS(agentao_agent_usage(a, &usage, NULL), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(usage, "\"prompt_tokens\":7");
    CHECK_CONTAINS(usage, "\"completion_tokens\":3");
    agentao_string_free(usage);

    tu_section("bad rules change nothing");
    CHECK_STATUS(agentao_agent_add_permission_rules(a, "[{\"tool\":\"x\",\"action\":\"maybe\"}]", "bad", &err),
                 AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "rules[0]");
    agentao_error_free(err);
    err = NULL;
    CHECK_STATUS(agentao_agent_add_permission_rules(a, "[{", "bad", NULL), AGENTAO_STATUS_INVALID_JSON);
    CHECK_STATUS(agentao_agent_active_permissions(a, &snap, NULL), AGENTAO_STATUS_OK);
    CHECK_NOT_CONTAINS(snap, "injected:bad");
    agentao_string_free(snap);

    tu_section("run-scope rules and mode switch");
    CHECK_STATUS(agentao_agent_add_run_rules(a, NULL, "[{\"tool\":\"read_file\",\"action\":\"deny\"}]", NULL, NULL),
                 AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_agent_active_permissions(a, &snap, NULL), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(snap, "\"injected:run-spec\"");
    agentao_string_free(snap);
    char *prev = NULL;
    CHECK_STATUS(agentao_agent_set_permission_mode(a, "read-only", &prev, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(prev, "workspace-write");
    agentao_string_free(prev);
    CHECK_STATUS(agentao_agent_set_permission_mode(a, "full-access", &prev, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(prev, "read-only");
    agentao_string_free(prev);
    CHECK_STATUS(agentao_agent_active_permissions(a, &snap, NULL), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(snap, "\"mode\":\"full-access\"");
    agentao_string_free(snap);
    agentao_agent_free(a);

    tu_section("no engine");
    cfg = tu_config(dir, "{\"text\":\"x\"}", NULL);
    a = tu_agent(cfg, NULL);
    free(cfg);
    CHECK_STATUS(agentao_agent_add_permission_rules(a, "[]", "host", NULL), AGENTAO_STATUS_NO_ENGINE);
    CHECK_STATUS(agentao_agent_add_run_rules(a, "[]", "[]", "x", NULL), AGENTAO_STATUS_NO_ENGINE);
    CHECK_STATUS(agentao_agent_add_permission_source(a, "injected:x", NULL), AGENTAO_STATUS_NO_ENGINE);
    CHECK_STATUS(agentao_agent_set_permission_mode(a, "read-only", &prev, NULL), AGENTAO_STATUS_NO_ENGINE);
    CHECK(prev == NULL);
    CHECK_STATUS(agentao_agent_active_permissions(a, &snap, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(snap, "{\"mode\":\"workspace-write\",\"rules\":[],\"loaded_sources\":[\"default:no-engine\"]}");
    agentao_string_free(snap);
    agentao_agent_free(a);

    tu_section("an invalid rules file fails creation, naming the file and rule");
    char *rules_path = tu_printf("%s/permissions.json", dir);
    FILE *f = fopen(rules_path, "w");
    fputs("{\"rules\":[{\"tool\":\"read_file\",\"action\":\"allow\"},{\"tool\":\"x\",\"action\":\"allow\",\"colour\":1}]}", f);
    fclose(f);
    char *extra = tu_printf("\"permissions\":{\"rules_file\":\"%s\"}", rules_path);
    cfg = tu_config(dir, "{\"text\":\"x\"}", extra);
    agentao_agent *bad = NULL;
    CHECK_STATUS(agentao_agent_new(cfg, NULL, &bad, &err), AGENTAO_STATUS_INVALID_CONFIG);
    CHECK(bad == NULL);
    CHECK_CONTAINS(agentao_error_message(err), "permissions.json");
    CHECK_CONTAINS(agentao_error_message(err), "rules[1]");
    agentao_error_free(err);
    free(cfg);
    free(extra);
    free(rules_path);
    return tu_finish("test_permissions");
}
