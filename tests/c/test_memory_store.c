/* The memory store through the C ABI (spec §5.4, §1.14, §8.2): `save_memory` writes through a
 * host vtable, and the next request to the model (recorded by the loopback mock) carries the
 * memory in its system prompt; a memory the stable block has no room for is recalled in the
 * request-only reminder when the user's message mentions it. Then the default in-memory store,
 * the tool's refusals, and bad input: each a clear status, no userdata taken, the turn intact. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

extern char **environ;

#ifndef MOCK_OPENAI_BIN
#error "MOCK_OPENAI_BIN must be defined by the build"
#endif

/* ---- a host store: records as JSON strings, replaced by (scope, key) ---------------------- */

#define MAX_RECORDS 64

typedef struct host_store {
    pthread_mutex_t mu;
    char *records[MAX_RECORDS];
    int n;
    atomic_int upserts, lists, freed;
    bool fail_upsert;  /* answer every upsert with a failure */
    bool full_upsert;  /* answer every upsert with "the store is full" */
    bool bad_list;     /* answer list with text that is not JSON */
    bool twice;        /* answer list twice */
    atomic_int second_status;
} host_store;

static bool same_record(const char *a, const char *b) {
    char *ka = tu_json_str(a, "key_normalized"), *kb = tu_json_str(b, "key_normalized");
    char *sa = tu_json_str(a, "scope"), *sb = tu_json_str(b, "scope");
    bool same = ka && kb && sa && sb && !strcmp(ka, kb) && !strcmp(sa, sb);
    free(ka), free(kb), free(sa), free(sb);
    return same;
}

static void store_upsert(void *ud, const char *record_json, agentao_memory_answer *answer) {
    host_store *s = ud;
    atomic_fetch_add(&s->upserts, 1);
    if (s->fail_upsert) {
        CHECK_STATUS(agentao_memory_answer_fail(answer, "disk full", NULL), AGENTAO_STATUS_OK);
        return;
    }
    if (s->full_upsert) {
        CHECK_STATUS(agentao_memory_answer_full(answer, "quota of 64 reached", NULL), AGENTAO_STATUS_OK);
        CHECK_STATUS(agentao_memory_answer_full(answer, NULL, NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
        return;
    }
    pthread_mutex_lock(&s->mu);
    int i = 0;
    while (i < s->n && !same_record(s->records[i], record_json)) i++;
    if (i < s->n) free(s->records[i]);
    else if (s->n < MAX_RECORDS) s->n++;
    s->records[i] = strdup(record_json);
    pthread_mutex_unlock(&s->mu);
}

static void store_list(void *ud, const char *scope, agentao_memory_answer *answer) {
    host_store *s = ud;
    atomic_fetch_add(&s->lists, 1);
    if (s->bad_list) {
        CHECK_STATUS(agentao_memory_answer_json(answer, "[{not json", NULL), AGENTAO_STATUS_INVALID_JSON);
        return;
    }
    pthread_mutex_lock(&s->mu);
    size_t len = 3;
    for (int i = 0; i < s->n; i++) len += strlen(s->records[i]) + 1;
    char *out = malloc(len);
    strcpy(out, "[");
    for (int i = 0, first = 1; i < s->n; i++) {
        char *sc = tu_json_str(s->records[i], "scope");
        if (!scope || (sc && !strcmp(sc, scope))) {
            if (!first) strcat(out, ",");
            strcat(out, s->records[i]);
            first = 0;
        }
        free(sc);
    }
    strcat(out, "]");
    pthread_mutex_unlock(&s->mu);
    CHECK_STATUS(agentao_memory_answer_json(answer, out, NULL), AGENTAO_STATUS_OK);
    if (s->twice) atomic_store(&s->second_status, agentao_memory_answer_json(answer, "[]", NULL));
    free(out);
}

static void store_free(void *ud) { atomic_fetch_add(&((host_store *)ud)->freed, 1); }

static void store_init(host_store *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    atomic_store(&s->second_status, -1);
}

static void store_destroy(host_store *s) {
    for (int i = 0; i < s->n; i++) free(s->records[i]);
    pthread_mutex_destroy(&s->mu);
}

static agentao_memory_store vtable(host_store *s) {
    agentao_memory_store v;
    memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    v.userdata = s;
    v.userdata_free = store_free;
    v.upsert = store_upsert;
    v.list = store_list;
    return v;
}

/* A stored record written by the test itself (older than anything the agent saves). */
static void preload(host_store *s, const char *key, const char *content, int second) {
    s->records[s->n++] = tu_printf(
        "{\"id\":\"0000%04d\",\"scope\":\"project\",\"type\":\"note\",\"key_normalized\":\"%s\","
        "\"title\":\"%s\",\"content\":\"%s\",\"tags\":[],\"keywords\":[],\"source\":\"explicit\","
        "\"confidence\":1.0,\"sensitivity\":\"normal\",\"created_at\":\"2020-01-01T00:00:%02dZ\","
        "\"updated_at\":\"2020-01-01T00:00:%02dZ\",\"deleted_at\":null}",
        second, key, key, content, second, second);
}

/* ---- the loopback mock, recording request bodies ----------------------------------------- */

struct mock {
    pid_t pid;
    int stdin_fd;
    int port;
    char *requests_path;
};

static bool start_mock(struct mock *m, const char *dir, const char *responses) {
    memset(m, 0, sizeof *m);
    m->stdin_fd = -1;
    char *script_path = tu_printf("%s/script.json", dir);
    char *port_path = tu_printf("%s/port", dir);
    m->requests_path = tu_printf("%s/requests.jsonl", dir);
    FILE *f = fopen(script_path, "w");
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "{\"responses\":[%s]}", responses);
        fclose(f);
    }
    int pipefd[2];
    bool ok = f && pipe2(pipefd, O_CLOEXEC) == 0;
    if (ok) {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pipefd[0], 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        char *argv[] = {(char *)MOCK_OPENAI_BIN, "--script", script_path, "--port-file", port_path,
                        "--requests-out", m->requests_path, NULL};
        int rc = posix_spawn(&m->pid, MOCK_OPENAI_BIN, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[0]);
        m->stdin_fd = pipefd[1];
        ok = rc == 0;
        CHECK_MSG(ok, "posix_spawn %s: %s", MOCK_OPENAI_BIN, strerror(rc));
    }
    for (uint64_t end = tu_now_ms() + 15000; ok && !m->port && tu_now_ms() < end; tu_sleep_ms(10)) {
        char *port = tu_read_file(port_path);
        if (port && atoi(port) > 0) m->port = atoi(port);
        free(port);
    }
    CHECK_MSG(!ok || m->port, "mock-openai did not write its port file");
    free(script_path);
    free(port_path);
    return ok && m->port;
}

/* Stops the mock (it writes the request bodies as it exits); returns them (malloc'd). */
static char *stop_mock(struct mock *m) {
    if (m->stdin_fd >= 0) close(m->stdin_fd);
    if (m->pid > 0) {
        int status = 0;
        uint64_t end = tu_now_ms() + 5000;
        while (waitpid(m->pid, &status, WNOHANG) == 0) {
            if (tu_now_ms() > end) {
                kill(m->pid, SIGKILL);
                waitpid(m->pid, &status, 0);
                break;
            }
            tu_sleep_ms(10);
        }
    }
    char *requests = tu_read_file(m->requests_path);
    free(m->requests_path);
    return requests;
}

/* The n-th line (0-based) of `text`, malloc'd, or NULL. */
static char *nth_line(const char *text, int n) {
    for (; text && n > 0; n--) {
        text = strchr(text, '\n');
        if (text) text++;
    }
    if (!text || !*text) return NULL;
    const char *end = strchr(text, '\n');
    return strndup(text, end ? (size_t)(end - text) : strlen(text));
}

/* The system message of a recorded request body, malloc'd (the text up to the next role). */
static char *system_part(const char *body) {
    const char *start = body ? strstr(body, "\"role\":\"system\"") : NULL;
    if (!start) return NULL;
    const char *end = strstr(start + 1, "\"role\":");
    return strndup(start, end ? (size_t)(end - start) : strlen(start));
}

static void test_store_and_prompt(void) {
    tu_section("save_memory through a host store; the next request carries it");
    const char *dir = tu_workspace();
    host_store s;
    store_init(&s);
    /* Old memories that fill the stable block, and an older one only the recall can show. */
    char filler[281];
    memset(filler, 'f', sizeof filler - 1);
    filler[sizeof filler - 1] = 0;
    preload(&s, "zebra_habitat", "Zebras in this project live in the savanna module", 1);
    for (int i = 0; i < 8; i++) {
        char key[32];
        snprintf(key, sizeof key, "filler_%d", i);
        preload(&s, key, filler, 10 + i);
    }
    const char *responses =
        "{\"tool_calls\":[{\"id\":\"m1\",\"name\":\"save_memory\",\"arguments\":{\"key\":\"Preferred Language\","
        "\"value\":\"  The user prefers Rust for new services  \",\"tags\":[\"preference\"]}}]},"
        "{\"text\":\"saved\"},"
        "{\"text\":\"answered\"}";
    struct mock m;
    if (!start_mock(&m, dir, responses)) {
        free(stop_mock(&m));
        store_destroy(&s);
        return;
    }
    char *cfg = tu_printf("{\"working_directory\":\"%s\",\"llm\":{\"provider\":\"openai\","
                          "\"base_url\":\"http://127.0.0.1:%d/v1\",\"api_key\":\"test\",\"model\":\"m\"}}",
                          dir, m.port);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (a) {
        agentao_memory_store v = vtable(&s);
        CHECK_STATUS(agentao_agent_set_memory_store(a, &v, NULL), AGENTAO_STATUS_OK);
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "remember that I like Rust", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "saved");
        agentao_string_free(text);
        CHECK(atomic_load(&s.upserts) == 1);
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "Saved memory: preferred_language");
        free(hist);
        pthread_mutex_lock(&s.mu);
        char *saved = s.records[s.n - 1];
        CHECK_CONTAINS(saved, TU_KV("key_normalized", "preferred_language"));
        CHECK_CONTAINS(saved, TU_KV("scope", "user"));
        CHECK_CONTAINS(saved, TU_KV("content", "The user prefers Rust for new services"));
        CHECK_CONTAINS(saved, TU_KV("source", "explicit"));
        pthread_mutex_unlock(&s.mu);
        CHECK_STATUS(agentao_agent_chat(a, "where do the zebras live?", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "answered");
        agentao_string_free(text);
        agentao_agent_free(a);
    }
    char *requests = stop_mock(&m);
    char *first = nth_line(requests, 0), *third = nth_line(requests, 2);
    CHECK_MSG(third != NULL, "the mock recorded fewer than 3 requests");
    char *sys1 = system_part(first), *sys3 = system_part(third);
    CHECK_NOT_CONTAINS(sys1, "preferred_language");
    CHECK_CONTAINS(sys3, "<saved-memories>");
    CHECK_CONTAINS(sys3, "- [user] preferred_language: The user prefers Rust for new services");
    CHECK_CONTAINS(sys3, "filler_7");
    CHECK_NOT_CONTAINS(sys3, "zebra_habitat");
    /* The stable block stays within 2,000 characters. */
    const char *open = sys3 ? strstr(sys3, "<saved-memories>") : NULL;
    const char *close = sys3 ? strstr(sys3, "</saved-memories>") : NULL;
    CHECK(open && close && close - open + strlen("</saved-memories>") <= 2000);
    /* The recall: after the history, request-only, naming the memory the block left out. */
    CHECK_CONTAINS(third, "Relevant saved memories:\\n- [project] zebra_habitat: Zebras in this project live in the savanna module");
    const char *recall = third ? strstr(third, "Relevant saved memories") : NULL;
    const char *question = third ? strstr(third, "where do the zebras live?") : NULL;
    CHECK(recall && question && recall > question);
    free(sys1), free(sys3), free(first), free(third), free(requests);
    CHECK(atomic_load(&s.freed) == 1);
    store_destroy(&s);
}

static void test_default_store_and_refusals(void) {
    tu_section("the default store, secrets refused, a failing store, a full store");
    const char *responses =
        "{\"tool_calls\":[{\"id\":\"a\",\"name\":\"save_memory\",\"arguments\":{\"key\":\"user_editor\",\"value\":\"vim\"}}]},{\"text\":\"one\"},"
        "{\"tool_calls\":[{\"id\":\"b\",\"name\":\"save_memory\",\"arguments\":{\"key\":\"deploy\",\"value\":\"token = ghp_abcdefghijklmnopqrstuvwxyz0123456789AB\"}}]},{\"text\":\"two\"},"
        "{\"tool_calls\":[{\"id\":\"c\",\"name\":\"save_memory\",\"arguments\":{\"key\":\"k\",\"value\":\"   \"}}]},{\"text\":\"three\"},"
        "{\"tool_calls\":[{\"id\":\"d\",\"name\":\"save_memory\",\"arguments\":{\"key\":\"k2\",\"value\":\"v\"}}]},{\"text\":\"four\"},"
        "{\"tool_calls\":[{\"id\":\"e\",\"name\":\"save_memory\",\"arguments\":{\"key\":\"k3\",\"value\":\"v\"}}]},{\"text\":\"five\"}";
    char *cfg = tu_config(tu_workspace(), responses, NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "1", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    agentao_string_free(text);
    CHECK_STATUS(agentao_agent_chat(a, "2", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    agentao_string_free(text);
    CHECK_STATUS(agentao_agent_chat(a, "3", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    agentao_string_free(text);
    host_store s;
    store_init(&s);
    s.fail_upsert = true;
    agentao_memory_store v = vtable(&s);
    CHECK_STATUS(agentao_agent_set_memory_store(a, &v, NULL), AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_agent_chat(a, "4", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "four");
    agentao_string_free(text);
    char *hist = tu_history(a);
    CHECK_CONTAINS(hist, "Saved memory: user_editor");
    CHECK_CONTAINS(hist, "Refused to save: content appears to contain sensitive credentials");
    CHECK_CONTAINS(hist, "Error saving memory: Memory content is empty");
    CHECK_CONTAINS(hist, "Error saving memory: the memory store failed `upsert`: disk full");
    free(hist);
    /* A store that says it is full: the model is told so, in those words. */
    s.fail_upsert = false;
    s.full_upsert = true;
    CHECK_STATUS(agentao_agent_chat(a, "5", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "five");
    agentao_string_free(text);
    hist = tu_history(a);
    CHECK_CONTAINS(hist, "Error saving memory: the memory store is full: quota of 64 reached");
    free(hist);
    /* Back to a fresh default store: the host's is released. */
    CHECK_STATUS(agentao_agent_set_memory_store(a, NULL, NULL), AGENTAO_STATUS_OK);
    CHECK(atomic_load(&s.freed) == 1);
    agentao_agent_free(a);
    CHECK(atomic_load(&s.freed) == 1);
    store_destroy(&s);
}

static void test_bad_input(void) {
    tu_section("bad vtables and answers");
    char *cfg = tu_config(tu_workspace(), "{\"text\":\"fine\"},{\"text\":\"still fine\"}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    host_store s;
    store_init(&s);
    agentao_error *err = NULL;
    agentao_memory_store v = vtable(&s);
    CHECK_STATUS(agentao_agent_set_memory_store(NULL, &v, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    v.struct_size = 4;
    CHECK_STATUS(agentao_agent_set_memory_store(a, &v, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "struct_size");
    agentao_error_free(err);
    err = NULL;
    v = vtable(&s);
    v.list = NULL;
    CHECK_STATUS(agentao_agent_set_memory_store(a, &v, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "`list`");
    agentao_error_free(err);
    err = NULL;
    /* Each refusal released the userdata once (NULL agent, struct_size, `list`). */
    CHECK_MSG(atomic_load(&s.freed) == 3, "a refused store's userdata_free ran %d times",
              atomic_load(&s.freed));
    /* A store that answers with bad JSON, then twice: the turn goes on without memories. */
    v = vtable(&s);
    s.bad_list = true;
    CHECK_STATUS(agentao_agent_set_memory_store(a, &v, NULL), AGENTAO_STATUS_OK);
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "hello", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "fine");
    agentao_string_free(text);
    CHECK(atomic_load(&s.lists) >= 1);
    s.bad_list = false;
    s.twice = true;
    CHECK_STATUS(agentao_agent_chat(a, "hello", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "still fine");
    agentao_string_free(text);
    CHECK_STATUS(atomic_load(&s.second_status), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(agentao_memory_answer_json(NULL, "[]", NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_memory_answer_fail(NULL, "x", NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    agentao_agent_free(a);
    CHECK(atomic_load(&s.freed) == 4);
    store_destroy(&s);
}

static void test_sqlite_by_config(void) {
    tu_section("the SQLite store (config memory.sqlite_path): a real file, seen by the next agent");
    const char *dir = tu_workspace();
    const char *mem = "\"memory\":{\"sqlite_path\":\".agentao/memory.db\"}";
    char *cfg = tu_config(dir,
                          "{\"tool_calls\":[{\"id\":\"s1\",\"name\":\"save_memory\",\"arguments\":{\"key\":\"build tool\",\"value\":\"This project builds with cargo and cmake\"}}]},{\"text\":\"saved\"}",
                          mem);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (a) {
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "remember the build tool", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        agentao_string_free(text);
        char *hist = tu_history(a);
        CHECK_CONTAINS(hist, "Saved memory: build_tool");
        free(hist);
        agentao_agent_free(a);
    }
    char *db = tu_printf("%s/.agentao/memory.db", dir);
    char *bytes = tu_read_file(db);
    CHECK_MSG(bytes && !strncmp(bytes, "SQLite format 3", 15), "%s is not a SQLite database", db);
    free(bytes);
    free(db);
    struct mock m;
    if (start_mock(&m, dir, "{\"text\":\"ok\"}")) {
        cfg = tu_printf("{\"working_directory\":\"%s\",%s,\"llm\":{\"provider\":\"openai\","
                        "\"base_url\":\"http://127.0.0.1:%d/v1\",\"api_key\":\"test\",\"model\":\"m\"}}",
                        dir, mem, m.port);
        a = tu_agent(cfg, NULL);
        free(cfg);
        if (a) {
            char *text = NULL;
            CHECK_STATUS(agentao_agent_chat(a, "hello", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
            agentao_string_free(text);
            agentao_agent_free(a);
        }
    }
    char *requests = stop_mock(&m);
    char *sys = system_part(requests);
    CHECK_CONTAINS(sys, "- [project] build_tool: This project builds with cargo and cmake");
    free(sys);
    free(requests);
    /* Bad memory config: a clear INVALID_CONFIG naming the field. */
    const char *bad[] = {"\"memory\":[]", "\"memory\":{\"sqlite_path\":\"\"}", "\"memory\":{\"path\":\"x\"}",
                         "\"memory\":{\"sqlite_path\":\"/proc/nope/memory.db\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cfg = tu_config(dir, "{\"text\":\"x\"}", bad[i]);
        agentao_agent *b = NULL;
        agentao_error *err = NULL;
        CHECK_STATUS(agentao_agent_new(cfg, NULL, &b, &err), AGENTAO_STATUS_INVALID_CONFIG);
        CHECK(b == NULL);
        CHECK_CONTAINS(agentao_error_message(err), "config field `memory");
        agentao_error_free(err);
        free(cfg);
    }
}

/* A store finalizer that calls back into the agent: no library lock may be held across it. */
static agentao_agent *reentry_agent;
static atomic_int reentry_status = -1;
static void free_and_reenter(void *ud) {
    store_free(ud);
    atomic_store(&reentry_status, agentao_agent_remove_tool(reentry_agent, "nothing_here", NULL, NULL));
}

static void test_finalizer_reenters(void) {
    tu_section("a store's userdata_free may call the agent");
    char *cfg = tu_config(tu_workspace(), "{\"text\":\"x\"}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    host_store s;
    store_init(&s);
    reentry_agent = a;
    agentao_memory_store v = vtable(&s);
    v.userdata_free = free_and_reenter;
    CHECK_STATUS(agentao_agent_set_memory_store(a, &v, NULL), AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_agent_set_memory_store(a, NULL, NULL), AGENTAO_STATUS_OK);
    CHECK(atomic_load(&s.freed) == 1);
    CHECK_STATUS(atomic_load(&reentry_status), AGENTAO_STATUS_OK);
    agentao_agent_free(a);
    store_destroy(&s);
}

int main(void) {
    test_store_and_prompt();
    test_default_store_and_refusals();
    test_bad_input();
    test_sqlite_by_config();
    test_finalizer_reenters();
    return tu_finish("test_memory_store");
}
