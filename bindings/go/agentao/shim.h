/* C side of the Go binding: one trampoline per callback slot. Userdata is a cgo.Handle (an
 * integer), never a Go pointer, so no Go memory is ever kept by the library. */
#ifndef AGENTAO_GO_SHIM_H
#define AGENTAO_GO_SHIM_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentao.h"

/* A transport vtable whose slots call the binding's exported Go functions with `handle`.
 * `with_subscribe` fills subscribe/unsubscribe (the Go transport implements Subscriber). */
agentao_transport agentao_go_transport(uintptr_t handle, int with_subscribe);

/* agentao_agent_add_host_event_observer with the binding's observer trampolines. */
agentao_status agentao_go_add_observer(agentao_agent *agent, uintptr_t handle, uint64_t *id_out,
                                       agentao_error **err_out);

/* agentao_cancel_token_watch with the binding's trampolines: goAgentaoCancelled(handle) once
 * the token is cancelled; the handle is deleted by userdata_free. */
agentao_status agentao_go_watch(const agentao_cancel_token *token, uintptr_t handle, uint64_t *id_out,
                                agentao_error **err_out);

/* Calls a listener a transport's subscribe received. */
void agentao_go_call_listener(agentao_listener_fn fn, void *listener_userdata, const char *event_json);


/* A streamed turn for Agent.Stream: the library's push callback (agentao_agent_stream_images,
 * on a library thread) appends each delta to a bounded queue, and one cgo call takes every
 * delta queued since the last. The pull stream (agentao_stream_next) hands over one item per
 * wake-up: most of a delta's cost in Go was that hand-over, not the crossing. */
typedef struct agentao_go_stream agentao_go_stream;

/* Starts the turn (arguments as agentao_agent_stream_images). On failure nothing is started
 * and *stream_out stays NULL. */
agentao_status agentao_go_stream_start(agentao_agent *agent, const char *message, const agentao_image *images,
                                       size_t n_images, int32_t max_iterations,
                                       const agentao_cancel_token *cancel, agentao_go_stream **stream_out,
                                       agentao_error **err_out);

/* Waits until deltas are queued or the turn has ended, then copies the queued deltas that fit
 * in buf as [uint32 length][bytes]; a first delta larger than cap is handed over in *big_out
 * (release with free). Returns 1 once the turn has ended and every delta was taken; then
 * *status_out is its status and *outcome_out (its TurnOutcome JSON, may be NULL) and
 * *message_out (the error's message, NULL on success) are the caller's to free. */
int agentao_go_stream_take(agentao_go_stream *s, char *buf, size_t cap, size_t *used_out, char **big_out,
                           agentao_status *status_out, char **outcome_out, char **message_out);

/* Stops reading (deltas still coming are dropped; cancel the turn's token first to end it
 * early), waits for the turn's end and releases the stream. */
void agentao_go_stream_free(agentao_go_stream *s);

/* agentao_agent_chat(_images) in one cgo call: the message arrives as bytes (a Go string,
 * copied here with the NUL the C API needs), and an OK call's error slot is released here.
 * The answer is handed out as it is: the caller releases it with agentao_go_turn_end. */
agentao_status agentao_go_chat(agentao_agent *agent, const char *message, size_t message_len,
                               const agentao_image *images, size_t n_images, int32_t max_iterations,
                               const agentao_cancel_token *cancel, char **text_out,
                               agentao_error **err_out);

/* agentao_agent_run_handoff, waited for in C: one blocking cgo call for the whole turn (a
 * completion callback into Go, then a goroutine's wake-up, cost ~20 us more a turn). On OK the
 * turn ran: its status, outcome JSON (NULL: none) and error message (NULL: none) are handed out,
 * the two strings for agentao_go_free2. Another status: the call was not accepted. */
agentao_status agentao_go_run_wait(agentao_agent *agent, const char *message, const agentao_image *images,
                                   size_t n_images, int32_t max_iterations,
                                   const agentao_cancel_token *cancel, agentao_status *status_out,
                                   char **outcome_out, char **message_out, agentao_error **err_out);

/* free(a) and free(b) in one cgo call. */
void agentao_go_free2(char *a, char *b);

/* A turn's end in one cgo call: releases its token, its C message and its answer (each may be
 * NULL). */
void agentao_go_turn_end(agentao_cancel_token *token, char *message, char *text);

/* agentao_agent_add_tool with the binding's execute trampoline; userdata is `handle`. */
agentao_status agentao_go_add_tool(agentao_agent *agent, const char *name, const char *description,
                                   const char *parameters_json, int flags, uintptr_t handle,
                                   bool replace, agentao_error **err_out);
/* Flags of agentao_go_add_tool. */
enum { AGENTAO_GO_TOOL_READ_ONLY = 1, AGENTAO_GO_TOOL_CONFIRM = 2, AGENTAO_GO_TOOL_SUBAGENTS = 4,
       AGENTAO_GO_TOOL_REENTRANT = 8 };

/* The capability setters below take the Go value's cgo.Handle, which the library owns from the
 * call on (userdata_free deletes it, on failure too); handle 0 removes the capability (the
 * library's setter gets NULL). */

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
