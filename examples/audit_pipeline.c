/*
 * audit_pipeline.c: the tenant audit pipeline of the reference docs, in C.
 *
 * A consumer thread reads the agent's host-event pull stream while a turn runs and writes one
 * row per host event (tool lifecycle, permission decisions, sub-agent lifecycle) into a SQLite
 * database; afterwards the audit table is printed. The turn delegates a check to the
 * `ledger-checker` sub-agent, scripted by name under `llm.script.subagents`, so the table shows
 * its `spawned` and `completed` rows with the usage the parent's totals now include. Host events carry no prompt text, tool arguments or output, so
 * the audit log is safe to keep. Runs offline on the scripted provider.
 *
 * Usage: audit_pipeline [DATABASE]   (default: audit.db in a temporary directory)
 *
 * PostgreSQL mode (built with -DAUDIT_POSTGRES and -lpq): audit_pipeline --postgres URL. The
 * library's own audit sink writes the rows instead of the consumer thread: batches from a
 * bounded queue into `agent_audit(tenant_id, session_id, ts, event_type, payload jsonb)`, never
 * slowing the turn (a full queue drops and counts, see agentao_audit_sink_status); the example
 * flushes it after the turn and reads the session's rows back with libpq.
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentao.h"

#ifdef AUDIT_POSTGRES
#include <libpq-fe.h>
#endif

static const char *SCRIPT =
    "{\"responses\": ["
    " {\"tool_calls\": [{\"id\": \"call_read\", \"name\": \"read_file\", \"arguments\": {\"file_path\": \"ledger.csv\"}},"
    "                 {\"id\": \"call_list\", \"name\": \"list_directory\", \"arguments\": {}}]},"
    " {\"tool_calls\": [{\"id\": \"call_check\", \"name\": \"agent_ledger_checker\","
    "                   \"arguments\": {\"task\": \"Check that the ledger adds up to 42.\"}}]},"
    " {\"tool_calls\": [{\"id\": \"call_write\", \"name\": \"write_file\","
    "                   \"arguments\": {\"file_path\": \"report.txt\", \"content\": \"total: 42\\n\"}}]},"
    " {\"tool_calls\": [{\"id\": \"call_wipe\", \"name\": \"write_file\","
    "                   \"arguments\": {\"file_path\": \"ledger.csv\", \"content\": \"\"}}]},"
    " {\"text\": \"Report written; I did not wipe the ledger.\"}"
    "],"
    " \"subagents\": {\"ledger-checker\": ["
    "  {\"tool_calls\": [{\"id\": \"sub_read\", \"name\": \"read_file\", \"arguments\": {\"file_path\": \"ledger.csv\"}}],"
    "   \"usage\": {\"prompt_tokens\": 310, \"completion_tokens\": 12}},"
    "  {\"tool_calls\": [{\"id\": \"sub_done\", \"name\": \"complete_task\", \"arguments\": {\"result\": \"40 + 2 = 42: the ledger adds up.\"}}],"
    "   \"usage\": {\"prompt_tokens\": 420, \"completion_tokens\": 18}},"
    "  {\"text\": \"\"}"
    " ]}}";

static const char *SUBAGENTS =
    "{\"definitions\": [{\"name\": \"ledger-checker\", \"description\": \"Checks the ledger's totals.\","
    " \"tools\": [\"read_file\"], \"max_turns\": 5}]}";

struct consumer {
    agentao_host_event_stream *stream;
    sqlite3 *db;
    atomic_int stop;
    int rows;
};

/* Pulls a JSON string field out of a flat host event (enough for this example). */
static void field(const char *json, const char *key, char *out, size_t n) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    out[0] = 0;
    if (!p) return;
    p += strlen(pat);
    if (*p != '"') { /* null or a non-string */
        size_t i = 0;
        while (*p && *p != ',' && *p != '}' && i + 1 < n) out[i++] = *p++;
        out[i] = 0;
        return;
    }
    p++;
    size_t i = 0;
    while (*p && *p != '"' && i + 1 < n) out[i++] = *p++;
    out[i] = 0;
}

static void *consume(void *arg) {
    struct consumer *c = arg;
    sqlite3_stmt *ins = NULL;
    sqlite3_prepare_v2(c->db,
                       "INSERT INTO audit(event_type, session_id, tool_call_id, tool_name, phase_or_outcome,"
                       " detail, at, raw) VALUES(?,?,?,?,?,?,?,?)", -1, &ins, NULL);
    for (;;) {
        char *json = NULL;
        agentao_status st = agentao_host_event_stream_next(c->stream, 100, &json, NULL);
        if (st == AGENTAO_STATUS_TIMEOUT) {
            if (atomic_load(&c->stop)) break; /* the turn is over and the queue is drained */
            continue;
        }
        if (st != AGENTAO_STATUS_OK) break;
        char type[64], sid[64], call[128], tool[128], what[64], detail[256], at[40];
        field(json, "event_type", type, sizeof type);
        field(json, "session_id", sid, sizeof sid);
        field(json, "tool_call_id", call, sizeof call);
        field(json, "tool_name", tool, sizeof tool);
        if (strcmp(type, "subagent_lifecycle") == 0) {
            /* The parent's agent_* call, the run's label, its phase; usage on a terminal row. */
            char prompt[32], completion[32], error_type[64];
            field(json, "parent_tool_call_id", call, sizeof call);
            field(json, "task_summary", tool, sizeof tool);
            field(json, "phase", what, sizeof what);
            field(json, "prompt_tokens", prompt, sizeof prompt);
            field(json, "completion_tokens", completion, sizeof completion);
            field(json, "error_type", error_type, sizeof error_type);
            if (prompt[0])
                snprintf(detail, sizeof detail, "usage %s+%s tokens%s%s", prompt, completion,
                         strcmp(error_type, "null") ? ", " : "", strcmp(error_type, "null") ? error_type : "");
            else
                snprintf(detail, sizeof detail, "child %.36s", strstr(json, "\"child_task_id\":\"") ?
                         strstr(json, "\"child_task_id\":\"") + 17 : "?");
            field(json, "started_at", at, sizeof at);
        } else if (strcmp(type, "permission_decision") == 0) {
            field(json, "outcome", what, sizeof what);
            field(json, "reason", detail, sizeof detail);
            field(json, "decided_at", at, sizeof at);
        } else {
            char outcome[32];
            field(json, "phase", what, sizeof what);
            field(json, "outcome", outcome, sizeof outcome);
            if (strcmp(outcome, "null") != 0) {
                strncat(what, "/", sizeof what - strlen(what) - 1);
                strncat(what, outcome, sizeof what - strlen(what) - 1);
            }
            field(json, "summary", detail, sizeof detail);
            field(json, "started_at", at, sizeof at);
        }
        const char *vals[] = {type, sid, call, tool, what, detail, at, json};
        for (int i = 0; i < 8; i++) sqlite3_bind_text(ins, i + 1, vals[i], -1, SQLITE_TRANSIENT);
        if (sqlite3_step(ins) == SQLITE_DONE) c->rows++;
        sqlite3_reset(ins);
        agentao_string_free(json);
    }
    sqlite3_finalize(ins);
    return NULL;
}

/* The approver: approve the report, decline anything that touches the ledger. */
static void confirm(void *ud, const char *tool, const char *desc, const char *args, const char *call_id,
                    agentao_reply *reply) {
    (void)ud; (void)tool; (void)desc; (void)call_id;
    int touches_ledger = strstr(args, "ledger.csv") != NULL;
    agentao_reply_confirm(reply, touches_ledger ? AGENTAO_CONFIRMATION_DENY : AGENTAO_CONFIRMATION_ALLOW, NULL);
}

#ifdef AUDIT_POSTGRES
static int postgres_mode(agentao_agent *agent, const char *url) {
    agentao_error *err = NULL;
    agentao_audit_sink *sink = NULL;
    if (agentao_audit_sink_open_postgres(url, 0, &sink, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "audit sink: %s\n", agentao_error_message(err));
        return 1;
    }
    uint64_t id = 0;
    agentao_agent_add_audit_sink(agent, sink, "example-tenant", &id, NULL);
    char *text = NULL;
    agentao_status st = agentao_agent_chat(agent, "Summarise the ledger into report.txt.", -1, NULL, &text, &err);
    printf("turn: %s: %s\n", agentao_status_name(st), st == AGENTAO_STATUS_OK ? text : agentao_error_message(err));
    agentao_string_free(text);
    if (agentao_audit_sink_flush(sink, 10000, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "audit flush: %s\n", agentao_error_message(err));
        return 1;
    }
    agentao_audit_status status = {0};
    status.struct_size = sizeof status;
    agentao_audit_sink_status(sink, &status, NULL, NULL);
    printf("audit sink: %llu written, %llu dropped\n", (unsigned long long)status.written,
           (unsigned long long)status.dropped);
    agentao_audit_sink_free(sink);

    PGconn *db = PQconnectdb(url);
    if (PQstatus(db) != CONNECTION_OK) { fprintf(stderr, "%s", PQerrorMessage(db)); return 1; }
    const char *sid = agentao_agent_session_id(agent);
    const char *params[] = {sid};
    PGresult *r = PQexecParams(db,
        "SELECT event_type, coalesce(payload->>'tool_call_id', payload->>'parent_tool_call_id'),"
        " coalesce(payload->>'tool_name', payload->>'task_summary'),"
        " coalesce(payload->>'phase', '') || coalesce('/' || (payload->>'outcome'), '')"
        " FROM agent_audit WHERE tenant_id = 'example-tenant' AND session_id = $1 ORDER BY id",
        1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) { fprintf(stderr, "%s", PQerrorMessage(db)); return 1; }
    printf("\nsession %s\n%-20s %-11s %-25s %s\n", sid, "event_type", "call", "tool", "phase/outcome");
    for (int i = 0; i < PQntuples(r); i++)
        printf("%-20s %-11s %-25s %s\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
               PQgetvalue(r, i, 3));
    int rows = PQntuples(r);
    printf("rows: %d\n", rows);
    PQclear(r);
    PQfinish(db);
    agentao_agent_free(agent);
    return rows > 0 ? 0 : 1;
}
#endif

/* The run's scratch folder: the ledger the agent reads, its report, the default database. */
static char workspace[] = "/tmp/agentao-audit-XXXXXX";

/* Leaves nothing behind in /tmp, however main returns. */
static void remove_workspace(void) {
    static const char *const files[] = {"ledger.csv", "report.txt", "audit.db"};
    char path[600];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", workspace, files[i]);
        remove(path);
    }
    rmdir(workspace);
}

int main(int argc, char **argv) {
    char *dir = mkdtemp(workspace);
    if (!dir) return 1;
    atexit(remove_workspace);
    char path[600], dbpath[600];
    snprintf(path, sizeof path, "%s/ledger.csv", dir);
    FILE *f = fopen(path, "w");
    fputs("id,amount\n1,40\n2,2\n", f);
    fclose(f);
    if (argc > 1 && strcmp(argv[1], "--postgres") != 0) snprintf(dbpath, sizeof dbpath, "%s", argv[1]);
    else snprintf(dbpath, sizeof dbpath, "%s/audit.db", dir);
    remove(dbpath);

    sqlite3 *db = NULL;
    if (sqlite3_open(dbpath, &db) != SQLITE_OK) { fprintf(stderr, "sqlite: cannot open %s\n", dbpath); return 1; }
    sqlite3_exec(db, "CREATE TABLE audit(id INTEGER PRIMARY KEY, event_type TEXT, session_id TEXT, tool_call_id TEXT,"
                     " tool_name TEXT, phase_or_outcome TEXT, detail TEXT, at TEXT, raw TEXT)", NULL, NULL, NULL);

    char config[4096];
    snprintf(config, sizeof config,
             "{\"working_directory\": \"%s\", \"subagents\": %s,"
             " \"llm\": {\"provider\": \"scripted\", \"script\": %s}}", dir, SUBAGENTS, SCRIPT);
    agentao_transport t = {0};
    t.struct_size = sizeof t;
    t.confirm_tool = confirm;
    agentao_agent *agent = NULL;
    agentao_error *err = NULL;
    if (agentao_agent_new(config, &t, &agent, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "agentao_agent_new: %s\n", agentao_error_message(err));
        return 1;
    }

#ifdef AUDIT_POSTGRES
    if (argc > 2 && strcmp(argv[1], "--postgres") == 0) {
        sqlite3_close(db);
        return postgres_mode(agent, argv[2]);
    }
#endif
    struct consumer c = {0};
    c.db = db;
    if (agentao_agent_host_events_open(agent, NULL, &c.stream, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "host_events_open: %s\n", agentao_error_message(err));
        return 1;
    }
    pthread_t th;
    pthread_create(&th, NULL, consume, &c);

    char *text = NULL;
    agentao_status st = agentao_agent_chat(agent, "Summarise the ledger into report.txt.", -1, NULL, &text, &err);
    printf("turn: %s: %s\n", agentao_status_name(st), st == AGENTAO_STATUS_OK ? text : agentao_error_message(err));
    agentao_string_free(text);
    atomic_store(&c.stop, 1);
    pthread_join(th, NULL);
    agentao_host_event_stream_free(c.stream);

    printf("\nsession %s\n", agentao_agent_session_id(agent));
    printf("%-3s %-20s %-11s %-25s %-18s %s\n", "id", "event_type", "call", "tool", "phase/outcome", "detail");
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db, "SELECT id, event_type, tool_call_id, tool_name, phase_or_outcome, detail FROM audit ORDER BY id",
                       -1, &q, NULL);
    while (sqlite3_step(q) == SQLITE_ROW) {
        printf("%-3d %-20s %-11s %-25s %-18s %s\n", sqlite3_column_int(q, 0), sqlite3_column_text(q, 1),
               sqlite3_column_text(q, 2), sqlite3_column_text(q, 3), sqlite3_column_text(q, 4),
               sqlite3_column_text(q, 5));
    }
    sqlite3_finalize(q);
    printf("rows: %d\n", c.rows);
    char *usage = NULL;
    if (agentao_agent_usage(agent, &usage, NULL) == AGENTAO_STATUS_OK) printf("session usage (sub-agent included): %s\n", usage);
    agentao_string_free(usage);
    sqlite3_close(db);
    agentao_agent_free(agent);
    return c.rows > 0 ? 0 : 1;
}
