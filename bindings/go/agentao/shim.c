#include "shim.h"

#include "_cgo_export.h"

/* Go's exported functions take non-const char *: the casts drop const only. */

static void tr_free(void *ud) { goAgentaoFreeHandle((uintptr_t)ud); }

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

static void tr_done(void *ud, agentao_status status, const char *outcome_json,
                    const agentao_error *err) {
    goAgentaoDone((uintptr_t)ud, (int32_t)status, (char *)outcome_json,
                  outcome_json ? strlen(outcome_json) : 0,
                  (char *)(err ? agentao_error_message(err) : NULL));
}

agentao_status agentao_go_run(agentao_agent *agent, const char *message, const agentao_image *images,
                              size_t n_images, int32_t max_iterations,
                              const agentao_cancel_token *cancel, uintptr_t handle,
                              agentao_error **err_out) {
    return agentao_agent_run_images(agent, message, images, n_images, max_iterations, cancel, tr_done,
                                    (void *)handle, err_out);
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

agentao_status agentao_go_stream_batch(agentao_stream *s, uint32_t timeout_ms, char *buf, size_t cap,
                                       size_t *used_out, char **big_out, agentao_error **err_out) {
    size_t used = 0;
    int n = 0;
    *big_out = NULL;
    for (;;) {
        char *item = NULL;
        agentao_status st = agentao_stream_next(s, n == 0 ? timeout_ms : 0, &item, err_out);
        if (st != AGENTAO_STATUS_OK) {
            if (n > 0 && st == AGENTAO_STATUS_TIMEOUT) {
                if (err_out) {
                    agentao_error_free(*err_out);
                    *err_out = NULL;
                }
                st = AGENTAO_STATUS_OK;
            }
            *used_out = used;
            return st;
        }
        size_t len = strlen(item);
        if (len > UINT32_MAX || cap - used < 4 + len) {
            *big_out = item;
            *used_out = used;
            return AGENTAO_STATUS_OK;
        }
        uint32_t len32 = (uint32_t)len;
        memcpy(buf + used, &len32, 4);
        memcpy(buf + used + 4, item, len);
        used += 4 + len;
        n++;
        agentao_string_free(item);
    }
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
    memset(&fs, 0, sizeof fs);
    fs.struct_size = sizeof fs;
    fs.userdata = (void *)handle;
    fs.userdata_free = tr_free;
    fs.read = tr_fs_read;
    fs.write = tr_fs_write;
    fs.list_dir = tr_fs_list;
    fs.walk = tr_fs_walk;
    fs.stat = tr_fs_stat;
    return agentao_agent_set_file_system(agent, &fs, err_out);
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
    memset(&sh, 0, sizeof sh);
    sh.struct_size = sizeof sh;
    sh.userdata = (void *)handle;
    sh.userdata_free = tr_free;
    sh.dialect = AGENTAO_SHELL_DIALECT_POSIX;
    sh.interpreter = interpreter;
    sh.run = tr_shell_run;
    if (background) sh.run_background = tr_shell_run_bg;
    return agentao_agent_set_shell_executor(agent, &sh, err_out);
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
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    m.userdata = (void *)handle;
    m.userdata_free = tr_free;
    m.upsert = tr_mem_upsert;
    m.list = tr_mem_list;
    if (with_get) m.get = tr_mem_get;
    if (with_search) m.search = tr_mem_search;
    return agentao_agent_set_memory_store(agent, &m, err_out);
}

static const char *tr_reg_list(void *ud) { return goAgentaoRegistryList((uintptr_t)ud); }
static void tr_reg_release(void *ud, const char *servers_json) {
    (void)ud;
    free((void *)servers_json);
}

agentao_status agentao_go_set_mcp_registry(agentao_agent *agent, uintptr_t handle, agentao_error **err_out) {
    agentao_mcp_registry r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.userdata = (void *)handle;
    r.userdata_free = tr_free;
    r.list_servers = tr_reg_list;
    r.release_servers = tr_reg_release;
    return agentao_agent_set_mcp_registry(agent, &r, err_out);
}

static void tr_compaction_decide(void *ud, const agentao_compaction_request *req, agentao_reply *reply) {
    goAgentaoCompactionDecide((uintptr_t)ud, (agentao_compaction_request *)req, reply);
}

agentao_status agentao_go_set_compaction_controller(agentao_agent *agent, uintptr_t handle,
                                                    agentao_error **err_out) {
    agentao_compaction_controller c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.userdata = (void *)handle;
    c.userdata_free = tr_free;
    c.decide = tr_compaction_decide;
    return agentao_agent_set_compaction_controller(agent, &c, err_out);
}

static void tr_hook(void *ud, const agentao_hook_request *req, agentao_reply *reply) {
    goAgentaoHook((uintptr_t)ud, (agentao_hook_request *)req, reply);
}

agentao_status agentao_go_set_hooks(agentao_agent *agent, uintptr_t handle, agentao_error **err_out) {
    agentao_hooks h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    h.userdata = (void *)handle;
    h.userdata_free = tr_free;
    h.on_hook = tr_hook;
    return agentao_agent_set_hooks(agent, &h, err_out);
}
