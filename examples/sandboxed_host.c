/*
 * sandboxed_host.c: a host that extends the agent with its own tool and its own memory.
 *
 * Offline, on the scripted provider. The host registers `lookup_ticket`, a read-only tool it
 * answers from a worker thread (as a host answering from its own event loop would), shows its
 * permission policy with the preflight before the turn, and keeps the agent's memories in its
 * own store. The "model" looks a ticket up, saves what it learned, and answers.
 *
 * Build: cc -std=c11 -Iinclude examples/sandboxed_host.c -Ltarget/release -lagentao -lpthread
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentao.h"

static const char *SCRIPT =
    "{\"responses\": ["
    " {\"tool_calls\": [{\"id\": \"call_1\", \"name\": \"lookup_ticket\", \"arguments\": {\"id\": \"T-42\"}}]},"
    " {\"tool_calls\": [{\"id\": \"call_2\", \"name\": \"save_memory\","
    "   \"arguments\": {\"key\": \"ticket T-42 owner\", \"value\": \"T-42 (login fails on Safari) is owned by Dana\"}}]},"
    " {\"text\": \"T-42 is owned by Dana; I saved that for later.\"}"
    "]}";

/* ---- the host tool -------------------------------------------------------------------------- */

struct job {
    char args[256];
    const agentao_tool_call *call;
    agentao_reply *reply;
};

/* The host's own worker: streams progress, then answers. */
static void *work(void *arg) {
    struct job *j = arg;
    agentao_tool_call_output(j->call, "querying the ticket database...\n", NULL);
    if (agentao_cancel_token_is_cancelled(agentao_tool_call_cancel_token(j->call))) {
        agentao_reply_tool_error(j->reply, "Cancelled", "the turn was cancelled", NULL);
    } else if (strstr(j->args, "\"T-42\"")) {
        agentao_reply_tool_result(j->reply, "T-42: login fails on Safari; owner Dana; status open", NULL);
    } else {
        agentao_reply_tool_error(j->reply, "KeyError", "no such ticket", NULL);
    }
    free(j);
    return NULL;
}

static void lookup_ticket(void *userdata, const char *args_json, const agentao_tool_call *call, agentao_reply *reply) {
    (void)userdata;
    printf("[tool] lookup_ticket %s (call %s)\n", args_json, agentao_tool_call_id(call));
    struct job *j = calloc(1, sizeof *j);
    snprintf(j->args, sizeof j->args, "%s", args_json);
    j->call = call;
    j->reply = reply;
    pthread_t t;
    pthread_create(&t, NULL, work, j);
    pthread_detach(t);
}

static void on_emit(void *userdata, const char *event_json) {
    (void)userdata;
    const char *chunk = strstr(event_json, "\"chunk\":\"");
    if (strstr(event_json, "\"type\":\"tool_output\"") && chunk)
        printf("[output] %.*s\n", (int)strcspn(chunk + 9, "\\\""), chunk + 9);
}

/* ---- the host memory store: records kept as JSON strings ------------------------------------ */

struct store {
    char *records[16];
    int n;
};

static void store_upsert(void *userdata, const char *record_json, agentao_memory_answer *answer) {
    struct store *s = userdata;
    if (s->n == 16) {
        agentao_memory_answer_fail(answer, "the store is full", NULL);
        return;
    }
    s->records[s->n++] = strdup(record_json);
    printf("[memory] stored %s\n", record_json);
}

static void store_list(void *userdata, const char *scope, agentao_memory_answer *answer) {
    (void)scope;
    struct store *s = userdata;
    size_t len = 3;
    for (int i = 0; i < s->n; i++) len += strlen(s->records[i]) + 1;
    char *out = malloc(len);
    strcpy(out, "[");
    for (int i = 0; i < s->n; i++) {
        if (i) strcat(out, ",");
        strcat(out, s->records[i]);
    }
    strcat(out, "]");
    agentao_memory_answer_json(answer, out, NULL);
    free(out);
}

static void store_free(void *userdata) {
    struct store *s = userdata;
    for (int i = 0; i < s->n; i++) free(s->records[i]);
    printf("[memory] store released with %d record(s)\n", s->n);
}

int main(void) {
    char dir[] = "/tmp/agentao-sandboxed-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char config[2048];
    snprintf(config, sizeof config,
             "{\"working_directory\": \"%s\", \"permissions\": {\"mode\": \"workspace-write\"},"
             " \"llm\": {\"provider\": \"scripted\", \"script\": %s}}",
             dir, SCRIPT);
    agentao_transport transport = {.struct_size = sizeof transport, .emit = on_emit};
    agentao_agent *agent = NULL;
    agentao_error *err = NULL;
    if (agentao_agent_new(config, &transport, &agent, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "agentao_agent_new: %s\n", agentao_error_message(err));
        agentao_error_free(err);
        return 1;
    }

    agentao_tool_desc tool = {
        .struct_size = sizeof tool,
        .name = "lookup_ticket",
        .description = "Look a support ticket up by id in the host's ticket database.",
        .parameters_json = "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"}},\"required\":[\"id\"]}",
        .is_read_only = true,
        .execute = lookup_ticket,
    };
    if (agentao_agent_add_tool(agent, &tool, false, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "add_tool: %s\n", agentao_error_message(err));
        agentao_error_free(err);
        return 1;
    }
    static struct store store;
    agentao_memory_store vtable = {
        .struct_size = sizeof vtable,
        .userdata = &store,
        .userdata_free = store_free,
        .upsert = store_upsert,
        .list = store_list,
    };
    if (agentao_agent_set_memory_store(agent, &vtable, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "set_memory_store: %s\n", agentao_error_message(err));
        agentao_error_free(err);
        return 1;
    }

    /* The policy, before anything runs. */
    const char *probes[][2] = {
        {"lookup_ticket", "{\"id\":\"T-1\"}"},
        {"write_file", "{\"file_path\":\"notes.txt\",\"content\":\"x\"}"},
        {"run_shell_command", "{\"command\":\"rm -rf /\"}"},
    };
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
        char *json = NULL;
        if (agentao_agent_preflight(agent, probes[i][0], probes[i][1], &json, NULL) == AGENTAO_STATUS_OK)
            printf("[policy] %s: %s\n", probes[i][0], json);
        agentao_string_free(json);
    }

    char *text = NULL;
    agentao_status st = agentao_agent_chat(agent, "Who owns ticket T-42?", -1, NULL, &text, &err);
    printf("[answer] %s: %s\n", agentao_status_name(st), text ? text : agentao_error_message(err));
    agentao_string_free(text);
    agentao_error_free(err);
    agentao_agent_free(agent);
    rmdir(dir);
    return st == AGENTAO_STATUS_OK ? 0 : 1;
}
