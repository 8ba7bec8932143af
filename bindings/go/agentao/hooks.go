package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"runtime/cgo"
)

// HookEvent is a point of the agent loop where hooks run (Claude Code's hook event names).
type HookEvent int32

const (
	HookPreToolUse         HookEvent = C.AGENTAO_HOOK_EVENT_PRE_TOOL_USE
	HookPostToolUse        HookEvent = C.AGENTAO_HOOK_EVENT_POST_TOOL_USE
	HookPostToolUseFailure HookEvent = C.AGENTAO_HOOK_EVENT_POST_TOOL_USE_FAILURE
	HookUserPromptSubmit   HookEvent = C.AGENTAO_HOOK_EVENT_USER_PROMPT_SUBMIT
	HookStop               HookEvent = C.AGENTAO_HOOK_EVENT_STOP
	HookSessionStart       HookEvent = C.AGENTAO_HOOK_EVENT_SESSION_START
	HookPreCompact         HookEvent = C.AGENTAO_HOOK_EVENT_PRE_COMPACT
)

// HookRequest is one hook point the host is asked about.
type HookRequest struct {
	Event HookEvent
	// ToolName and CallID are set at the tool points.
	ToolName string
	CallID   string
	// Input is what a command hook reads on stdin (Claude Code's format).
	Input json.RawMessage
}

// HookReply answers a hook exactly once, inside the call or later from any goroutine, with the
// JSON output a command hook prints (docs/hooks.md). One that becomes unreachable unanswered is
// failed by its finalizer, which at PreToolUse denies the call.
type HookReply struct{ reply }

// Output answers with output, a JSON object in Claude Code's hook output format; "" means no
// opinion. Output that is not the protocol is refused (StatusInvalidArgument) and the request
// is failed.
func (r *HookReply) Output(output string) error {
	if output == "" {
		return answer(r.take(), func(p *C.agentao_reply, e **C.agentao_error) C.agentao_status {
			return C.agentao_reply_hook(p, nil, e)
		})
	}
	return answerText(r.take(), output, func(p *C.agentao_reply, t *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_reply_hook(p, t, e)
	})
}

// Deny answers a PreToolUse hook: the call is refused, and the model reads reason.
func (r *HookReply) Deny(reason string) error {
	b, _ := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason}})
	return r.Output(string(b))
}

// AddContext answers with context for the model (after a call, or with the user's prompt).
func (r *HookReply) AddContext(context string) error {
	b, _ := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{"additionalContext": context}})
	return r.Output(string(b))
}

// Hooks is asked at every hook point of every turn, after the config's command hooks, and is
// combined with them (deny > ask > allow). It runs on a library thread; a panic before the
// reply is answered fails it, which at PreToolUse denies the call.
type Hooks func(req HookRequest, reply *HookReply)

// SetHooks installs fn, or with nil removes the host's hooks (the config's command hooks
// still run). Between turns only (StatusTurnInProgress).
func (a *Agent) SetHooks(fn Hooks) error {
	return a.setCapability(fn != nil, fn, func(p *C.agentao_agent, h C.uintptr_t, e **C.agentao_error) C.agentao_status {
		return C.agentao_go_set_hooks(p, h, e)
	})
}

//export goAgentaoHook
func goAgentaoHook(h C.uintptr_t, req *C.agentao_hook_request, p *C.agentao_reply) {
	serveRequest(p, "hooks", func(r *HookReply) {
		q := HookRequest{
			Event: HookEvent(req.event),
			Input: json.RawMessage(C.GoString(req.input_json)),
		}
		if req.tool_name != nil {
			q.ToolName = C.GoString(req.tool_name)
		}
		if req.call_id != nil {
			q.CallID = C.GoString(req.call_id)
		}
		cgo.Handle(h).Value().(Hooks)(q, r)
	})
}
