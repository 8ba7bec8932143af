/*
 * fleet_worker.c: one stateless worker of the fleet test (scripts/test.d/88-fleet.sh).
 *
 * Workers share one PostgreSQL: the sessions (the library's PostgreSQL store), the audit table
 * (the library's audit sink) and the test's work queue, `fleet_work`, read here through libpq.
 * A worker claims a session that is due a turn and not held by a live worker (a claim older
 * than the lease is a dead worker's: `FOR UPDATE SKIP LOCKED` lets workers claim in parallel),
 * makes an agent that resumes the session from the store, runs one turn (the agent commits it
 * at the turn's end), flushes the audit sink, records the commit and releases the session.
 * Nothing of a session lives in the worker between turns, so a worker killed at any point
 * loses at most the turn it was running.
 *
 * Usage: fleet_worker WORKER_ID POSTGRES_URL WORKDIR LLM_DELAY_MS
 * Prints one line per turn: "turn SESSION VERSION MICROSECONDS"; exits 0 when no work is left.
 */
#define _POSIX_C_SOURCE 200809L
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentao.h"

static PGconn *db;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static PGresult *sql(const char *q, int n, const char *const *params, ExecStatusType want) {
    PGresult *r = PQexecParams(db, q, n, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != want) {
        fprintf(stderr, "fleet_worker: %s: %s", q, PQerrorMessage(db));
        exit(2);
    }
    return r;
}

/* Commit latency as the worker can see it: from the turn's last event before the commit to its
 * `session_committed` event (the document's serialisation and the store's round trips). */
struct timing {
    double last_us, commit_us;
};

static void on_event(void *ud, const char *json) {
    struct timing *t = ud;
    double now = now_us();
    if (strstr(json, "\"session_committed\"")) t->commit_us = now - t->last_us;
    else t->last_us = now;
}

static void allow(void *ud, const char *tool, const char *desc, const char *args, const char *call_id,
                  agentao_reply *reply) {
    (void)ud; (void)tool; (void)desc; (void)args; (void)call_id;
    agentao_reply_confirm(reply, AGENTAO_CONFIRMATION_ALLOW, NULL);
}

/* The agent for turn `turn` of `sid`: resumes the stored session; the scripted model calls one
 * tool (call id call_<turn>, in the audit rows) and answers. */
static agentao_agent *make_agent(const char *url, const char *workdir, const char *sid, long turn, int delay,
                                 struct timing *timing) {
    char config[4096];
    snprintf(config, sizeof config,
             "{\"working_directory\": \"%s\","
             " \"session\": {\"store\": \"%s\", \"id\": \"%s\", \"tenant\": \"fleet\", \"owner\": \"w\"},"
             " \"llm\": {\"provider\": \"scripted\", \"script\": {\"responses\": ["
             "  {\"tool_calls\": [{\"id\": \"call_%ld\", \"name\": \"read_file\", \"arguments\": {\"file_path\": \"fleet.txt\"}}],"
             "   \"delay_ms\": %d},"
             "  {\"text\": \"done %ld\", \"delay_ms\": %d}]}}}",
             workdir, url, sid, turn, delay, turn, delay);
    agentao_transport t = {0};
    t.struct_size = sizeof t;
    t.confirm_tool = allow;
    t.emit = on_event;
    t.userdata = timing;
    agentao_agent *agent = NULL;
    agentao_error *err = NULL;
    if (agentao_agent_new(config, &t, &agent, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "fleet_worker: agentao_agent_new(%s): %s\n", sid, agentao_error_message(err));
        exit(2);
    }
    return agent;
}

static uint64_t stored_version(agentao_agent *agent) {
    agentao_commit_report rep = {0};
    rep.struct_size = sizeof rep;
    if (agentao_agent_last_commit(agent, &rep, NULL, NULL) != AGENTAO_STATUS_OK) exit(2);
    return rep.version;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: fleet_worker WORKER_ID POSTGRES_URL WORKDIR LLM_DELAY_MS\n"); return 2; }
    const char *worker = argv[1], *url = argv[2], *workdir = argv[3];
    int delay = atoi(argv[4]);
    db = PQconnectdb(url);
    if (PQstatus(db) != CONNECTION_OK) { fprintf(stderr, "fleet_worker: %s", PQerrorMessage(db)); return 2; }
    agentao_audit_sink *sink = NULL;
    agentao_error *err = NULL;
    if (agentao_audit_sink_open_postgres(url, 0, &sink, &err) != AGENTAO_STATUS_OK) {
        fprintf(stderr, "fleet_worker: audit sink: %s\n", agentao_error_message(err));
        return 2;
    }
    int conflicts = 0;
    for (;;) {
        const char *claim_params[] = {worker};
        PGresult *r = sql(
            "UPDATE fleet_work SET claimed_by = $1, claimed_at = clock_timestamp() WHERE session_id = ("
            " SELECT session_id FROM fleet_work WHERE turns_done < turns_total"
            "  AND (claimed_by IS NULL OR claimed_at < clock_timestamp() - interval '3 seconds')"
            "  ORDER BY turns_done, session_id FOR UPDATE SKIP LOCKED LIMIT 1)"
            " RETURNING session_id, turns_done",
            1, claim_params, PGRES_TUPLES_OK);
        if (PQntuples(r) == 0) {
            PQclear(r);
            PGresult *left = sql("SELECT count(*) FROM fleet_work WHERE turns_done < turns_total", 0, NULL,
                                 PGRES_TUPLES_OK);
            int n = atoi(PQgetvalue(left, 0, 0));
            PQclear(left);
            if (n == 0) break;
            struct timespec pause = {0, 20 * 1000 * 1000};
            nanosleep(&pause, NULL);
            continue;
        }
        char sid[128];
        snprintf(sid, sizeof sid, "%s", PQgetvalue(r, 0, 0));
        long turn = atol(PQgetvalue(r, 0, 1)) + 1;
        PQclear(r);

        double t0 = now_us();
        struct timing timing = {0, -1};
        agentao_agent *agent = make_agent(url, workdir, sid, turn, delay, &timing);
        uint64_t resumed = stored_version(agent);
        if ((long)resumed + 1 != turn) {
            /* A worker died after its commit and before it recorded it: the store knows better. */
            agentao_agent_free(agent);
            turn = (long)resumed + 1;
            agent = make_agent(url, workdir, sid, turn, delay, &timing);
        }
        uint64_t audit_id = 0;
        if (agentao_agent_add_audit_sink(agent, sink, "fleet", &audit_id, &err) != AGENTAO_STATUS_OK) {
            fprintf(stderr, "fleet_worker: add_audit_sink: %s\n", agentao_error_message(err));
            return 2;
        }
        char message[200];
        snprintf(message, sizeof message, "fleet-turn-%ld-%s;", turn, sid);
        char *text = NULL;
        agentao_status st = agentao_agent_chat(agent, message, -1, NULL, &text, &err);
        double us = now_us() - t0;
        if (st != AGENTAO_STATUS_OK) {
            fprintf(stderr, "fleet_worker: chat(%s): %s\n", sid, agentao_error_message(err));
            return 2;
        }
        agentao_string_free(text);
        agentao_commit_report rep = {0};
        rep.struct_size = sizeof rep;
        char *why = NULL;
        agentao_agent_last_commit(agent, &rep, &why, NULL);
        agentao_agent_free(agent);
        /* The turn's audit rows are in the table before the turn counts as done. */
        if (agentao_audit_sink_flush(sink, 30000, &err) != AGENTAO_STATUS_OK) {
            fprintf(stderr, "fleet_worker: audit flush: %s\n", agentao_error_message(err));
            return 2;
        }
        char version[32], micros[32], commit_micros[32];
        snprintf(version, sizeof version, "%llu", (unsigned long long)rep.version);
        snprintf(micros, sizeof micros, "%.0f", us);
        snprintf(commit_micros, sizeof commit_micros, "%.0f", timing.commit_us);
        if (rep.status == AGENTAO_COMMIT_STATUS_COMMITTED) {
            const char *p[] = {sid, version, worker, micros, commit_micros};
            PQclear(sql("INSERT INTO fleet_commits (session_id, version, worker, turn_us, commit_us)"
                        " VALUES ($1, $2, $3, $4, $5)", 5, p, PGRES_COMMAND_OK));
            PQclear(sql("UPDATE fleet_work SET turns_done = $2, claimed_by = NULL WHERE session_id = $1"
                        " AND claimed_by = $3", 3, p, PGRES_COMMAND_OK));
            printf("turn %s %s %s\n", sid, version, micros);
        } else {
            /* A conflict: another worker holds a newer version (our claim had lapsed). */
            conflicts++;
            fprintf(stderr, "fleet_worker %s: %s not committed (status %d): %s\n", worker, sid, (int)rep.status,
                    why ? why : "");
            const char *p[] = {sid, worker};
            PQclear(sql("UPDATE fleet_work SET claimed_by = NULL WHERE session_id = $1 AND claimed_by = $2", 2, p,
                        PGRES_COMMAND_OK));
        }
        agentao_string_free(why);
        fflush(stdout);
    }
    agentao_audit_sink_flush(sink, 30000, NULL);
    agentao_audit_sink_free(sink);
    PQfinish(db);
    fprintf(stderr, "fleet_worker %s: done (%d conflicts)\n", worker, conflicts);
    return 0;
}
