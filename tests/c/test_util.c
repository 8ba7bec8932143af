#include "test_util.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

atomic_int tu_failures;

static pthread_mutex_t tu_print_mu = PTHREAD_MUTEX_INITIALIZER;

void tu_fail_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&tu_print_mu);
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
    pthread_mutex_unlock(&tu_print_mu);
    va_end(ap);
    atomic_fetch_add(&tu_failures, 1);
}

void tu_section(const char *name) {
    pthread_mutex_lock(&tu_print_mu);
    printf("-- %s\n", name);
    fflush(stdout);
    pthread_mutex_unlock(&tu_print_mu);
}

/* ---- workspaces ------------------------------------------------------------------------ */

static char *tu_dirs[64];
static int tu_n_dirs;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

const char *tu_workspace(void) {
    const char *base = getenv("TMPDIR");
    char *tmpl = tu_printf("%s/agentao-ctest-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpl)) {
        tu_fail_at(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
        exit(2);
    }
    if (tu_n_dirs < 64) tu_dirs[tu_n_dirs++] = tmpl;
    return tmpl;
}

int tu_finish(const char *name) {
    for (int i = 0; i < tu_n_dirs; i++) {
        nftw(tu_dirs[i], rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(tu_dirs[i]);
    }
    tu_n_dirs = 0;
    int f = atomic_load(&tu_failures);
    if (f) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, f);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

/* ---- utilities ------------------------------------------------------------------------- */

char *tu_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) {
        fprintf(stderr, "out of memory\n");
        abort();
    }
    va_end(ap);
    return s;
}

uint64_t tu_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void tu_sleep_ms(unsigned ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

bool tu_wait_until(bool (*cond)(void *), void *arg, unsigned timeout_ms) {
    uint64_t end = tu_now_ms() + timeout_ms;
    for (;;) {
        if (cond(arg)) return true;
        if (tu_now_ms() >= end) return false;
        tu_sleep_ms(5);
    }
}

bool tu_wait_count(atomic_int *counter, int want, unsigned timeout_ms) {
    uint64_t end = tu_now_ms() + timeout_ms;
    while (atomic_load(counter) < want) {
        if (tu_now_ms() >= end) return false;
        tu_sleep_ms(5);
    }
    return true;
}

char *tu_read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        if (got == 0) break;
        n += got;
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

bool tu_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

char *tu_config(const char *dir, const char *responses, const char *extra) {
    return tu_printf("{\"working_directory\":\"%s\",%s%s\"llm\":{\"provider\":\"scripted\","
                     "\"script\":{\"responses\":[%s]}}}",
                     dir, extra ? extra : "", extra ? "," : "", responses);
}

agentao_agent *tu_agent(const char *config, const agentao_transport *transport) {
    agentao_agent *agent = NULL;
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_new(config, transport, &agent, &err);
    if (st != AGENTAO_STATUS_OK || !agent) {
        tu_fail_at(__FILE__, __LINE__, "agentao_agent_new: %s: %s", agentao_status_name(st),
                   agentao_error_message(err));
        agentao_error_free(err);
        return NULL;
    }
    if (err) tu_fail_at(__FILE__, __LINE__, "agentao_agent_new OK but err_out was set");
    return agent;
}

static char *take_string(agentao_status st, char *s, agentao_error *err, const char *what) {
    if (st != AGENTAO_STATUS_OK || !s) {
        tu_fail_at(__FILE__, __LINE__, "%s: %s: %s", what, agentao_status_name(st),
                   agentao_error_message(err));
        agentao_error_free(err);
        agentao_string_free(s);
        return strdup("");
    }
    char *copy = strdup(s);
    agentao_string_free(s);
    return copy;
}

char *tu_last_turn(agentao_agent *agent) {
    char *s = NULL;
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_last_turn(agent, &s, &err);
    return take_string(st, s, err, "agentao_agent_last_turn");
}

char *tu_history(agentao_agent *agent) {
    char *s = NULL;
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_history(agent, &s, &err);
    return take_string(st, s, err, "agentao_agent_history");
}

char *tu_chat(agentao_agent *agent, const char *message) {
    char *text = NULL;
    agentao_error *err = NULL;
    agentao_status st = agentao_agent_chat(agent, message, -1, NULL, &text, &err);
    CHECK_MSG(st == AGENTAO_STATUS_OK, "chat: %s: %s", agentao_status_name(st), agentao_error_message(err));
    agentao_error_free(err);
    char *copy = strdup(text ? text : "");
    agentao_string_free(text);
    return copy;
}

char *tu_last_tool_result(agentao_agent *agent) {
    char *hist = tu_history(agent);
    char *at = NULL;
    for (char *p = hist; (p = strstr(p, "\"role\":\"tool\"")); p++) at = p;
    char *content = at ? tu_json_str(at, "content") : NULL;
    free(hist);
    return content ? content : strdup("");
}

char *tu_json_str(const char *json, const char *key) {
    if (!json) return NULL;
    char *pat = tu_printf("\"%s\":", key);
    const char *p = strstr(json, pat);
    size_t plen = strlen(pat);
    free(pat);
    if (!p) return NULL;
    p += plen;
    while (*p == ' ') p++;
    if (*p != '"') return NULL;
    p++;
    char *out = malloc(strlen(p) + 1);
    size_t n = 0;
    while (*p && *p != '"') {
        if (*p == '\\' && p[1]) {
            p++;
            out[n++] = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
            p++;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    return out;
}

/* ---- recorder transport ------------------------------------------------------------------ */

static void rec_userdata_free(void *ud) {
    tu_recorder *rec = ud;
    atomic_fetch_add(&rec->freed, 1);
}

static char *event_type(const char *json) {
    return tu_json_str(json, "type");
}

static void rec_emit(void *ud, const char *event_json) {
    tu_recorder *rec = ud;
    if (atomic_exchange(&rec->in_emit, 1)) atomic_fetch_add(&rec->overlaps, 1);
    atomic_fetch_add(&rec->emits, 1);
    if (pthread_equal(pthread_self(), rec->caller)) atomic_fetch_add(&rec->on_caller_thread, 1);
    if (!event_json) {
        tu_fail_at(__FILE__, __LINE__, "emit got a NULL event");
    } else {
        pthread_mutex_lock(&rec->mu);
        if (rec->n_events == rec->cap_events) {
            rec->cap_events = rec->cap_events ? rec->cap_events * 2 : 64;
            rec->events = realloc(rec->events, rec->cap_events * sizeof(char *));
        }
        rec->events[rec->n_events++] = strdup(event_json);
        pthread_mutex_unlock(&rec->mu);
        if (rec->emit_delay_us) usleep((useconds_t)rec->emit_delay_us);
        if (rec->on_event) rec->on_event(rec, event_json);
        if (rec->bc) {
            agentao_status st = agentao_broadcaster_notify(rec->bc, event_json, NULL);
            if (st != AGENTAO_STATUS_OK) tu_fail_at(__FILE__, __LINE__, "broadcaster_notify failed");
        }
    }
    atomic_store(&rec->in_emit, 0);
}

static void rec_confirm(void *ud, const char *tool_name, const char *description,
                        const char *args_json, const char *call_id, struct agentao_reply *reply) {
    tu_recorder *rec = ud;
    if (!tool_name || !description || !args_json || !call_id || !reply)
        tu_fail_at(__FILE__, __LINE__, "confirm_tool got a NULL argument");
    if (pthread_equal(pthread_self(), rec->caller)) atomic_fetch_add(&rec->on_caller_thread, 1);
    pthread_mutex_lock(&rec->mu);
    free(rec->last_confirm_tool);
    rec->last_confirm_tool = strdup(tool_name ? tool_name : "");
    pthread_mutex_unlock(&rec->mu);
    /* Counted once the reply is reachable and before it is answered: a caller that waits for the
     * count finds the deferred reply, and a turn ended by the answer has already been counted. */
    switch (rec->confirm_mode) {
    case TU_CONFIRM_ALLOW:
    case TU_CONFIRM_DENY: {
        atomic_fetch_add(&rec->confirms, 1);
        int32_t c = rec->confirm_mode == TU_CONFIRM_ALLOW ? AGENTAO_CONFIRMATION_ALLOW
                                                          : AGENTAO_CONFIRMATION_DENY;
        agentao_status st = agentao_reply_confirm(reply, c, NULL);
        if (st != AGENTAO_STATUS_OK)
            tu_fail_at(__FILE__, __LINE__, "reply_confirm: %s", agentao_status_name(st));
        break;
    }
    case TU_CONFIRM_DEFER:
        atomic_store(&rec->pending_reply, reply);
        atomic_fetch_add(&rec->confirms, 1);
        break;
    }
}

static void rec_ask(void *ud, const char *question, const char *hints, struct agentao_reply *reply) {
    tu_recorder *rec = ud;
    (void)question;
    (void)hints;
    atomic_fetch_add(&rec->asks, 1);
    agentao_reply_text(reply, "recorded answer", NULL);
}

static void rec_max_iter(void *ud, uint32_t count, const char *pending, struct agentao_reply *reply) {
    tu_recorder *rec = ud;
    if (pthread_equal(pthread_self(), rec->caller)) atomic_fetch_add(&rec->on_caller_thread, 1);
    pthread_mutex_lock(&rec->mu);
    rec->last_max_count = count;
    free(rec->last_pending_calls);
    rec->last_pending_calls = strdup(pending ? pending : "(null)");
    pthread_mutex_unlock(&rec->mu);
    /* As for confirmations: counted once a deferred reply is reachable, before an answer. */
    if (rec->max_iter_answer) {
        atomic_fetch_add(&rec->max_iters, 1);
        agentao_status st = agentao_reply_json(reply, rec->max_iter_answer, NULL);
        if (st != AGENTAO_STATUS_OK)
            tu_fail_at(__FILE__, __LINE__, "reply_json: %s", agentao_status_name(st));
    } else {
        atomic_store(&rec->pending_reply, reply);
        atomic_fetch_add(&rec->max_iters, 1);
    }
}

static agentao_status rec_subscribe(void *ud, agentao_listener_fn listener, void *listener_ud,
                                    uint64_t *sub_out) {
    tu_recorder *rec = ud;
    return agentao_broadcaster_subscribe(rec->bc, listener, listener_ud, sub_out);
}

static void rec_unsubscribe(void *ud, uint64_t sub) {
    tu_recorder *rec = ud;
    agentao_broadcaster_unsubscribe(rec->bc, sub);
}

void tu_recorder_init(tu_recorder *rec) {
    memset(rec, 0, sizeof *rec);
    pthread_mutex_init(&rec->mu, NULL);
    rec->caller = pthread_self();
    rec->max_iter_answer = "{\"action\":\"stop\"}";
}

void tu_recorder_destroy(tu_recorder *rec) {
    if (rec->transports) {
        if (!tu_wait_count(&rec->freed, rec->transports, 5000))
            tu_fail_at(__FILE__, __LINE__, "userdata_free ran %d times for %d transports",
                       atomic_load(&rec->freed), rec->transports);
        tu_sleep_ms(20);
        if (atomic_load(&rec->freed) != rec->transports)
            tu_fail_at(__FILE__, __LINE__, "userdata_free ran %d times for %d transports",
                       atomic_load(&rec->freed), rec->transports);
        if (atomic_load(&rec->overlaps))
            tu_fail_at(__FILE__, __LINE__, "%d emit calls overlapped", atomic_load(&rec->overlaps));
    }
    tu_recorder_clear(rec);
    free(rec->events);
    free(rec->last_pending_calls);
    free(rec->last_confirm_tool);
    if (rec->bc) agentao_broadcaster_free(rec->bc);
    pthread_mutex_destroy(&rec->mu);
}

agentao_transport tu_recorder_transport(tu_recorder *rec, unsigned slots) {
    agentao_transport t;
    memset(&t, 0, sizeof t);
    t.struct_size = (uint32_t)sizeof t;
    t.userdata = rec;
    t.userdata_free = rec_userdata_free;
    rec->transports++;
    if (slots & TU_SLOT_EMIT) t.emit = rec_emit;
    if (slots & TU_SLOT_CONFIRM) t.confirm_tool = rec_confirm;
    if (slots & TU_SLOT_ASK) t.ask_user = rec_ask;
    if (slots & TU_SLOT_MAX_ITER) t.on_max_iterations = rec_max_iter;
    if (slots & TU_SLOT_SUBSCRIBE) {
        if (!rec->bc) rec->bc = agentao_broadcaster_new();
        t.subscribe = rec_subscribe;
        t.unsubscribe = rec_unsubscribe;
    }
    return t;
}

size_t tu_recorder_count(tu_recorder *rec) {
    pthread_mutex_lock(&rec->mu);
    size_t n = rec->n_events;
    pthread_mutex_unlock(&rec->mu);
    return n;
}

char *tu_recorder_types(tu_recorder *rec) {
    pthread_mutex_lock(&rec->mu);
    size_t cap = 64, len = 0;
    char *out = malloc(cap);
    out[0] = '\0';
    char prev[64] = "";
    for (size_t i = 0; i < rec->n_events; i++) {
        char *ty = event_type(rec->events[i]);
        const char *name = ty ? ty : "?";
        char item[80];
        if (strcmp(name, "llm_text") == 0) {
            if (strcmp(prev, "llm_text") == 0) {
                free(ty);
                continue;
            }
            snprintf(item, sizeof item, "llm_text*");
        } else {
            snprintf(item, sizeof item, "%s", name);
        }
        snprintf(prev, sizeof prev, "%s", name);
        size_t need = len + strlen(item) + 2;
        if (need > cap) out = realloc(out, cap = need * 2);
        len += (size_t)sprintf(out + len, "%s%s", len ? "," : "", item);
        free(ty);
    }
    pthread_mutex_unlock(&rec->mu);
    return out;
}

char *tu_recorder_find(tu_recorder *rec, const char *type, int nth) {
    char *found = NULL;
    pthread_mutex_lock(&rec->mu);
    for (size_t i = 0; i < rec->n_events && !found; i++) {
        char *ty = event_type(rec->events[i]);
        if (ty && strcmp(ty, type) == 0 && nth-- == 0) found = strdup(rec->events[i]);
        free(ty);
    }
    pthread_mutex_unlock(&rec->mu);
    return found;
}

void tu_recorder_clear(tu_recorder *rec) {
    pthread_mutex_lock(&rec->mu);
    for (size_t i = 0; i < rec->n_events; i++) free(rec->events[i]);
    rec->n_events = 0;
    pthread_mutex_unlock(&rec->mu);
}

int tu_answer_confirm(tu_recorder *rec, int32_t confirmation, unsigned timeout_ms) {
    uint64_t end = tu_now_ms() + timeout_ms;
    agentao_reply *r;
    while (!(r = atomic_exchange(&rec->pending_reply, NULL))) {
        if (tu_now_ms() >= end) return -1;
        tu_sleep_ms(2);
    }
    return agentao_reply_confirm(r, confirmation, NULL);
}

/* ---- completions ----------------------------------------------------------------------- */

void tu_done_init(tu_done *d) {
    memset(d, 0, sizeof *d);
    atomic_store(&d->status, -1);
    pthread_mutex_init(&d->mu, NULL);
    d->deltas = strdup("");
}

void tu_done_destroy(tu_done *d) {
    free(d->outcome);
    free(d->message);
    free(d->deltas);
    pthread_mutex_destroy(&d->mu);
}

void tu_on_done(void *userdata, agentao_status status, const char *outcome_json,
                const struct agentao_error *err) {
    tu_done *d = userdata;
    pthread_mutex_lock(&d->mu);
    free(d->outcome);
    free(d->message);
    d->outcome = outcome_json ? strdup(outcome_json) : NULL;
    d->message = err ? strdup(agentao_error_message(err)) : NULL;
    d->at_ms = tu_now_ms();
    if (status == AGENTAO_STATUS_OK && err)
        tu_fail_at(__FILE__, __LINE__, "on_done: OK with an error object");
    if (status != AGENTAO_STATUS_OK && (!err || agentao_error_status(err) != status))
        tu_fail_at(__FILE__, __LINE__, "on_done: status %s without a matching error object",
                   agentao_status_name(status));
    pthread_mutex_unlock(&d->mu);
    atomic_store(&d->status, (int)status);
    atomic_fetch_add(&d->calls, 1);
}

void tu_never_done(void *userdata, agentao_status status, const char *outcome_json,
                   const struct agentao_error *err) {
    (void)userdata, (void)status, (void)outcome_json, (void)err;
    tu_fail_at(__FILE__, __LINE__, "on_done fired for a refused call");
}

void tu_on_delta(void *userdata, const char *delta_json) {
    tu_done *d = userdata;
    if (atomic_load(&d->calls)) atomic_fetch_add(&d->deltas_after_done, 1);
    pthread_mutex_lock(&d->mu);
    char *joined = tu_printf("%s%s\n", d->deltas, delta_json ? delta_json : "(null)");
    free(d->deltas);
    d->deltas = joined;
    pthread_mutex_unlock(&d->mu);
    atomic_fetch_add(&d->n_deltas, 1);
}
