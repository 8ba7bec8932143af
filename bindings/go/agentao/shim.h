/* C side of the Go binding: one trampoline per callback slot. Userdata is a cgo.Handle (an
 * integer), never a Go pointer, so no Go memory is ever kept by the library. */
#ifndef AGENTAO_GO_SHIM_H
#define AGENTAO_GO_SHIM_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentao.h"

/* A transport vtable whose slots call the binding's exported Go functions with `handle`.
 * `with_subscribe` fills subscribe/unsubscribe (the Go transport implements Subscriber). */
agentao_transport agentao_go_transport(uintptr_t handle, int with_subscribe);

/* agentao_agent_run_images (no images: n_images 0) with the binding's completion trampoline. */
agentao_status agentao_go_run(agentao_agent *agent, const char *message, const agentao_image *images,
                              size_t n_images, int32_t max_iterations,
                              const agentao_cancel_token *cancel, uintptr_t handle,
                              agentao_error **err_out);

/* agentao_agent_add_host_event_observer with the binding's observer trampolines. */
agentao_status agentao_go_add_observer(agentao_agent *agent, uintptr_t handle, uint64_t *id_out,
                                       agentao_error **err_out);

/* agentao_cancel_token_watch with the binding's trampolines: goAgentaoCancelled(handle) once
 * the token is cancelled; the handle is deleted by userdata_free. */
agentao_status agentao_go_watch(const agentao_cancel_token *token, uintptr_t handle, uint64_t *id_out,
                                agentao_error **err_out);

/* Calls a listener a transport's subscribe received. */
void agentao_go_call_listener(agentao_listener_fn fn, void *listener_userdata, const char *event_json);


/* Reads a batch of a pull stream in one call: waits up to timeout_ms for the first item, then
 * takes whatever is ready without waiting. Items are copied to buf as [uint32 length][bytes]
 * (and released); an item that does not fit in the room left ends the batch and is handed over
 * in *big_out (release with agentao_string_free). Returns OK when items were read (a later
 * TIMEOUT ends the batch quietly), or the status that ended the batch: the items before it come
 * first. */
agentao_status agentao_go_stream_batch(agentao_stream *s, uint32_t timeout_ms, char *buf, size_t cap,
                                       size_t *used_out, char **big_out, agentao_error **err_out);

/* agentao_agent_add_tool with the binding's execute trampoline; userdata is `handle`. */
agentao_status agentao_go_add_tool(agentao_agent *agent, const char *name, const char *description,
                                   const char *parameters_json, int flags, uintptr_t handle,
                                   bool replace, agentao_error **err_out);
/* Flags of agentao_go_add_tool. */
enum { AGENTAO_GO_TOOL_READ_ONLY = 1, AGENTAO_GO_TOOL_CONFIRM = 2, AGENTAO_GO_TOOL_SUBAGENTS = 4,
       AGENTAO_GO_TOOL_REENTRANT = 8 };

/* agentao_agent_set_file_system with every slot but `exists` (asked through `stat`) calling the binding. */
agentao_status agentao_go_set_file_system(agentao_agent *agent, uintptr_t handle, agentao_error **err_out);

/* agentao_agent_set_shell_executor (POSIX); `background` fills run_background. */
agentao_status agentao_go_set_shell_executor(agentao_agent *agent, uintptr_t handle, const char *interpreter,
                                             int background, agentao_error **err_out);

/* agentao_agent_set_memory_store; `with_get` / `with_search` fill the optional slots. */
agentao_status agentao_go_set_memory_store(agentao_agent *agent, uintptr_t handle, int with_get,
                                           int with_search, agentao_error **err_out);

/* agentao_agent_set_mcp_registry; list_servers returns a malloc'd string (or NULL), which
 * release_servers frees. */
agentao_status agentao_go_set_mcp_registry(agentao_agent *agent, uintptr_t handle, agentao_error **err_out);

/* agentao_agent_set_compaction_controller with the binding's decide trampoline. */
agentao_status agentao_go_set_compaction_controller(agentao_agent *agent, uintptr_t handle,
                                                    agentao_error **err_out);

/* agentao_agent_set_hooks with the binding's on_hook trampoline. */
agentao_status agentao_go_set_hooks(agentao_agent *agent, uintptr_t handle, agentao_error **err_out);
#endif
