/* A small C program built against an installed libagentao (scripts/test.d/80-install.sh):
 * through pkg-config and through CMake's find_package, linked shared and static. It runs a
 * scripted (offline) turn with a tool call its transport approves, and prints what it saw. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <agentao.h>

static atomic_int events, confirms;

static void on_emit(void *ud, const char *event_json) {
    (void)ud;
    (void)event_json;
    atomic_fetch_add(&events, 1);
}

static void on_confirm(void *ud, const char *tool, const char *desc, const char *args,
                       const char *call_id, agentao_reply *reply) {
    (void)ud;
    (void)desc;
    (void)args;
    (void)call_id;
    printf("confirm: %s\n", tool);
    atomic_fetch_add(&confirms, 1);
    agentao_reply_confirm(reply, AGENTAO_CONFIRMATION_ALLOW, NULL);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    if (strcmp(agentao_version(), AGENTAO_VERSION) != 0) {
        fprintf(stderr, "header %s, library %s\n", AGENTAO_VERSION, agentao_version());
        return 1;
    }
    char config[1024];
    snprintf(config, sizeof config,
             "{\"working_directory\":\"%s\",\"llm\":{\"provider\":\"scripted\",\"script\":{\"responses\":["
             "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"list_directory\",\"arguments\":{\"directory_path\":\".\"}}]},"
             "{\"text\":\"installed and working\"}]}}}",
             dir);
    agentao_transport t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.emit = on_emit;
    t.confirm_tool = on_confirm;
    agentao_agent *agent = NULL;
    agentao_error *err = NULL;
    if (agentao_agent_new(config, &t, &agent, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "agent: %s\n", agentao_error_message(err));
        agentao_error_free(err);
        return 1;
    }
    char *text = NULL;
    agentao_status st = agentao_agent_chat(agent, "check", -1, NULL, &text, &err);
    if (st != AGENTAO_STATUS_OK) {
        fprintf(stderr, "turn: %s\n", agentao_error_message(err));
        agentao_error_free(err);
        agentao_agent_free(agent);
        return 1;
    }
    printf("version: %s\n", agentao_version());
    printf("answer: %s\n", text);
    printf("events: %s\n", atomic_load(&events) > 0 ? "yes" : "no");
    agentao_string_free(text);
    agentao_agent_free(agent);
    return 0;
}
