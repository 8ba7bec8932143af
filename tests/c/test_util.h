/*
 * Shared helpers of the C tests: checks, workspaces, scripted configs, and a recording
 * transport. Every test is a small C11 program linked against the real libagentao.so.
 */
#ifndef AGENTAO_TEST_UTIL_H
#define AGENTAO_TEST_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agentao.h"

/* ---- checks ------------------------------------------------------------------------------ */

extern atomic_int tu_failures;

void tu_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) tu_fail_at(__FILE__, __LINE__, "CHECK(%s) failed", #cond);     \
    } while (0)

#define CHECK_MSG(cond, ...)                                                        \
    do {                                                                            \
        if (!(cond)) tu_fail_at(__FILE__, __LINE__, __VA_ARGS__);                   \
    } while (0)

/* Compares two statuses and prints both names on mismatch. */
#define CHECK_STATUS(got, want)                                                     \
    do {                                                                            \
        int32_t g_ = (int32_t)(got), w_ = (int32_t)(want);                          \
        if (g_ != w_)                                                               \
            tu_fail_at(__FILE__, __LINE__, "%s: got %s (%d), want %s (%d)", #got,   \
                       agentao_status_name(g_), g_, agentao_status_name(w_), w_);   \
    } while (0)

#define CHECK_STR_EQ(got, want)                                                     \
    do {                                                                            \
        const char *g_ = (got), *w_ = (want);                                       \
        if (!g_ || !w_ || strcmp(g_, w_) != 0)                                      \
            tu_fail_at(__FILE__, __LINE__, "%s: got \"%s\", want \"%s\"", #got,     \
                       g_ ? g_ : "(null)", w_ ? w_ : "(null)");                     \
    } while (0)

/* What a test presets an out-parameter to: a value no library call leaves there. */
#define TU_JUNK ((void *)0x1)

/* Expects `call` (which writes `err`, declared here) to fail with `want` and to leave an error
 * object; runs the statements after `want` on it (as `err`), then frees it. */
#define TU_CHECK_FAILS_THEN(call, want, ...)                                        \
    do {                                                                            \
        agentao_error *err = TU_JUNK;                                               \
        agentao_status st_ = (call);                                                \
        CHECK_STATUS(st_, want);                                                    \
        CHECK_MSG(err != TU_JUNK && err != NULL, "%s: no error object", #call);     \
        if (err != TU_JUNK && err) {                                                \
            __VA_ARGS__;                                                            \
            agentao_error_free(err);                                                \
        }                                                                           \
    } while (0)

/* Expects `call` to fail with `want`, and the error object to agree: its status and a
 * non-empty message. */
#define CHECK_FAILS_WITH(call, want)                                                \
    TU_CHECK_FAILS_THEN(call, want, CHECK_STATUS(agentao_error_status(err), want);  \
                        CHECK_MSG(strlen(agentao_error_message(err)) > 0,           \
                                  "%s: empty message", #call))

#define CHECK_CONTAINS(hay, needle)                                                 \
    do {                                                                            \
        const char *h_ = (hay), *n_ = (needle);                                     \
        if (!h_ || !strstr(h_, n_))                                                 \
            tu_fail_at(__FILE__, __LINE__, "%s does not contain \"%s\": %s", #hay,  \
                       n_, h_ ? h_ : "(null)");                                     \
    } while (0)

/* Expects `call` to fail with `want` and an error object whose message contains `needle`. */
#define CHECK_FAILS_CONTAINING(call, want, needle)                                  \
    TU_CHECK_FAILS_THEN(call, want, CHECK_CONTAINS(agentao_error_message(err), needle))

#define CHECK_NOT_CONTAINS(hay, needle)                                             \
    do {                                                                            \
        const char *h_ = (hay), *n_ = (needle);                                     \
        if (h_ && strstr(h_, n_))                                                   \
            tu_fail_at(__FILE__, __LINE__, "%s unexpectedly contains \"%s\": %s",   \
                       #hay, n_, h_);                                               \
    } while (0)

/* Prints the test's verdict, removes its workspaces, and returns the exit code. */
int tu_finish(const char *name);

/* Starts a named section (printed, so failures are easy to place). */
void tu_section(const char *name);

/* ---- small utilities --------------------------------------------------------------------- */

char *tu_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t tu_now_ms(void);
/* A time bound of `ms` for this build: under valgrind (TU_SLOWDOWN=10) everything runs tens of
 * times slower, and a bound is about the library's promptness, not the instrumentation's. */
#ifndef TU_SLOWDOWN
#define TU_SLOWDOWN 1
#endif
#define TU_BOUND_MS(ms) ((uint64_t)(ms) * TU_SLOWDOWN)
void tu_sleep_ms(unsigned ms);
/* Polls `cond(arg)` every 5 ms until it holds or `timeout_ms` passes; returns whether it held. */
bool tu_wait_until(bool (*cond)(void *), void *arg, unsigned timeout_ms);
/* Waits until the atomic counter reaches at least `want`. */
bool tu_wait_count(atomic_int *counter, int want, unsigned timeout_ms);
char *tu_read_file(const char *path); /* malloc'd, NULL when unreadable */
bool tu_file_exists(const char *path);

/* A fresh empty directory (mkdtemp), removed by tu_finish. Owned by the helper. */
const char *tu_workspace(void);

/* A config for the scripted provider: `responses` is the JSON list body (without brackets)
 * and `extra` extra top-level members (without surrounding braces or trailing comma; may be
 * NULL). malloc'd. */
char *tu_config(const char *dir, const char *responses, const char *extra);

/* Creates an agent and fails the test (returning NULL) when that does not work. */
agentao_agent *tu_agent(const char *config, const agentao_transport *transport);

/* The last turn / history JSON as malloc'd copies (never NULL; "" on failure). */
char *tu_last_turn(agentao_agent *agent);
char *tu_history(agentao_agent *agent);
/* One blocking chat that must succeed (checked); its text as a malloc'd copy (never NULL). */
char *tu_chat(agentao_agent *agent, const char *message);
/* The content of the last tool message in the history, malloc'd (never NULL). */
char *tu_last_tool_result(agentao_agent *agent);

/* The string value of the first `"key":"..."` in `json`, unescaped (only \" \\ \n handled),
 * malloc'd; NULL when absent or not a string. */
char *tu_json_str(const char *json, const char *key);

/* Joins `"key":"value"` for a CHECK_CONTAINS: "\"status\":\"ok\"". */
#define TU_KV(k, v) "\"" k "\":\"" v "\""

/* ---- the recording transport ------------------------------------------------------------- */

enum tu_confirm_mode {
    TU_CONFIRM_ALLOW = 0, /* answer allow inside the callback */
    TU_CONFIRM_DENY,      /* answer deny inside the callback */
    TU_CONFIRM_DEFER,     /* keep the reply in `pending_reply` for the test to answer */
};

typedef struct tu_recorder {
    pthread_mutex_t mu;
    char **events; /* full event JSON copies, in order */
    size_t n_events, cap_events;
    atomic_int in_emit;      /* 1 while an emit callback runs */
    atomic_int overlaps;     /* emit calls that found another one running */
    atomic_int emits;        /* emit calls */
    atomic_int freed;        /* userdata_free calls */
    atomic_int confirms;     /* confirm_tool calls */
    atomic_int asks;         /* ask_user calls */
    atomic_int max_iters;    /* on_max_iterations calls */
    atomic_int on_caller_thread; /* callbacks made on `caller` */
    pthread_t caller;        /* the test's main thread */
    int emit_delay_us;       /* sleep inside emit, to widen overlap windows */
    enum tu_confirm_mode confirm_mode;
    const char *max_iter_answer; /* JSON for on_max_iterations (sync); NULL: defer */
    _Atomic(agentao_reply *) pending_reply;
    uint32_t last_max_count;
    char *last_pending_calls; /* pending_calls_json of the last on_max_iterations */
    char *last_confirm_tool;  /* tool_name of the last confirm_tool */
    /* Hooks run from emit with the event JSON (may be NULL). */
    void (*on_event)(struct tu_recorder *rec, const char *event_json);
    void *user; /* for hooks */
    agentao_broadcaster *bc; /* fan-out behind subscribe/unsubscribe */
    int transports;          /* vtables handed out: each must be released exactly once */
} tu_recorder;

/* Slots the transport fills; the rest stay NULL. */
enum {
    TU_SLOT_EMIT = 1,
    TU_SLOT_CONFIRM = 2,
    TU_SLOT_ASK = 4,
    TU_SLOT_MAX_ITER = 8,
    TU_SLOT_SUBSCRIBE = 16, /* subscribe + unsubscribe */
    TU_SLOT_ALL = 31,
};

void tu_recorder_init(tu_recorder *rec);
/* Waits (up to 5 s) until every transport handed out was released, checks that each was
 * released exactly once, then frees the recorder. As a host must, it never frees userdata
 * before userdata_free. */
void tu_recorder_destroy(tu_recorder *rec);
agentao_transport tu_recorder_transport(tu_recorder *rec, unsigned slots);
size_t tu_recorder_count(tu_recorder *rec);
/* Event types joined by ',', consecutive llm_text collapsed to "llm_text*". malloc'd. */
char *tu_recorder_types(tu_recorder *rec);
/* A copy of the i-th event whose type is `type` (malloc'd) or NULL. */
char *tu_recorder_find(tu_recorder *rec, const char *type, int nth);
/* Removes every recorded event. */
void tu_recorder_clear(tu_recorder *rec);

/* Answers the deferred reply once it arrives (within `timeout_ms`); returns the status of
 * agentao_reply_confirm, or -1 when no reply came. */
int tu_answer_confirm(tu_recorder *rec, int32_t confirmation, unsigned timeout_ms);

/* ---- completions ------------------------------------------------------------------------- */

typedef struct tu_done {
    atomic_int calls;
    atomic_int status;
    char *outcome;   /* copy of outcome_json (or NULL) */
    char *message;   /* copy of the error message (or NULL) */
    uint64_t at_ms;  /* when it fired */
    /* Deltas of a streaming turn. */
    pthread_mutex_t mu;
    char *deltas;    /* concatenated delta JSON items, one per line */
    atomic_int n_deltas;
    atomic_int deltas_after_done;
} tu_done;

void tu_done_init(tu_done *d);
void tu_done_destroy(tu_done *d);
void tu_on_done(void *userdata, agentao_status status, const char *outcome_json,
                const struct agentao_error *err);
void tu_on_delta(void *userdata, const char *delta_json);
/* An on_done for a call that must be refused: fails the test if it fires. */
void tu_never_done(void *userdata, agentao_status status, const char *outcome_json,
                   const struct agentao_error *err);

#endif /* AGENTAO_TEST_UTIL_H */
