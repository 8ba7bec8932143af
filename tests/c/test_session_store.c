/* Durable sessions through the C ABI: a session committed to a SQLite store after every turn,
 * exported, resumed from its document and forked; the store handle's load, list and delete; a
 * host store through its vtable (commits with versions, a conflict reported to the host, the
 * finalizer run exactly once, on failure too, and an older, smaller struct accepted); bad
 * documents and bad arguments, each a clear status. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static char *chat(agentao_agent *agent, const char *message) {
    char *text = NULL;
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_chat(agent, message, -1, NULL, &text, &err);
    CHECK_MSG(st == AGENTAO_STATUS_OK, "chat: %s: %s", agentao_status_name(st),
              agentao_error_message(err));
    agentao_error_free(err);
    return text;
}

static agentao_commit_report last_commit(agentao_agent *agent, char **message) {
    agentao_commit_report r;
    memset(&r, 0xff, sizeof r);
    r.struct_size = sizeof r;
    CHECK_STATUS(agentao_agent_last_commit(agent, &r, message, NULL), AGENTAO_STATUS_OK);
    return r;
}

static agentao_agent *open_session(const char *config, const char *document,
                                   agentao_session_store *store) {
    agentao_agent *agent = NULL;
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_open_session(config, document, store, NULL, &agent, &err);
    CHECK_MSG(st == AGENTAO_STATUS_OK && agent, "open_session: %s: %s", agentao_status_name(st),
              agentao_error_message(err));
    agentao_error_free(err);
    return agent;
}

static void test_sqlite_round_trip(void) {
    tu_section("sqlite: commit per turn, export, resume, fork, load, list, delete");
    const char *dir = tu_workspace();
    char *session = tu_printf("\"session\":{\"store\":\"sqlite:%s/s.db\",\"id\":\"c-1\","
                              "\"tenant\":\"acme\",\"owner\":\"ann\"}", dir);
    char *config = tu_config(dir, "{\"repeat\":4,\"text\":\"r{i}\"}", session);
    agentao_agent *agent = tu_agent(config, NULL);
    agentao_commit_report r = last_commit(agent, NULL);
    CHECK(r.status == AGENTAO_COMMIT_STATUS_NONE && r.version == 0);
    free(chat(agent, "one"));
    free(chat(agent, "two"));
    char *message = (char *)1;
    r = last_commit(agent, &message);
    CHECK(r.status == AGENTAO_COMMIT_STATUS_COMMITTED);
    CHECK(r.version == 2 && r.stored_version == 0);
    CHECK(message == NULL);

    char *doc = NULL;
    CHECK_STATUS(agentao_agent_export_session(agent, &doc, NULL), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(doc, "\"format_version\":1");
    CHECK_CONTAINS(doc, "\"session_id\":\"c-1\"");
    char *history = tu_history(agent);

    /* A second agent on the same id resumes the stored session. */
    agentao_agent *again = tu_agent(config, NULL);
    char *again_history = tu_history(again);
    CHECK_STR_EQ(again_history, history);
    CHECK_STR_EQ(agentao_agent_session_id(again), "c-1");
    agentao_agent_free(again);

    /* Fork: a new id whose lineage names c-1, resumed from its document. */
    char *forked = NULL;
    CHECK_STATUS(agentao_session_fork(doc, "c-2", &forked, NULL), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(forked, "\"parent_session_id\":\"c-1\"");
    char *plain = tu_config(dir, "{\"text\":\"forked\"}", NULL);
    agentao_agent *fork = open_session(plain, forked, NULL);
    CHECK_STR_EQ(agentao_agent_session_id(fork), "c-2");
    char *fork_history = tu_history(fork);
    CHECK_STR_EQ(fork_history, history);
    /* Without a store nothing is committed. */
    free(chat(fork, "three"));
    CHECK(last_commit(fork, NULL).status == AGENTAO_COMMIT_STATUS_NONE);
    agentao_agent_free(fork);

    /* The store handle sees what the agent committed. */
    char *url = tu_printf("sqlite:%s/s.db", dir);
    agentao_session_store *store = NULL;
    CHECK_STATUS(agentao_session_store_open(url, &store, NULL), AGENTAO_STATUS_OK);
    char *loaded = NULL;
    uint64_t version = 0;
    CHECK_STATUS(agentao_session_store_load(store, "c-1", &loaded, &version, NULL),
                 AGENTAO_STATUS_OK);
    CHECK(version == 2);
    CHECK_STR_EQ(loaded, doc);
    char *none = (char *)1;
    version = 7;
    CHECK_STATUS(agentao_session_store_load(store, "nobody", &none, &version, NULL),
                 AGENTAO_STATUS_OK);
    CHECK(none == NULL && version == 0);
    char *page = NULL;
    CHECK_STATUS(agentao_session_store_list(store, "{\"tenant\":\"acme\",\"limit\":10}", &page,
                                            NULL),
                 AGENTAO_STATUS_OK);
    CHECK_CONTAINS(page, "\"session_id\":\"c-1\"");
    CHECK_CONTAINS(page, "\"owner\":\"ann\"");
    CHECK_CONTAINS(page, "\"next_cursor\":null");
    agentao_error *err = NULL;
    char *bad = (char *)1;
    CHECK_STATUS(agentao_session_store_list(store, "{\"cursor\":\"nonsense\"}", &bad, &err),
                 AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    CHECK_CONTAINS(agentao_error_message(err), "cursor");
    agentao_error_free(err);
    CHECK_STATUS(agentao_session_store_list(store, "{", &bad, NULL), AGENTAO_STATUS_INVALID_JSON);
    bool deleted = false;
    CHECK_STATUS(agentao_session_store_delete(store, "c-1", &deleted, NULL), AGENTAO_STATUS_OK);
    CHECK(deleted);
    CHECK_STATUS(agentao_session_store_delete(store, "c-1", &deleted, NULL), AGENTAO_STATUS_OK);
    CHECK(!deleted);
    /* The agent whose session was deleted still runs; its commit now conflicts (the store
     * holds no version 2 to continue). */
    free(chat(agent, "after delete"));
    message = NULL;
    r = last_commit(agent, &message);
    CHECK(r.status == AGENTAO_COMMIT_STATUS_CONFLICT);
    CHECK(r.stored_version == 0);
    CHECK_CONTAINS(message, "continues version 2");
    agentao_string_free(message);

    agentao_session_store_free(store);
    agentao_session_store_free(NULL);
    agentao_agent_free(agent);
    agentao_string_free(page);
    agentao_string_free(loaded);
    agentao_string_free(forked);
    agentao_string_free(doc);
    free(history), free(again_history), free(fork_history);
    free(url), free(plain), free(config), free(session);
}

static void test_bad_documents(void) {
    tu_section("bad documents and arguments");
    const char *dir = tu_workspace();
    char *config = tu_config(dir, "{\"text\":\"a\"}", NULL);
    agentao_agent *agent = tu_agent(config, NULL);
    free(chat(agent, "hi"));
    char *doc = NULL;
    CHECK_STATUS(agentao_agent_export_session(agent, &doc, NULL), AGENTAO_STATUS_OK);

    char *truncated = strndup(doc, strlen(doc) / 2);
    agentao_agent *out = (agentao_agent *)1;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_open_session(config, truncated, NULL, NULL, &out, &err),
                 AGENTAO_STATUS_CORRUPT_SESSION);
    CHECK(out == NULL);
    CHECK_CONTAINS(agentao_error_message(err), "not JSON");
    agentao_error_free(err);
    const char *newer = "{\"format_version\":9,\"session_id\":\"x\",\"history\":[]}";
    CHECK_STATUS(agentao_agent_open_session(config, newer, NULL, NULL, &out, &err),
                 AGENTAO_STATUS_CORRUPT_SESSION);
    CHECK_CONTAINS(agentao_error_message(err), "newer than this library reads");
    agentao_error_free(err);
    char *forked = (char *)1;
    CHECK_STATUS(agentao_session_fork("[]", NULL, &forked, NULL), AGENTAO_STATUS_CORRUPT_SESSION);
    CHECK(forked == NULL);
    CHECK_STATUS(agentao_session_fork(doc, "", &forked, NULL), AGENTAO_STATUS_CORRUPT_SESSION);
    CHECK_STATUS(agentao_session_fork(NULL, NULL, &forked, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_session_fork(doc, NULL, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    /* The agent whose document was refused elsewhere is untouched. */
    free(chat(agent, "still here"));

    agentao_session_store *store = (agentao_session_store *)1;
    CHECK_STATUS(agentao_session_store_open("mysql://x", &store, &err),
                 AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK(store == NULL);
    CHECK_CONTAINS(agentao_error_message(err), "unknown store URL");
    agentao_error_free(err);
    char *junk = tu_printf("%s/junk.db", dir);
    FILE *f = fopen(junk, "w");
    for (int i = 0; i < 4096; i++) fputc('Z', f);
    fclose(f);
    char *junk_url = tu_printf("sqlite:%s", junk);
    CHECK_STATUS(agentao_session_store_open(junk_url, &store, NULL),
                 AGENTAO_STATUS_CORRUPT_SESSION);
    char *no_doc = (char *)1;
    CHECK_STATUS(agentao_agent_export_session(NULL, &no_doc, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(no_doc == NULL);
    agentao_commit_report r = {.struct_size = 4};
    CHECK_STATUS(agentao_agent_last_commit(agent, &r, NULL, NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(agentao_agent_last_commit(agent, NULL, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    uint64_t version;
    char *loaded;
    CHECK_STATUS(agentao_session_store_load(NULL, "x", &loaded, &version, NULL),
                 AGENTAO_STATUS_NULL_ARGUMENT);
    agentao_agent_free(agent);
    agentao_string_free(doc);
    free(truncated), free(junk), free(junk_url), free(config);
}

/* ---- a host store: sessions in an array, versions checked --------------------------------- */

#define MAX_SESSIONS 8

typedef struct host_store {
    pthread_mutex_t mu;
    char *ids[MAX_SESSIONS];
    char *docs[MAX_SESSIONS];
    uint64_t versions[MAX_SESSIONS];
    int n;
    atomic_int commits, freed;
} host_store;

static int find(host_store *s, const char *id) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->ids[i], id)) return i;
    return -1;
}

/* The last load's answer handle, kept past its callback (a host's mistake the library must
   survive). */
static agentao_session_answer *kept_answer;

static void hs_load(void *ud, const char *id, agentao_session_answer *answer) {
    host_store *s = ud;
    kept_answer = answer;
    pthread_mutex_lock(&s->mu);
    int i = find(s, id);
    if (i >= 0)
        CHECK_STATUS(agentao_session_answer_document(answer, s->docs[i], s->versions[i], NULL),
                     AGENTAO_STATUS_OK);
    pthread_mutex_unlock(&s->mu);
}

static void hs_commit(void *ud, const char *id, const char *tenant, const char *owner,
                      uint64_t continues, const char *document, agentao_session_answer *answer) {
    host_store *s = ud;
    (void)tenant, (void)owner;
    atomic_fetch_add(&s->commits, 1);
    pthread_mutex_lock(&s->mu);
    int i = find(s, id);
    uint64_t stored = i >= 0 ? s->versions[i] : 0;
    if (stored != continues) {
        CHECK_STATUS(agentao_session_answer_conflict(answer, stored, NULL), AGENTAO_STATUS_OK);
        /* One answer per callback. */
        CHECK_STATUS(agentao_session_answer_version(answer, 1, NULL),
                     AGENTAO_STATUS_INVALID_ARGUMENT);
    } else {
        if (i < 0) {
            i = s->n++;
            s->ids[i] = strdup(id);
            s->docs[i] = NULL;
        }
        free(s->docs[i]);
        s->docs[i] = strdup(document);
        s->versions[i] = continues + 1;
        CHECK_STATUS(agentao_session_answer_version(answer, continues + 1, NULL),
                     AGENTAO_STATUS_OK);
    }
    pthread_mutex_unlock(&s->mu);
}

static void hs_free(void *ud) {
    host_store *s = ud;
    atomic_fetch_add(&s->freed, 1);
}

static void hs_destroy(host_store *s) {
    for (int i = 0; i < s->n; i++) free(s->ids[i]), free(s->docs[i]);
    pthread_mutex_destroy(&s->mu);
}

static agentao_host_session_store hs_vtable(host_store *s) {
    agentao_host_session_store v;
    memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    v.userdata = s;
    v.userdata_free = hs_free;
    v.load = hs_load;
    v.commit = hs_commit;
    return v;
}

static void test_host_store(void) {
    tu_section("host store: versions, a conflict, the finalizer once");
    host_store s = {.n = 0};
    pthread_mutex_init(&s.mu, NULL);
    agentao_host_session_store v = hs_vtable(&s);
    agentao_session_store *store = NULL;
    CHECK_STATUS(agentao_session_store_from_host(&v, &store, NULL), AGENTAO_STATUS_OK);

    const char *dir = tu_workspace();
    char *config = tu_config(dir, "{\"repeat\":4,\"text\":\"h{i}\"}",
                             "\"session\":{\"id\":\"h-1\"}");
    agentao_agent *agent = open_session(config, NULL, store);
    free(chat(agent, "one"));
    agentao_commit_report r = last_commit(agent, NULL);
    CHECK(r.status == AGENTAO_COMMIT_STATUS_COMMITTED && r.version == 1);
    CHECK(s.n == 1 && s.versions[0] == 1);
    CHECK_CONTAINS(s.docs[0], "\"content\":\"h1\"");

    /* Another process commits version 2 behind this agent's back. */
    agentao_agent *other = open_session(config, NULL, store);
    CHECK_STR_EQ(agentao_agent_session_id(other), "h-1");
    free(chat(other, "other"));
    CHECK(last_commit(other, NULL).version == 2);
    agentao_agent_free(other);

    free(chat(agent, "two"));
    char *message = NULL;
    r = last_commit(agent, &message);
    CHECK(r.status == AGENTAO_COMMIT_STATUS_CONFLICT);
    CHECK(r.version == 1 && r.stored_version == 2);
    CHECK_CONTAINS(message, "holds version 2");
    agentao_string_free(message);
    CHECK(s.versions[0] == 2);
    /* The store's operations through the handle; the host gave no list slot. */
    char *page = (char *)1;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_session_store_list(store, NULL, &page, &err),
                 AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "does not list");
    agentao_error_free(err);
    char *doc = NULL;
    uint64_t version = 0;
    CHECK_STATUS(agentao_session_store_load(store, "h-1", &doc, &version, NULL),
                 AGENTAO_STATUS_OK);
    CHECK(version == 2);
    CHECK_CONTAINS(doc, "other\"},{\"role\":\"assistant\"");
    agentao_string_free(doc);
    /* An answer after its callback returned is refused, not written into a finished request
       (it was the callback's stack slot before the handles became tokens). */
    CHECK(kept_answer != NULL);
    err = NULL;
    CHECK_STATUS(agentao_session_answer_version(kept_answer, 3, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "already finished");
    agentao_error_free(err);

    /* The agent holds the store: the finalizer waits for both. */
    agentao_session_store_free(store);
    CHECK(atomic_load(&s.freed) == 0);
    agentao_agent_free(agent);
    CHECK(atomic_load(&s.freed) == 1);
    hs_destroy(&s);
    free(config);
}

static void test_host_store_registration(void) {
    tu_section("host store registration: refusals release the userdata; a smaller struct");
    host_store s = {.n = 0};
    pthread_mutex_init(&s.mu, NULL);
    agentao_session_store *store = (agentao_session_store *)1;

    agentao_host_session_store v = hs_vtable(&s);
    v.commit = NULL;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_session_store_from_host(&v, &store, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(store == NULL);
    CHECK_CONTAINS(agentao_error_message(err), "commit");
    agentao_error_free(err);
    CHECK(atomic_load(&s.freed) == 1);

    v = hs_vtable(&s);
    v.struct_size = 8;
    CHECK_STATUS(agentao_session_store_from_host(&v, &store, NULL),
                 AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK(atomic_load(&s.freed) == 2);

    v = hs_vtable(&s);
    CHECK_STATUS(agentao_session_store_from_host(&v, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&s.freed) == 3);
    CHECK_STATUS(agentao_session_store_from_host(NULL, &store, NULL), AGENTAO_STATUS_NULL_ARGUMENT);

    /* An older header's struct: up to `commit`; the slots past it read as NULL (no listing,
     * no delete), and commits work. */
    v = hs_vtable(&s);
    v.struct_size = (uint32_t)(offsetof(agentao_host_session_store, commit) + sizeof(void *));
    v.list = (void (*)(void *, const char *, agentao_session_answer *))(uintptr_t)0x1;
    CHECK_STATUS(agentao_session_store_from_host(&v, &store, NULL), AGENTAO_STATUS_OK);
    char *page = NULL;
    CHECK_STATUS(agentao_session_store_list(store, NULL, &page, NULL),
                 AGENTAO_STATUS_INVALID_ARGUMENT);
    bool deleted = true;
    CHECK_STATUS(agentao_session_store_delete(store, "x", &deleted, NULL),
                 AGENTAO_STATUS_INVALID_ARGUMENT);
    const char *dir = tu_workspace();
    char *config = tu_config(dir, "{\"text\":\"small\"}", "\"session\":{\"id\":\"small\"}");
    agentao_agent *agent = open_session(config, NULL, store);
    free(chat(agent, "go"));
    CHECK(last_commit(agent, NULL).status == AGENTAO_COMMIT_STATUS_COMMITTED);
    agentao_agent_free(agent);
    agentao_session_store_free(store);
    CHECK(atomic_load(&s.freed) == 4);
    hs_destroy(&s);
    free(config);
}

int main(void) {
    test_sqlite_round_trip();
    test_bad_documents();
    test_host_store();
    test_host_store_registration();
    return tu_finish("test_session_store");
}
