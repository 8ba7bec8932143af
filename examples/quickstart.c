/*
 * quickstart.c: the libagentao demo.
 *
 * Runs one agent turn. Offline by default, on the scripted provider: the "model" reads a
 * file, asks to write another (the host approves), and answers. With OPENAI_API_KEY set (and
 * optionally OPENAI_BASE_URL, OPENAI_MODEL) the same program talks to a real endpoint, on Chat
 * Completions, or on the Responses API with AGENTAO_WIRE=openai-responses; with
 * ANTHROPIC_API_KEY set (and optionally ANTHROPIC_BASE_URL, ANTHROPIC_MODEL), to Anthropic.
 *
 * Build and run: scripts/demo.sh
 */
#define _DEFAULT_SOURCE /* mkdtemp, usleep */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentao.h"

/* The offline model: one response per request. */
static const char *SCRIPT =
    "{\"responses\": ["
    " {\"text\": \"Let me look at the notes first.\", \"chunk_size\": 8,"
    "  \"tool_calls\": [{\"id\": \"call_1\", \"name\": \"read_file\", \"arguments\": {\"file_path\": \"notes.txt\"}}]},"
    " {\"tool_calls\": [{\"id\": \"call_2\", \"name\": \"write_file\","
    "   \"arguments\": {\"file_path\": \"summary.txt\", \"content\": \"The build uses make.\\n\"}}]},"
    " {\"text\": \"I read notes.txt and wrote a one-line summary to summary.txt.\", \"chunk_size\": 6}"
    "]}";

/* emit: every internal event, as JSON. We print just the type. */
static void on_emit(void *userdata, const char *event_json) {
    (void)userdata;
    const char *t = strstr(event_json, "\"type\":\"");
    if (t && strncmp(t + 8, "llm_text", 8) != 0) {
        const char *end = strchr(t + 8, '"');
        printf("\n  [event] %.*s", (int)(end - (t + 8)), t + 8);
        fflush(stdout);
    }
}

/* confirm_tool: a risky tool wants to run. A real host would ask a person. */
static void on_confirm(void *userdata, const char *tool, const char *description, const char *args_json,
                       const char *call_id, agentao_reply *reply) {
    (void)userdata; (void)description; (void)call_id;
    printf("\n  [approve] %s %s -> yes", tool, args_json);
    agentao_reply_confirm(reply, AGENTAO_CONFIRMATION_ALLOW, NULL);
}

static void on_delta(void *userdata, const char *delta_json) {
    (void)userdata;
    /* {"type":"text_delta","text":"..."}: print the raw JSON text field. */
    const char *t = strstr(delta_json, "\"text\":\"");
    if (t) {
        printf("\n  [text] %.*s", (int)(strlen(t + 8) - 2), t + 8);
        fflush(stdout);
    }
}

static void on_done(void *userdata, agentao_status status, const char *outcome_json, const agentao_error *err) {
    printf("\n\n[outcome] status=%s %s%s\n", agentao_status_name(status), outcome_json ? outcome_json : "",
           err ? agentao_error_message(err) : "");
    atomic_store((atomic_int *)userdata, 1);
}

static int subscribe_unused(void *userdata, agentao_listener_fn listener, void *listener_userdata, uint64_t *id_out) {
    (void)userdata; (void)listener; (void)listener_userdata;
    *id_out = 1;
    return AGENTAO_STATUS_OK;
}

/* The agent's working directory, made for this run. */
static char dir[] = "/tmp/agentao-demo-XXXXXX";

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st; (void)type; (void)ftw;
    remove(path);
    return 0;
}

/* Leaves nothing behind in /tmp (a real model may write more files than the script does). */
static void remove_workspace(void) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

int main(void) {
    if (!mkdtemp(dir)) return 1;
    atexit(remove_workspace);
    printf("working directory: %s (removed at exit)\n", dir);
    char path[512];
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    FILE *f = fopen(path, "w");
    fputs("Project notes\nThe build uses make.\n", f);
    fclose(f);

    char config[4096];
    const char *key = getenv("OPENAI_API_KEY");
    const char *anthropic = getenv("ANTHROPIC_API_KEY");
    const char *wire = getenv("AGENTAO_WIRE");
    if (anthropic && *anthropic && !(key && *key)) {
        /* The library reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL itself. */
        const char *model = getenv("ANTHROPIC_MODEL");
        if (!model || !*model) model = "claude-sonnet-4-5";
        snprintf(config, sizeof config,
                 "{\"working_directory\": \"%s\", \"llm\": {\"provider\": \"anthropic\", \"model\": \"%s\"}}",
                 dir, model);
        printf("libagentao %s, model %s (anthropic)\n", agentao_version(), model);
    } else if (key && *key) {
        const char *base = getenv("OPENAI_BASE_URL");
        const char *model = getenv("OPENAI_MODEL");
        snprintf(config, sizeof config,
                 "{\"working_directory\": \"%s\", \"llm\": {\"provider\": \"%s\", \"base_url\": \"%s\", \"model\": \"%s\"}}",
                 dir, wire && *wire ? wire : "openai", base && *base ? base : "https://api.openai.com/v1",
                 model && *model ? model : "gpt-4o-mini");
        printf("libagentao %s, model %s\n", agentao_version(), model && *model ? model : "gpt-4o-mini");
    } else {
        snprintf(config, sizeof config,
                 "{\"working_directory\": \"%s\", \"llm\": {\"provider\": \"scripted\", \"script\": %s}}", dir, SCRIPT);
        printf("libagentao %s, offline (scripted provider)\n", agentao_version());
    }

    agentao_transport transport = {0};
    transport.struct_size = sizeof transport;
    transport.emit = on_emit;
    transport.confirm_tool = on_confirm;
    transport.subscribe = subscribe_unused;

    agentao_agent *agent = NULL;
    agentao_error *err = NULL;
    if (agentao_agent_new(config, &transport, &agent, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "agentao_agent_new: %s\n", agentao_error_message(err));
        agentao_error_free(err);
        return 1;
    }

    atomic_int done = 0;
    printf("> Summarise notes.txt into summary.txt.\n");
    if (agentao_agent_stream(agent, "Summarise notes.txt into summary.txt.", -1, NULL, on_delta, on_done,
                             (void *)&done, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "agentao_agent_stream: %s\n", agentao_error_message(err));
        agentao_error_free(err);
        agentao_agent_free(agent);
        return 1;
    }
    while (!atomic_load(&done)) usleep(1000);

    snprintf(path, sizeof path, "%s/summary.txt", dir);
    f = fopen(path, "r");
    char line[256] = "";
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    printf("[file] summary.txt: %s", line[0] ? line : "(not written)\n");
    agentao_agent_free(agent);
    return 0;
}
