package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"runtime/cgo"
	"sync"
)

// ToolSpec describes a host tool (agentao_tool_desc).
type ToolSpec struct {
	// Name is what the model calls: not empty, not starting with "mcp_".
	Name string
	// Description is sent to the model, and to ConfirmTool.
	Description string
	// Parameters is the arguments' JSON Schema, a JSON object: a string, []byte,
	// json.RawMessage or any value encoding/json marshals. nil: no arguments.
	Parameters any
	// ReadOnly admits the tool in read-only mode and in parallel batches.
	ReadOnly bool
	// RequiresConfirmation asks ConfirmTool first when no rule decides the call.
	RequiresConfirmation bool
	// CopiesToSubagents gives the tool to sub-agents too.
	CopiesToSubagents bool
	// Reentrant lets two calls of the tool in one batch run at the same time.
	Reentrant bool
	// Replace lets the tool replace one with the same name (a built-in or a host tool).
	Replace bool
}

// ToolCall is one call of a host tool.
type ToolCall struct {
	// ID is the model's tool_call_id.
	ID string
	// Args is the arguments object.
	Args  json.RawMessage
	state *callState
}

// Output streams chunk as a tool_output event of the call. After the call has ended
// (answered or cancelled) it returns an error matching StatusClosed and drops the chunk.
func (c ToolCall) Output(chunk string) error {
	s := c.state
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.call == nil {
		return &Error{Status: StatusClosed, Message: "the tool call has been answered"}
	}
	cs := C.CString(sanitize(chunk))
	defer freeC(cs)
	var cerr *C.agentao_error
	return statusErr(C.agentao_tool_call_output(s.call, cs, &cerr), cerr)
}

// ToolError is an error a ToolFunc returns to choose the error type the host event reports
// (any other error is a HostToolError). The model reads "Error executing <tool>: <Message>".
type ToolError struct {
	Type    string
	Message string
}

func (e *ToolError) Error() string { return e.Type + ": " + e.Message }

// ToolFunc runs one call and returns its result text, or an error the model reads as the
// tool's failure. ctx is cancelled (cause ErrTurnCancelled) when the turn is cancelled: the
// call is then over and its answer ignored. A panic becomes the tool's error. It runs on a
// library thread; blocking is fine.
type ToolFunc func(ctx context.Context, call ToolCall) (string, error)

// AsyncToolFunc starts one call and answers reply now or later, from any goroutine. A panic
// before the reply is answered fails the call with the panic's message.
type AsyncToolFunc func(ctx context.Context, call ToolCall, reply *ToolReply)

// callState is what a ToolCall and its ToolReply share: the library's handles, valid until
// the reply is answered (mu orders Output before the answer).
type callState struct {
	mu    sync.Mutex
	call  *C.agentao_tool_call // nil once answered
	reply *C.agentao_reply
	stop  func()
}

// ToolReply is the pending answer of one call: answer it exactly once with Result or Fail.
// One that is garbage collected unanswered fails the call.
type ToolReply struct{ s *callState }

func (r *ToolReply) take() *C.agentao_reply {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.reply
	if p != nil {
		s.reply, s.call = nil, nil
		s.stop()
	}
	return p
}

// Result answers with the call's result text.
func (r *ToolReply) Result(text string) error {
	return answerText(r.take(), text, func(p *C.agentao_reply, t *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_reply_tool_result(p, t, e)
	})
}

// Fail answers with a failure; errType "" means HostToolError.
func (r *ToolReply) Fail(errType, message string) error {
	p := r.take()
	if p == nil {
		return ErrAnswered
	}
	var ct *C.char
	if errType != "" {
		ct = C.CString(sanitize(errType))
		defer freeC(ct)
	}
	cm := C.CString(sanitize(message))
	defer freeC(cm)
	var cerr *C.agentao_error
	return statusErr(C.agentao_reply_tool_error(p, ct, cm, &cerr), cerr)
}

// Answered reports whether the reply has been answered.
func (r *ToolReply) Answered() bool {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.s.reply == nil
}

func finalizeToolReply(r *ToolReply) {
	_ = r.Fail("", "the host dropped the tool call without answering it")
}

// toolBox is what a host tool's cgo.Handle holds.
type toolBox struct {
	name string
	fn   AsyncToolFunc
}

func syncTool(fn ToolFunc) AsyncToolFunc {
	return func(ctx context.Context, call ToolCall, reply *ToolReply) {
		text, err := fn(ctx, call)
		if err == nil {
			_ = reply.Result(text)
			return
		}
		var te *ToolError
		if errors.As(err, &te) {
			_ = reply.Fail(te.Type, te.Message)
		} else {
			_ = reply.Fail("", err.Error())
		}
	}
}

//export goAgentaoToolExecute
func goAgentaoToolExecute(h C.uintptr_t, argsJSON *C.char, call *C.agentao_tool_call, p *C.agentao_reply) {
	box := cgo.Handle(h).Value().(*toolBox)
	s := &callState{call: call, reply: p}
	ctx, stop := watchToken(C.agentao_tool_call_cancel_token(call))
	s.stop = stop
	r := &ToolReply{s: s}
	defer func() {
		if v := recover(); v != nil {
			_ = r.Fail("", panicMessage("tool "+box.name, v))
		}
	}()
	runtime.SetFinalizer(r, finalizeToolReply)
	box.fn(ctx, ToolCall{ID: C.GoString(C.agentao_tool_call_id(call)), Args: json.RawMessage(C.GoString(argsJSON)), state: s}, r)
}

// AddTool registers a host tool whose fn answers synchronously; the model is offered it from
// the next turn on. Between turns only (StatusTurnInProgress). A name in use is
// StatusInvalidArgument unless spec.Replace.
func (a *Agent) AddTool(spec ToolSpec, fn ToolFunc) error {
	if fn == nil {
		return &Error{Status: StatusNullArgument, Message: "the tool function is nil"}
	}
	return a.addTool(spec, syncTool(fn))
}

// AddAsyncTool registers a host tool whose fn answers its ToolReply now or later.
func (a *Agent) AddAsyncTool(spec ToolSpec, fn AsyncToolFunc) error {
	if fn == nil {
		return &Error{Status: StatusNullArgument, Message: "the tool function is nil"}
	}
	return a.addTool(spec, fn)
}

func (a *Agent) addTool(spec ToolSpec, fn AsyncToolFunc) error {
	params := `{"type":"object","properties":{}}`
	if spec.Parameters != nil {
		var err error
		if params, err = jsonText(spec.Parameters); err != nil {
			return err
		}
	}
	var cs [3]*C.char
	for i, s := range []string{spec.Name, spec.Description, params} {
		c, err := cstring(s)
		if err != nil {
			return err
		}
		cs[i] = c
		defer freeC(c)
	}
	flags := C.int(0)
	for _, f := range []struct {
		on   bool
		flag C.int
	}{{spec.ReadOnly, C.AGENTAO_GO_TOOL_READ_ONLY}, {spec.RequiresConfirmation, C.AGENTAO_GO_TOOL_CONFIRM},
		{spec.CopiesToSubagents, C.AGENTAO_GO_TOOL_SUBAGENTS}, {spec.Reentrant, C.AGENTAO_GO_TOOL_REENTRANT}} {
		if f.on {
			flags |= f.flag
		}
	}
	ptr, err := a.acquire()
	if err != nil {
		return err
	}
	defer a.release()
	h := newHandle(&toolBox{name: spec.Name, fn: fn})
	var cerr *C.agentao_error
	// The library owns the handle from here: userdata_free deletes it, on failure too.
	return statusErr(C.agentao_go_add_tool(ptr, cs[0], cs[1], cs[2], flags, h, C.bool(spec.Replace), &cerr), cerr)
}

// RemoveTool removes the tool called name (a host tool or a built-in), between turns; false
// when there was none.
func (a *Agent) RemoveTool(name string) (bool, error) {
	var removed C.bool
	err := a.withString(name, func(p *C.agentao_agent, s *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_remove_tool(p, s, &removed, e)
	})
	return bool(removed), err
}
