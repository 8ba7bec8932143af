/* MCP through the C API: the agentao_mcp_registry vtable (its servers connect, the config's
 * servers are merged over them by name, each string handed back once, userdata freed once),
 * bad registries, and agentao_agent_mcp_status. Uses the in-repo mcp-fault-server. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

typedef struct {
    const char *json; /* what list_servers returns */
    atomic_int lists, releases, freed;
    atomic_int bad_release; /* release of a string we did not hand out */
} reg_state;

static const char *list_servers(void *ud) {
    reg_state *s = ud;
    atomic_fetch_add(&s->lists, 1);
    if (!s->json) return NULL;
    return strdup(s->json);
}

static void release_servers(void *ud, const char *json) {
    reg_state *s = ud;
    if (!json || strcmp(json, s->json) != 0) atomic_fetch_add(&s->bad_release, 1);
    atomic_fetch_add(&s->releases, 1);
    free((void *)json);
}

static void reg_free(void *ud) {
    reg_state *s = ud;
    atomic_fetch_add(&s->freed, 1);
}

static agentao_mcp_registry make_registry(reg_state *s) {
    agentao_mcp_registry r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.userdata = s;
    r.userdata_free = reg_free;
    r.list_servers = list_servers;
    r.release_servers = release_servers;
    return r;
}

static char *status_of(agentao_agent *a) {
    char *json = NULL;
    CHECK_STATUS(agentao_agent_mcp_status(a, &json, NULL), AGENTAO_STATUS_OK);
    char *copy = strdup(json ? json : "");
    agentao_string_free(json);
    return copy;
}

static const char *CALL_ECHO =
    "{\"tool_calls\":[{\"id\":\"e1\",\"name\":\"mcp_reg_echo\",\"arguments\":{\"text\":\"from the registry\"}}]},"
    "{\"text\":\"done\"}";

/* A C host does not ignore SIGPIPE (Rust programs do): a library write to a dead server's
 * stdin must never raise it in the host. Counted instead of fatal, and checked at the end. */
static void count_free(void *ud) { atomic_fetch_add((atomic_int *)ud, 1); }

static void never_called(void *ud, const char *args_json, const agentao_tool_call *call, agentao_reply *reply) {
    (void)ud, (void)args_json, (void)call;
    agentao_reply_tool_result(reply, "unexpected", NULL);
}

static atomic_int sigpipes;
static void on_sigpipe(int sig) {
    (void)sig;
    atomic_fetch_add(&sigpipes, 1);
}

int main(void) {
    const char *bin = MCP_FAULT_SERVER_BIN;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigpipe;
    sigaction(SIGPIPE, &sa, NULL);

    tu_section("registry servers connect; config servers win by name");
    {
        const char *dir = tu_workspace();
        reg_state s = {0};
        s.json = tu_printf(
            "{\"reg\":{\"command\":\"%s\"},\"both\":{\"command\":\"%s\",\"args\":[\"--tools\",\"1\"]}}",
            bin, bin);
        char *extra = tu_printf("\"mcp_servers\":{\"both\":{\"command\":\"%s\"}}", bin);
        char *cfg = tu_config(dir, CALL_ECHO, extra);
        agentao_agent *a = tu_agent(cfg, NULL);
        free(cfg);
        free(extra);
        CHECK(a != NULL);
        agentao_mcp_registry r = make_registry(&s);
        CHECK_STATUS(agentao_agent_set_mcp_registry(a, &r, NULL), AGENTAO_STATUS_OK);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "done");
        agentao_string_free(text);
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "from the registry");
        free(hist);
        char *st = status_of(a);
        CHECK_CONTAINS(st, "{\"name\":\"both\",\"status\":\"connected\",\"transport\":\"stdio\"");
        CHECK_CONTAINS(st, "\"tools\":8"); /* the config's `both`: no --tools 1 */
        CHECK_NOT_CONTAINS(st, "\"tools\":9");
        CHECK_CONTAINS(st, "{\"name\":\"reg\",\"status\":\"connected\"");
        free(st);
        CHECK(atomic_load(&s.lists) >= 1);
        CHECK(atomic_load(&s.freed) == 0);
        agentao_agent_free(a);
        CHECK_MSG(atomic_load(&s.releases) == atomic_load(&s.lists), "%d lists, %d releases",
                  atomic_load(&s.lists), atomic_load(&s.releases));
        CHECK(atomic_load(&s.bad_release) == 0);
        CHECK_MSG(atomic_load(&s.freed) == 1, "userdata_free ran %d times", atomic_load(&s.freed));
        free((void *)s.json);
    }

    tu_section("a registry with no servers, bad JSON, a NULL slot, removal");
    {
        const char *dir = tu_workspace();
        char *cfg = tu_config(dir, "{\"text\":\"a\"},{\"text\":\"b\"},{\"text\":\"c\"}", NULL);
        agentao_agent *a = tu_agent(cfg, NULL);
        free(cfg);
        CHECK(a != NULL);
        char *st = status_of(a);
        CHECK_STR_EQ(st, "{\"servers\":[]}");
        free(st);

        reg_state bad = {0};
        bad.json = "{\"x\": [not json";
        agentao_mcp_registry r = make_registry(&bad);
        CHECK_STATUS(agentao_agent_set_mcp_registry(a, &r, NULL), AGENTAO_STATUS_OK);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        agentao_string_free(text);
        st = status_of(a);
        CHECK_CONTAINS(st, "\"registry_error\":\"MCP registry: list_servers returned invalid JSON");
        free(st);

        reg_state empty = {0};
        agentao_mcp_registry r2 = make_registry(&empty);
        r2.list_servers = NULL;
        CHECK_STATUS(agentao_agent_set_mcp_registry(a, &r2, NULL), AGENTAO_STATUS_OK);
        CHECK_MSG(tu_wait_count(&bad.freed, 1, 5000), "the replaced registry was not freed");
        CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        agentao_string_free(text);
        st = status_of(a);
        CHECK_STR_EQ(st, "{\"servers\":[]}");
        free(st);

        CHECK_STATUS(agentao_agent_set_mcp_registry(a, NULL, NULL), AGENTAO_STATUS_OK);
        CHECK_MSG(tu_wait_count(&empty.freed, 1, 5000), "the removed registry was not freed");
        agentao_agent_free(a);
        CHECK(atomic_load(&bad.freed) == 1 && atomic_load(&empty.freed) == 1);
        CHECK(atomic_load(&empty.lists) == 0);
    }

    tu_section("bad arguments");
    {
        const char *dir = tu_workspace();
        char *cfg = tu_config(dir, "{\"text\":\"a\"}", NULL);
        agentao_agent *a = tu_agent(cfg, NULL);
        free(cfg);
        reg_state s = {0};
        agentao_mcp_registry r = make_registry(&s);
        r.struct_size = 4;
        agentao_error *err = NULL;
        CHECK_STATUS(agentao_agent_set_mcp_registry(a, &r, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "struct_size is 4");
        agentao_error_free(err);
        /* A refused registry is released too: the library owns it from the call on. */
        CHECK(atomic_load(&s.freed) == 1);
        r.struct_size = sizeof r;
        CHECK_STATUS(agentao_agent_set_mcp_registry(NULL, &r, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
        CHECK_MSG(atomic_load(&s.freed) == 2, "userdata_free after a failed set: %d",
                  atomic_load(&s.freed));
        char *json = (char *)"untouched";
        CHECK_STATUS(agentao_agent_mcp_status(NULL, &json, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
        CHECK(json == NULL);
        CHECK_STATUS(agentao_agent_mcp_status(a, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
        agentao_agent_free(a);
    }

    tu_section("a server that fails to start is in the status, not an agent failure");
    {
        const char *dir = tu_workspace();
        char *extra = tu_printf(
            "\"mcp_servers\":{\"gone\":{\"command\":\"/nonexistent/mcp-server\"},"
            "\"ok\":{\"command\":\"%s\"}}", bin);
        char *cfg = tu_config(dir, "{\"text\":\"fine\"}", extra);
        free(extra);
        agentao_agent *a = tu_agent(cfg, NULL);
        free(cfg);
        CHECK(a != NULL);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "fine");
        agentao_string_free(text);
        char *st = status_of(a);
        CHECK_CONTAINS(st, "{\"name\":\"gone\",\"status\":\"error\"");
        /* "cannot start '/nonexistent/mcp-server'", or under valgrind (which starts, then
         * fails to exec) a broken pipe on `initialize`. */
        CHECK_NOT_CONTAINS(st, "\"name\":\"gone\",\"status\":\"error\",\"transport\":\"stdio\",\"protocol\":null,\"tools\":0,\"resources\":false,\"resources_enabled\":true,\"trusted\":false,\"error\":null");
        CHECK_CONTAINS(st, "{\"name\":\"ok\",\"status\":\"connected\"");
        free(st);
        agentao_agent_free(a);
    }
    tu_section("servers killed on free and mid-call raise no SIGPIPE in the host");
    {
        for (int i = 0; i < 5; i++) {
            const char *dir = tu_workspace();
            char *extra = tu_printf("\"mcp_servers\":{\"reg\":{\"command\":\"%s\"}}", bin);
            char *cfg = tu_config(
                dir,
                "{\"tool_calls\":[{\"id\":\"k\",\"name\":\"mcp_reg_crash\",\"arguments\":{}}]},"
                "{\"tool_calls\":[{\"id\":\"e\",\"name\":\"mcp_reg_echo\",\"arguments\":{\"text\":\"x\"}}]},"
                "{\"text\":\"done\"}",
                extra);
            free(extra);
            agentao_agent *a = tu_agent(cfg, NULL);
            free(cfg);
            char *text = NULL;
            CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
            agentao_string_free(text);
            agentao_agent_free(a);
        }
        tu_sleep_ms(500);
        CHECK_MSG(atomic_load(&sigpipes) == 0, "the host got %d SIGPIPE", atomic_load(&sigpipes));
    }
    tu_section("a host tool removed after a turn with MCP tools is released at once");
    {
        const char *dir = tu_workspace();
        char *extra = tu_printf("\"mcp_servers\":{\"reg\":{\"command\":\"%s\"}}", bin);
        char *cfg = tu_config(dir, "{\"text\":\"done\"}", extra);
        free(extra);
        agentao_agent *a = tu_agent(cfg, NULL);
        free(cfg);
        atomic_int freed = 0;
        agentao_tool_desc d;
        memset(&d, 0, sizeof d);
        d.struct_size = sizeof d;
        d.name = "lookup";
        d.description = "Looks a key up.";
        d.parameters_json = "{\"type\":\"object\",\"properties\":{}}";
        d.userdata = &freed;
        d.userdata_free = count_free;
        d.execute = never_called;
        CHECK_STATUS(agentao_agent_add_tool(a, &d, false, NULL), AGENTAO_STATUS_OK);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        agentao_string_free(text);
        bool removed = false;
        CHECK_STATUS(agentao_agent_remove_tool(a, "lookup", &removed, NULL), AGENTAO_STATUS_OK);
        CHECK(removed);
        CHECK_MSG(atomic_load(&freed) == 1, "userdata_free after remove: %d", atomic_load(&freed));
        agentao_agent_free(a);
        CHECK(atomic_load(&freed) == 1);
    }
    return tu_finish("test_mcp");
}
