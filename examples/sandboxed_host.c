/*
 * sandboxed_host.c: a host that keeps the agent in a sandbox of its own making.
 *
 * Offline, on the scripted provider. The host registers `lookup_ticket`, a read-only tool it
 * answers from a worker thread (as a host answering from its own event loop would), shows its
 * permission policy with the preflight before the turn, keeps the agent's memories in its own
 * store, serves the workspace's files from memory (nothing the agent writes reaches the disk)
 * and routes shell commands to an audited executor that records them and answers with canned
 * output instead of running /bin/sh. The "model" looks a ticket up, saves what it learned,
 * writes and reads back a note, runs `git status` (the permission decision first asks the same
 * executor where the repository lies: `git rev-parse`), tries `rm -rf /` (refused by the library
 * before the executor sees it), and answers.
 *
 * Build: cc -std=c11 -Iinclude examples/sandboxed_host.c -Ltarget/release -lagentao -lpthread
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <errno.h>
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
    " {\"tool_calls\": [{\"id\": \"call_3\", \"name\": \"write_file\","
    "   \"arguments\": {\"file_path\": \"notes/T-42.md\", \"content\": \"owner: Dana\\n\"}}]},"
    " {\"tool_calls\": [{\"id\": \"call_4\", \"name\": \"read_file\", \"arguments\": {\"file_path\": \"notes/T-42.md\"}}]},"
    " {\"tool_calls\": [{\"id\": \"call_5\", \"name\": \"run_shell_command\", \"arguments\": {\"command\": \"git status\"}}]},"
    " {\"tool_calls\": [{\"id\": \"call_6\", \"name\": \"run_shell_command\", \"arguments\": {\"command\": \"rm -rf /\"}}]},"
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

/* ---- the host file system: the workspace's files live in memory ---------------------------- */

struct vfs {
    pthread_mutex_t mu; /* read-only tools of one batch may call in parallel */
    char *paths[16];    /* absolute paths */
    char *data[16];
    size_t len[16];
    int n;
};

static int vfs_find(struct vfs *v, const char *path) {
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->paths[i], path) == 0) return i;
    return -1;
}

/* read_file asks twice: the first bytes (to sniff binary content), then the whole file. */
static int32_t vfs_read(void *userdata, const char *path, uint64_t max_bytes, agentao_fs_out *out) {
    struct vfs *v = userdata;
    pthread_mutex_lock(&v->mu);
    int i = vfs_find(v, path);
    if (i >= 0) {
        size_t len = v->len[i] < max_bytes ? v->len[i] : (size_t)max_bytes;
        agentao_fs_out_set_data(out, (const uint8_t *)v->data[i], len, NULL);
        printf("[fs] read %s from memory: %.*s", strrchr(path, '/') + 1, (int)len, v->data[i]);
    }
    pthread_mutex_unlock(&v->mu);
    return i >= 0 ? 0 : ENOENT;
}

static int32_t vfs_write(void *userdata, const char *path, const uint8_t *data, size_t len, bool append) {
    struct vfs *v = userdata;
    pthread_mutex_lock(&v->mu);
    int i = vfs_find(v, path);
    if (i < 0 && v->n == 16) {
        pthread_mutex_unlock(&v->mu);
        return ENOSPC;
    }
    if (i < 0) {
        i = v->n++;
        v->paths[i] = strdup(path);
        v->data[i] = NULL;
        v->len[i] = 0;
    }
    size_t keep = append ? v->len[i] : 0;
    char *buf = malloc(keep + len + 1);
    if (keep) memcpy(buf, v->data[i], keep);
    if (len) memcpy(buf + keep, data, len);
    free(v->data[i]);
    v->data[i] = buf;
    v->len[i] = keep + len;
    pthread_mutex_unlock(&v->mu);
    printf("[fs] wrote %zu byte(s) to %s in memory\n", len, strrchr(path, '/') + 1);
    return 0;
}

/* A directory exists when some file lies under it; the workspace root always does. */
static int32_t vfs_stat(void *userdata, const char *path, agentao_fs_out *out) {
    struct vfs *v = userdata;
    size_t n = strlen(path);
    int32_t rc = ENOENT;
    pthread_mutex_lock(&v->mu);
    for (int i = 0; i < v->n && rc; i++) {
        if (strcmp(v->paths[i], path) == 0) {
            agentao_fs_out_set_stat(out, v->len[i], 0.0, AGENTAO_FS_KIND_FILE, NULL);
            rc = 0;
        } else if (strncmp(v->paths[i], path, n) == 0 && v->paths[i][n] == '/') {
            agentao_fs_out_set_stat(out, 0, 0.0, AGENTAO_FS_KIND_DIR, NULL);
            rc = 0;
        }
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

static void vfs_free(void *userdata) {
    struct vfs *v = userdata;
    for (int i = 0; i < v->n; i++) {
        free(v->paths[i]);
        free(v->data[i]);
    }
    printf("[fs] released with %d file(s)\n", v->n);
}

/* ---- the audited shell: records every command, runs none ------------------------------------ */

struct audit {
    pthread_mutex_t mu;
    char *commands[16];
    int n;
};

static void shell_run(void *userdata, const agentao_shell_request *request, agentao_shell_run *run) {
    struct audit *a = userdata;
    pthread_mutex_lock(&a->mu);
    if (a->n < 16) a->commands[a->n++] = strdup(request->command);
    pthread_mutex_unlock(&a->mu);
    printf("[audit] %s (in %s)\n", request->command, request->cwd);
    static const char canned[] = "On branch main\nnothing to commit, working tree clean\n";
    agentao_shell_run_output(run, AGENTAO_SHELL_STREAM_STDOUT, (const uint8_t *)canned, sizeof canned - 1, NULL);
    agentao_shell_run_finish(run, 0, false, false, NULL);
}

static void shell_free(void *userdata) {
    struct audit *a = userdata;
    printf("[audit] executor released; commands run: %d\n", a->n);
    for (int i = 0; i < a->n; i++) free(a->commands[i]);
}

static void on_event(void *userdata, const char *event_json) {
    on_emit(userdata, event_json);
    /* How `rm -rf /` ended: the executor never saw it (no [audit] line for it). */
    if (strstr(event_json, "\"type\":\"tool_complete\"") && strstr(event_json, "\"call_id\":\"call_6\""))
        printf("[refused] %s\n", event_json);
}

int main(void) {
    char dir[] = "/tmp/agentao-sandboxed-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char config[2048];
    snprintf(config, sizeof config,
             "{\"working_directory\": \"%s\", \"permissions\": {\"mode\": \"workspace-write\"},"
             " \"llm\": {\"provider\": \"scripted\", \"script\": %s}}",
             dir, SCRIPT);
    agentao_transport transport = {.struct_size = sizeof transport, .emit = on_event};
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

    static struct vfs vfs = {.mu = PTHREAD_MUTEX_INITIALIZER};
    agentao_file_system fs = {
        .struct_size = sizeof fs,
        .userdata = &vfs,
        .userdata_free = vfs_free,
        .read = vfs_read,
        .write = vfs_write,
        /* NULL slots use the local disk; this turn lists no directory. */
        .stat = vfs_stat,
    };
    if (agentao_agent_set_file_system(agent, &fs, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "set_file_system: %s\n", agentao_error_message(err));
        agentao_error_free(err);
        return 1;
    }
    static struct audit audit = {.mu = PTHREAD_MUTEX_INITIALIZER};
    agentao_shell_executor shell = {
        .struct_size = sizeof shell,
        .userdata = &audit,
        .userdata_free = shell_free,
        .dialect = AGENTAO_SHELL_DIALECT_POSIX,
        .run = shell_run,
    };
    if (agentao_agent_set_shell_executor(agent, &shell, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "set_shell_executor: %s\n", agentao_error_message(err));
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
    char note[sizeof dir + 16];
    snprintf(note, sizeof note, "%s/notes", dir);
    bool leaked = access(note, F_OK) == 0;
    printf("[disk] workspace/notes %s\n", leaked ? "EXISTS on disk" : "never reached the disk");
    rmdir(dir);
    return st == AGENTAO_STATUS_OK && !leaked ? 0 : 1;
}
