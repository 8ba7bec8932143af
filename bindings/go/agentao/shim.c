#include "shim.h"

#include "_cgo_export.h"

/* Go's exported functions take non-const char *: the casts drop const only. */

static void tr_free(void *ud) { goAgentaoFreeHandle((uintptr_t)ud); }

/* The members every capability vtable starts with: its size, the cgo.Handle as userdata and
 * its release; the callback slots are the setter's to fill. */
#define GO_VTABLE(v, handle)                    \
    do {                                        \
        memset(&(v), 0, sizeof(v));             \
        (v).struct_size = sizeof(v);            \
        (v).userdata = (void *)(handle);        \
        (v).userdata_free = tr_free;            \
    } while (0)

/* A capability asked through a deferred reply (the compaction controller, hooks): a
 * trampoline tr_<name> forwarding (request, reply) to the exported Go function `go_fn`, and
 * agentao_go_set_<name>, which fills the vtable's one `slot` with it; handle 0 removes the
 * capability (the library's setter gets NULL). */
#define GO_REQUEST_CAPABILITY(name, vtable_type, slot, request_type, go_fn)                          \
    static void tr_##name(void *ud, const request_type *req, agentao_reply *reply) {                \
        go_fn((uintptr_t)ud, (request_type *)req, reply);                                           \
    }                                                                                               \
    agentao_status agentao_go_set_##name(agentao_agent *agent, uintptr_t handle, agentao_error **err_out) { \
        vtable_type v;                                                                              \
        GO_VTABLE(v, handle);                                                                       \
        v.slot = tr_##name;                                                                         \
        return agentao_agent_set_##name(agent, handle ? &v : NULL, err_out);                        \
    }

static void tr_emit(void *ud, const char *event_json) {
    /* The length is taken here: a strlen called from Go would be a second cgo call per event. */
    goAgentaoEmit((uintptr_t)ud, (char *)event_json, strlen(event_json));
}

static void tr_confirm(void *ud, const char *tool, const char *description, const char *args_json,
                       const char *call_id, agentao_reply *reply) {
    goAgentaoConfirm((uintptr_t)ud, (char *)tool, (char *)description, (char *)args_json,
                     (char *)call_id, reply);
}

static void tr_ask(void *ud, const char *question, const char *hints_json, agentao_reply *reply) {
    goAgentaoAsk((uintptr_t)ud, (char *)question, (char *)hints_json, reply);
}

static void tr_max_iter(void *ud, uint32_t count, const char *pending_json, agentao_reply *reply) {
    goAgentaoMaxIterations((uintptr_t)ud, count, (char *)pending_json, reply);
}

static agentao_status tr_subscribe(void *ud, agentao_listener_fn listener, void *listener_userdata,
                                   uint64_t *subscription_out) {
    return (agentao_status)goAgentaoSubscribe((uintptr_t)ud, listener, listener_userdata,
                                              subscription_out);
}

static void tr_unsubscribe(void *ud, uint64_t subscription) {
    goAgentaoUnsubscribe((uintptr_t)ud, subscription);
}

agentao_transport agentao_go_transport(uintptr_t handle, int with_subscribe) {
    agentao_transport t = {0};
    t.struct_size = sizeof t;
    t.userdata = (void *)handle;
    t.userdata_free = tr_free;
    t.emit = tr_emit;
    t.confirm_tool = tr_confirm;
    t.ask_user = tr_ask;
    t.on_max_iterations = tr_max_iter;
    if (with_subscribe) {
        t.subscribe = tr_subscribe;
        t.unsubscribe = tr_unsubscribe;
    }
    return t;
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    agentao_status status;
    char *outcome, *message; /* copies; NULL when absent or out of memory */
} go_run_wait;

static void run_wait_done(void *ud, agentao_status status, const char *outcome, const agentao_error *err) {
    go_run_wait *w = ud;
    const char *message = err ? agentao_error_message(err) : NULL;
    char *o = outcome ? strdup(outcome) : NULL, *m = message ? strdup(message) : NULL;
    pthread_mutex_lock(&w->mu);
    w->status = status;
    w->outcome = o;
    w->message = m;
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

agentao_status agentao_go_run_wait(agentao_agent *agent, const char *message, const agentao_image *images,
                                   size_t n_images, int32_t max_iterations,
                                   const agentao_cancel_token *cancel, agentao_status *status_out,
                                   char **outcome_out, char **message_out, agentao_error **err_out) {
    go_run_wait w = {.done = 0};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    /* run_wait_done only copies and signals, so it may run inline on the runtime thread that
     * finished the turn (the hand-off variant): one thread wake-up less a turn. */
    agentao_status st = agentao_agent_run_handoff(agent, message, images, n_images, max_iterations, cancel,
                                                  run_wait_done, &w, err_out);
    if (st == AGENTAO_STATUS_OK) {
        /* on_done fires exactly once for an accepted call; w lives on this stack until then. */
        pthread_mutex_lock(&w.mu);
        while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        *status_out = w.status;
        *outcome_out = w.outcome;
        *message_out = w.message;
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return st;
}

static void tr_observe(void *ud, const char *event_json) {
    goAgentaoObserve((uintptr_t)ud, (char *)event_json, strlen(event_json));
}

agentao_status agentao_go_add_observer(agentao_agent *agent, uintptr_t handle, uint64_t *id_out,
                                       agentao_error **err_out) {
    return agentao_agent_add_host_event_observer(agent, tr_observe, (void *)handle, tr_free, id_out,
                                                 err_out);
}

static void tr_cancelled(void *ud, const char *reason) {
    (void)reason;
    goAgentaoCancelled((uintptr_t)ud);
}

agentao_status agentao_go_watch(const agentao_cancel_token *token, uintptr_t handle, uint64_t *id_out,
                                agentao_error **err_out) {
    return agentao_cancel_token_watch(token, tr_cancelled, (void *)handle, tr_free, id_out, err_out);
}

void agentao_go_call_listener(agentao_listener_fn fn, void *listener_userdata, const char *event_json) {
    fn(listener_userdata, event_json);
}

/* The queue's bound: a reader that falls behind by this much makes the turn wait (a larger
 * single delta still goes in when the queue is empty), so nothing is dropped and memory stays
 * bounded. */
#define GO_STREAM_QUEUE_BYTES (64u << 10)

struct agentao_go_stream {
    pthread_mutex_t mu;
    pthread_cond_t ready; /* deltas queued or the turn ended */
    pthread_cond_t room;  /* the reader took deltas or stopped reading */
    char *q;              /* [uint32 length][bytes] ... */
    size_t len, cap, head; /* q[head..len) is unread */
    int reader_waiting, writer_waiting, done, abandoned;
    agentao_status status;
    char *outcome, *message;
};

static char *dup_or_null(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void go_stream_delta(void *ud, const char *delta_json) {
    agentao_go_stream *s = ud;
    size_t n = strlen(delta_json);
    if (n > UINT32_MAX - 4) return;
    pthread_mutex_lock(&s->mu);
    while (!s->abandoned && s->len > s->head && s->len - s->head + 4 + n > GO_STREAM_QUEUE_BYTES) {
        s->writer_waiting = 1;
        pthread_cond_wait(&s->room, &s->mu);
    }
    if (s->abandoned) goto out;
    if (s->head == s->len) s->head = s->len = 0;
    if (s->cap - s->len < 4 + n && s->head > 0) {
        /* The unread part moves to the front before the queue grows. */
        memmove(s->q, s->q + s->head, s->len - s->head);
        s->len -= s->head;
        s->head = 0;
    }
    if (s->cap - s->len < 4 + n) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap - s->len < 4 + n) cap *= 2;
        char *q = realloc(s->q, cap);
        if (!q) goto out; /* out of memory: this delta is lost for display, the turn goes on */
        s->q = q;
        s->cap = cap;
    }
    uint32_t n32 = (uint32_t)n;
    memcpy(s->q + s->len, &n32, 4);
    memcpy(s->q + s->len + 4, delta_json, n);
    s->len += 4 + n;
    if (s->reader_waiting) pthread_cond_signal(&s->ready);
out:
    pthread_mutex_unlock(&s->mu);
}

static void go_stream_done(void *ud, agentao_status status, const char *outcome_json, const agentao_error *err) {
    agentao_go_stream *s = ud;
    pthread_mutex_lock(&s->mu);
    s->status = status;
    s->outcome = dup_or_null(outcome_json);
    s->message = status != AGENTAO_STATUS_OK && err ? dup_or_null(agentao_error_message(err)) : NULL;
    s->done = 1;
    pthread_cond_broadcast(&s->ready);
    pthread_mutex_unlock(&s->mu);
}

static void go_stream_release(agentao_go_stream *s) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->ready);
    pthread_cond_destroy(&s->room);
    free(s->q);
    free(s->outcome);
    free(s->message);
    free(s);
}

agentao_status agentao_go_stream_start(agentao_agent *agent, const char *message, const agentao_image *images,
                                       size_t n_images, int32_t max_iterations,
                                       const agentao_cancel_token *cancel, agentao_go_stream **stream_out,
                                       agentao_error **err_out) {
    *stream_out = NULL;
    agentao_go_stream *s = calloc(1, sizeof *s);
    if (!s) return AGENTAO_STATUS_INTERNAL;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->ready, NULL);
    pthread_cond_init(&s->room, NULL);
    agentao_status st = agentao_agent_stream_images(agent, message, images, n_images, max_iterations, cancel,
                                                    go_stream_delta, go_stream_done, s, err_out);
    if (st != AGENTAO_STATUS_OK) {
        go_stream_release(s); /* refused: on_done will not fire */
        return st;
    }
    *stream_out = s;
    return st;
}

int agentao_go_stream_take(agentao_go_stream *s, char *buf, size_t cap, size_t *used_out, char **big_out,
                           agentao_status *status_out, char **outcome_out, char **message_out) {
    size_t used = 0;
    *big_out = NULL;
    pthread_mutex_lock(&s->mu);
    while (s->head == s->len && !s->done) {
        s->reader_waiting = 1;
        pthread_cond_wait(&s->ready, &s->mu);
        s->reader_waiting = 0;
    }
    while (s->head < s->len) {
        uint32_t n;
        memcpy(&n, s->q + s->head, 4);
        if (used + 4 + n > cap) {
            if (used == 0) {
                char *big = malloc((size_t)n + 1);
                if (big) {
                    memcpy(big, s->q + s->head + 4, n);
                    big[n] = 0;
                }
                *big_out = big;
                s->head += 4 + (size_t)n;
            }
            break;
        }
        memcpy(buf + used, s->q + s->head, 4 + (size_t)n);
        used += 4 + (size_t)n;
        s->head += 4 + (size_t)n;
    }
    if (s->writer_waiting) {
        s->writer_waiting = 0;
        pthread_cond_signal(&s->room);
    }
    int ended = s->done && s->head == s->len && !*big_out;
    if (ended) {
        *status_out = s->status;
        *outcome_out = s->outcome;
        *message_out = s->message;
        s->outcome = s->message = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    *used_out = used;
    return ended;
}

void agentao_go_stream_free(agentao_go_stream *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->abandoned = 1;
    pthread_cond_broadcast(&s->room);
    while (!s->done) pthread_cond_wait(&s->ready, &s->mu);
    pthread_mutex_unlock(&s->mu);
    go_stream_release(s);
}

agentao_status agentao_go_chat(agentao_agent *agent, const char *message, size_t message_len,
                               const agentao_image *images, size_t n_images, int32_t max_iterations,
                               const agentao_cancel_token *cancel, char **text_out,
                               agentao_error **err_out) {
    /* A short message is copied to the stack: no allocation on the common path. */
    char small[512];
    char *msg = message_len < sizeof small ? small : malloc(message_len + 1);
    if (!msg) return AGENTAO_STATUS_INTERNAL;
    if (message_len) memcpy(msg, message, message_len);
    msg[message_len] = 0;
    agentao_status st =
        n_images ? agentao_agent_chat_images(agent, msg, images, n_images, max_iterations, cancel, text_out, err_out)
                 : agentao_agent_chat(agent, msg, max_iterations, cancel, text_out, err_out);
    if (msg != small) free(msg);
    if (st == AGENTAO_STATUS_OK && err_out) {
        agentao_error_free(*err_out);
        *err_out = NULL;
    }
    return st;
}

void agentao_go_free2(char *a, char *b) {
    free(a);
    free(b);
}

void agentao_go_turn_end(agentao_cancel_token *token, char *message, char *text) {
    agentao_cancel_token_free(token);
    free(message);
    agentao_string_free(text);
}

static void tr_tool_execute(void *ud, const char *args_json, const agentao_tool_call *call,
                            agentao_reply *reply) {
    goAgentaoToolExecute((uintptr_t)ud, (char *)args_json, (agentao_tool_call *)call, reply);
}

agentao_status agentao_go_add_tool(agentao_agent *agent, const char *name, const char *description,
                                   const char *parameters_json, int flags, uintptr_t handle,
                                   bool replace, agentao_error **err_out) {
    agentao_tool_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.name = name;
    d.description = description;
    d.parameters_json = parameters_json;
    d.is_read_only = (flags & AGENTAO_GO_TOOL_READ_ONLY) != 0;
    d.requires_confirmation = (flags & AGENTAO_GO_TOOL_CONFIRM) != 0;
    d.copies_to_subagents = (flags & AGENTAO_GO_TOOL_SUBAGENTS) != 0;
    d.reentrant = (flags & AGENTAO_GO_TOOL_REENTRANT) != 0;
    d.userdata = (void *)handle;
    d.userdata_free = tr_free;
    d.execute = tr_tool_execute;
    return agentao_agent_add_tool(agent, &d, replace, err_out);
}

static int32_t tr_fs_read(void *ud, const char *path, uint64_t max_bytes, agentao_fs_out *out) {
    return goAgentaoFsRead((uintptr_t)ud, (char *)path, max_bytes, out);
}
static int32_t tr_fs_write(void *ud, const char *path, const uint8_t *data, size_t len, bool append) {
    return goAgentaoFsWrite((uintptr_t)ud, (char *)path, (uint8_t *)data, len, append);
}
static int32_t tr_fs_list(void *ud, const char *path, agentao_fs_out *out) {
    return goAgentaoFsListDir((uintptr_t)ud, (char *)path, out);
}
static int32_t tr_fs_walk(void *ud, const char *base, int32_t max_depth, agentao_fs_out *out) {
    return goAgentaoFsWalk((uintptr_t)ud, (char *)base, max_depth, out);
}
static int32_t tr_fs_stat(void *ud, const char *path, agentao_fs_out *out) {
    return goAgentaoFsStat((uintptr_t)ud, (char *)path, out);
}

agentao_status agentao_go_set_file_system(agentao_agent *agent, uintptr_t handle, agentao_error **err_out) {
    agentao_file_system fs;
    GO_VTABLE(fs, handle);
    fs.read = tr_fs_read;
    fs.write = tr_fs_write;
    fs.list_dir = tr_fs_list;
    fs.walk = tr_fs_walk;
    fs.stat = tr_fs_stat;
    return agentao_agent_set_file_system(agent, handle ? &fs : NULL, err_out);
}

static void tr_shell_run(void *ud, const agentao_shell_request *req, agentao_shell_run *run) {
    goAgentaoShellRun((uintptr_t)ud, (agentao_shell_request *)req, run, 0);
}
static void tr_shell_run_bg(void *ud, const agentao_shell_request *req, agentao_shell_run *run) {
    goAgentaoShellRun((uintptr_t)ud, (agentao_shell_request *)req, run, 1);
}

agentao_status agentao_go_set_shell_executor(agentao_agent *agent, uintptr_t handle, const char *interpreter,
                                             int background, agentao_error **err_out) {
    agentao_shell_executor sh;
    GO_VTABLE(sh, handle);
    sh.dialect = AGENTAO_SHELL_DIALECT_POSIX;
    sh.interpreter = interpreter;
    sh.run = tr_shell_run;
    if (background) sh.run_background = tr_shell_run_bg;
    return agentao_agent_set_shell_executor(agent, handle ? &sh : NULL, err_out);
}

static void tr_mem_upsert(void *ud, const char *record_json, agentao_memory_answer *answer) {
    goAgentaoMemory((uintptr_t)ud, 0, (char *)record_json, NULL, answer);
}
static void tr_mem_list(void *ud, const char *scope, agentao_memory_answer *answer) {
    goAgentaoMemory((uintptr_t)ud, 1, (char *)scope, NULL, answer);
}
static void tr_mem_get(void *ud, const char *scope, const char *key, agentao_memory_answer *answer) {
    goAgentaoMemory((uintptr_t)ud, 2, (char *)scope, (char *)key, answer);
}
static void tr_mem_search(void *ud, const char *query, const char *scope, agentao_memory_answer *answer) {
    goAgentaoMemory((uintptr_t)ud, 3, (char *)query, (char *)scope, answer);
}

agentao_status agentao_go_set_memory_store(agentao_agent *agent, uintptr_t handle, int with_get,
                                           int with_search, agentao_error **err_out) {
    agentao_memory_store m;
    GO_VTABLE(m, handle);
    m.upsert = tr_mem_upsert;
    m.list = tr_mem_list;
    if (with_get) m.get = tr_mem_get;
    if (with_search) m.search = tr_mem_search;
    return agentao_agent_set_memory_store(agent, handle ? &m : NULL, err_out);
}

static const char *tr_reg_list(void *ud) { return goAgentaoRegistryList((uintptr_t)ud); }
static void tr_reg_release(void *ud, const char *servers_json) {
    (void)ud;
    free((void *)servers_json);
}

agentao_status agentao_go_set_mcp_registry(agentao_agent *agent, uintptr_t handle, agentao_error **err_out) {
    agentao_mcp_registry r;
    GO_VTABLE(r, handle);
    r.list_servers = tr_reg_list;
    r.release_servers = tr_reg_release;
    return agentao_agent_set_mcp_registry(agent, handle ? &r : NULL, err_out);
}

GO_REQUEST_CAPABILITY(compaction_controller, agentao_compaction_controller, decide, agentao_compaction_request,
                      goAgentaoCompactionDecide)

GO_REQUEST_CAPABILITY(hooks, agentao_hooks, on_hook, agentao_hook_request, goAgentaoHook)
