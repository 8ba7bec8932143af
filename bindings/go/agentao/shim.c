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

agentao_status agentao_go_run(agentao_agent *agent, const char *message, int32_t max_iterations,
                              const agentao_cancel_token *cancel, uintptr_t handle,
                              agentao_error **err_out) {
    return agentao_agent_run(agent, message, max_iterations, cancel, tr_done, (void *)handle, err_out);
}

static void tr_observe(void *ud, const char *event_json) {
    goAgentaoObserve((uintptr_t)ud, (char *)event_json, strlen(event_json));
}

agentao_status agentao_go_add_observer(agentao_agent *agent, uintptr_t handle, uint64_t *id_out,
                                       agentao_error **err_out) {
    return agentao_agent_add_host_event_observer(agent, tr_observe, (void *)handle, tr_free, id_out,
                                                 err_out);
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
