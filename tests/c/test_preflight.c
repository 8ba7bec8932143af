/* The permission preflight through the C ABI: the reference's recorded decisions
 * (tests/c/data/preflight_sample.tsv, drawn from tests/conformance/permissions/decisions.jsonl
 * by make_preflight_sample.py) replayed through agentao_agent_preflight, the hardline report
 * with and without an engine, agreement with what a turn then does, and bad input. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define SAMPLE AGENTAO_REPO_DIR "/tests/c/data/preflight_sample.tsv"

enum { F_LINE, F_MODE, F_RULES, F_RUN_ALLOW, F_RUN_DENY, F_TOOL, F_ARGS, F_OUTCOME, F_REASON, F_RULE, F_N };

static int split(char *line, char **f) {
    int n = 0;
    for (char *p = line; n < F_N; n++) {
        f[n] = p;
        char *tab = strchr(p, '\t');
        if (!tab) {
            n++;
            break;
        }
        *tab = 0;
        p = tab + 1;
    }
    return n;
}

/* One agent per distinct (mode, rules, run rules): the sample has 77 of them. */
typedef struct {
    char *key;
    agentao_agent *agent;
} cached_agent;

static cached_agent cache[256];
static int n_cached;

static agentao_agent *agent_for(const char *dir, char **f) {
    char *key = tu_printf("%s\t%s\t%s\t%s", f[F_MODE], f[F_RULES], f[F_RUN_ALLOW], f[F_RUN_DENY]);
    for (int i = 0; i < n_cached; i++) {
        if (strcmp(cache[i].key, key) == 0) {
            free(key);
            return cache[i].agent;
        }
    }
    bool plan = strcmp(f[F_MODE], "plan") == 0;
    char *perm = tu_printf("\"permissions\":{\"mode\":\"%s\",\"rules\":%s}",
                           plan ? "workspace-write" : f[F_MODE], f[F_RULES]);
    char *cfg = tu_config(dir, "{\"text\":\"unused\"}", perm);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    free(perm);
    if (!a || n_cached == 256) {
        free(key);
        CHECK(n_cached < 256);
        agentao_agent_free(a);
        return NULL;
    }
    if (plan) CHECK_STATUS(agentao_agent_set_permission_mode(a, "plan", NULL, NULL), AGENTAO_STATUS_OK);
    if (strcmp(f[F_RUN_ALLOW], "null") || strcmp(f[F_RUN_DENY], "null"))
        CHECK_STATUS(agentao_agent_add_run_rules(a, f[F_RUN_ALLOW], f[F_RUN_DENY], NULL, NULL), AGENTAO_STATUS_OK);
    cache[n_cached++] = (cached_agent){key, a};
    return a;
}

static void free_cache(void) {
    for (int i = 0; i < n_cached; i++) {
        free(cache[i].key);
        agentao_agent_free(cache[i].agent);
    }
    n_cached = 0;
}

static int replay_line(const char *dir, char **f) {
    agentao_agent *a = agent_for(dir, f);
    if (!a) return 1;
    int bad = 0;
    char *json = NULL;
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_preflight(a, f[F_TOOL], f[F_ARGS], &json, &err);
    char *outcome = tu_printf("\"outcome\":\"%s\"", f[F_OUTCOME]);
    char *reason = tu_printf("\"reason\":%s", f[F_REASON]);
    char *rule = tu_printf("\"matched_rule\":%s", f[F_RULE]);
    if (st != AGENTAO_STATUS_OK || !json || !strstr(json, outcome) || !strstr(json, reason) || !strstr(json, rule)) {
        tu_fail_at(__FILE__, __LINE__, "decisions.jsonl line %s (%s %s %s): want %s %s %s, got %s %s", f[F_LINE],
                   f[F_MODE], f[F_TOOL], f[F_ARGS], outcome, reason, rule, json ? json : agentao_status_name(st),
                   agentao_error_message(err));
        bad = 1;
    }
    free(outcome);
    free(reason);
    free(rule);
    agentao_string_free(json);
    agentao_error_free(err);
    return bad;
}

static void test_vectors(void) {
    tu_section("recorded reference decisions through agentao_agent_preflight");
    FILE *fp = fopen(SAMPLE, "r");
    CHECK_MSG(fp != NULL, "cannot open %s", SAMPLE);
    if (!fp) return;
    const char *dir = tu_workspace();
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int n = 0, failed = 0;
    while ((len = getline(&line, &cap, fp)) > 0) {
        if (line[len - 1] == '\n') line[len - 1] = 0;
        char *f[F_N];
        if (split(line, f) != F_N) {
            tu_fail_at(__FILE__, __LINE__, "malformed sample line %d", n + 1);
            continue;
        }
        failed += replay_line(dir, f);
        n++;
    }
    free(line);
    fclose(fp);
    printf("  preflight: %d agents for the sample's configurations\n", n_cached);
    free_cache();
    printf("  preflight: %d / %d recorded decisions reproduced\n", n - failed, n);
    CHECK_MSG(n >= 800, "only %d sample lines", n);
}

static void test_hardline_and_sources(void) {
    tu_section("hardline and source, with and without an engine");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"x\"}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (a) {
        char *json = NULL;
        /* No engine: the shell prompts, and the floor refuses at launch. */
        CHECK_STATUS(agentao_agent_preflight(a, "run_shell_command", "{\"command\":\"rm -rf /\"}", &json, NULL), AGENTAO_STATUS_OK);
        CHECK_CONTAINS(json, "\"outcome\":\"prompt\"");
        CHECK_CONTAINS(json, "\"source\":\"fallback\"");
        CHECK_CONTAINS(json, "\"hardline\":\"recursive delete of root / system directory / home\"");
        agentao_string_free(json);
        CHECK_STATUS(agentao_agent_preflight(a, "read_file", "{\"file_path\":\"a\"}", &json, NULL), AGENTAO_STATUS_OK);
        CHECK_CONTAINS(json, "\"outcome\":\"allow\"");
        CHECK_NOT_CONTAINS(json, "hardline");
        agentao_string_free(json);
        agentao_agent_free(a);
    }
    cfg = tu_config(dir, "{\"text\":\"x\"}", "\"permissions\":{\"mode\":\"full-access\"}");
    a = tu_agent(cfg, NULL);
    free(cfg);
    if (a) {
        char *json = NULL;
        CHECK_STATUS(agentao_agent_preflight(a, "run_shell_command", "{\"command\":\"mkfs.ext4 /dev/sda1\"}", &json, NULL), AGENTAO_STATUS_OK);
        CHECK_CONTAINS(json, "\"outcome\":\"deny\"");
        CHECK_CONTAINS(json, "\"source\":\"hardline\"");
        CHECK_CONTAINS(json, "\"hardline\":\"filesystem creation (mkfs)\"");
        CHECK_CONTAINS(json, "\"mode\":\"full-access\"");
        agentao_string_free(json);
        CHECK_STATUS(agentao_agent_preflight(a, "write_file", "{\"file_path\":\"a\",\"content\":\"x\"}", &json, NULL), AGENTAO_STATUS_OK);
        CHECK_CONTAINS(json, "\"source\":\"preset\"");
        agentao_string_free(json);
        CHECK_STATUS(agentao_agent_add_run_rules(a, NULL, "[{\"tool\":\"write_file\",\"action\":\"deny\"}]", NULL, NULL), AGENTAO_STATUS_OK);
        CHECK_STATUS(agentao_agent_preflight(a, "write_file", "{\"file_path\":\"a\",\"content\":\"x\"}", &json, NULL), AGENTAO_STATUS_OK);
        CHECK_CONTAINS(json, "\"outcome\":\"deny\"");
        CHECK_CONTAINS(json, "\"source\":\"run-rule\"");
        agentao_string_free(json);
        /* A mode switch is seen by the next preflight. */
        CHECK_STATUS(agentao_agent_set_permission_mode(a, "read-only", NULL, NULL), AGENTAO_STATUS_OK);
        CHECK_STATUS(agentao_agent_preflight(a, "replace", "{}", &json, NULL), AGENTAO_STATUS_OK);
        CHECK_CONTAINS(json, "\"source\":\"read-only-gate\"");
        CHECK_CONTAINS(json, "\"mode\":\"read-only\"");
        agentao_string_free(json);
        agentao_agent_free(a);
    }
}

static void test_agrees_with_the_turn(void) {
    tu_section("the preflight's answer is what the turn does");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir,
                          "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"write_file\",\"arguments\":{\"file_path\":\"secret.txt\",\"content\":\"x\"}}]},{\"text\":\"done\"}",
                          "\"permissions\":{\"mode\":\"workspace-write\",\"rules\":[{\"tool\":\"write_file\",\"args\":{\"file_path\":\"secret\"},\"action\":\"deny\"}]}");
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (a) {
        char *json = NULL;
        CHECK_STATUS(agentao_agent_preflight(a, "write_file", "{\"file_path\":\"secret.txt\",\"content\":\"x\"}", &json, NULL), AGENTAO_STATUS_OK);
        CHECK_CONTAINS(json, "\"outcome\":\"deny\"");
        CHECK_CONTAINS(json, "\"source\":\"user-rule\"");
        CHECK_CONTAINS(json, "\"reason\":\"user-rule:write_file\"");
        agentao_string_free(json);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        agentao_string_free(text);
        char *path = tu_printf("%s/secret.txt", dir);
        CHECK_MSG(!tu_file_exists(path), "the preflight said deny but the turn wrote the file");
        free(path);
        agentao_agent_free(a);
    }
}

static void test_bad_input(void) {
    tu_section("bad input");
    char *cfg = tu_config(tu_workspace(), "{\"text\":\"x\"}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    char *json = (char *)1;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_preflight(NULL, "read_file", "{}", &json, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(json == NULL);
    CHECK_STATUS(agentao_agent_preflight(a, NULL, "{}", &json, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_agent_preflight(a, "read_file", NULL, &json, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_agent_preflight(a, "read_file", "{}", NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_agent_preflight(a, "read_file", "{\"a\":", &json, &err), AGENTAO_STATUS_INVALID_JSON);
    CHECK_CONTAINS(agentao_error_message(err), "args_json");
    agentao_error_free(err);
    CHECK_STATUS(agentao_agent_preflight(a, "read_file", "[1]", &json, NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(agentao_agent_preflight(a, "read\xff", "{}", &json, NULL), AGENTAO_STATUS_INVALID_UTF8);
    CHECK_STATUS(agentao_agent_preflight(a, "no_such_tool", "{}", &json, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "'no_such_tool'");
    agentao_error_free(err);
    CHECK(json == NULL);
    agentao_agent_free(a);
}

static void never_run(void *ud, const char *args, const struct agentao_tool_call *call, agentao_reply *reply) {
    CHECK_MSG(0, "the preflight ran a host tool");
    agentao_reply_tool_result(reply, "x", NULL);
}

/* The preflight's answer for `tool`, or NULL (with the failure reported) when it has none. */
static char *preflight_of(agentao_agent *a, const char *tool, const char *args) {
    char *json = NULL;
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_preflight(a, tool, args, &json, &err);
    CHECK_MSG(st == AGENTAO_STATUS_OK, "preflight(%s): %s: %s", tool, agentao_status_name(st), agentao_error_message(err));
    agentao_error_free(err);
    char *copy = json ? strdup(json) : NULL;
    agentao_string_free(json);
    return copy;
}

static void test_every_offered_tool(void) {
    tu_section("every tool the next turn offers: MCP, sub-agent spawn, background and host tools");
    const char *dir = tu_workspace();
    char *extra = tu_printf("\"permissions\":{\"mode\":\"read-only\"},"
                            "\"subagents\":{\"background\":{\"enabled\":true}},"
                            "\"mcp_servers\":{\"srv\":{\"command\":\"%s\"}}", MCP_FAULT_SERVER_BIN);
    char *cfg = tu_config(dir, "{\"text\":\"connected\"}", extra);
    free(extra);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    CHECK_STATUS(agentao_agent_add_subagent(a, "{\"name\":\"helper\",\"description\":\"helps\"}", NULL), AGENTAO_STATUS_OK);
    agentao_tool_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.name = "lookup";
    d.description = "looks up";
    d.parameters_json = "{\"type\":\"object\",\"properties\":{}}";
    d.is_read_only = true;
    d.execute = never_run;
    CHECK_STATUS(agentao_agent_add_tool(a, &d, false, NULL), AGENTAO_STATUS_OK);
    /* Known before any turn: the spawn, background and host tools. */
    char *j = preflight_of(a, "agent_helper", "{\"task\":\"x\"}");
    CHECK_CONTAINS(j, "\"mode\":\"read-only\"");
    free(j);
    j = preflight_of(a, "check_background_agent", "{\"agent_id\":\"x\"}");
    free(j);
    j = preflight_of(a, "lookup", "{}");
    CHECK_CONTAINS(j, "\"outcome\":\"allow\"");
    free(j);
    /* The first turn connects the server; its tools are then known. */
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "connect", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "connected");
    agentao_string_free(text);
    j = preflight_of(a, "mcp_srv_echo", "{\"text\":\"x\"}");
    CHECK_CONTAINS(j, "\"outcome\":");
    free(j);
    /* Not read-only: the read-only gate refuses it, as the turn does. */
    j = preflight_of(a, "mcp_srv_crash", "{}");
    CHECK_CONTAINS(j, "\"outcome\":\"deny\"");
    CHECK_CONTAINS(j, "\"source\":\"read-only-gate\"");
    free(j);
    char *json = NULL;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_preflight(a, "mcp_srv_nope", "{}", &json, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "'mcp_srv_nope'");
    agentao_error_free(err);
    agentao_agent_free(a);
}

int main(void) {
    test_vectors();
    test_hardline_and_sources();
    test_agrees_with_the_turn();
    test_bad_input();
    test_every_offered_tool();
    return tu_finish("test_preflight");
}
