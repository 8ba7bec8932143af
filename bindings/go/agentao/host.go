package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"runtime/cgo"
	"sync/atomic"
	"unsafe"
)

// The functions the C trampolines of shim.c call. Each recovers a panic of host code into the
// documented failure: no Go panic ever unwinds into the library.

// liveHandles counts the cgo.Handles the library still holds (tests check it drops to zero).
var liveHandles atomic.Int64

func newHandle(v any) C.uintptr_t {
	liveHandles.Add(1)
	return C.uintptr_t(cgo.NewHandle(v))
}

// transportBox is what a transport's cgo.Handle holds.
type transportBox struct {
	t   Transport
	sub Subscriber
}

//export goAgentaoFreeHandle
func goAgentaoFreeHandle(h C.uintptr_t) {
	cgo.Handle(h).Delete()
	liveHandles.Add(-1)
}

//export goAgentaoEmit
func goAgentaoEmit(h C.uintptr_t, eventJSON *C.char, n C.size_t) {
	defer func() { _ = recover() }() // a panicking EmitEvent loses that event
	box := cgo.Handle(h).Value().(*transportBox)
	box.t.EmitEvent(parseEvent(C.GoBytes(unsafe.Pointer(eventJSON), C.int(n))))
}

// parseEvent reads the envelope the library writes, {"type":"T","schema_version":1,"data":D},
// without a JSON decoder, and falls back to one for anything else. It owns b: Data is a
// slice of it, so an event costs one copy out of C (a streamed delta's event is the hot case).
func parseEvent(b []byte) Event {
	const pre, mid = `{"type":"`, `","schema_version":1,"data":`
	if len(b) > len(pre)+len(mid)+1 && string(b[:len(pre)]) == pre && b[len(b)-1] == '}' {
		rest := b[len(pre):]
		for i := 0; i+len(mid) <= len(rest); i++ {
			if rest[i] == '\\' {
				break
			}
			if rest[i] == '"' {
				if string(rest[i:i+len(mid)]) == mid {
					return Event{Type: eventType(rest[:i]), Data: json.RawMessage(rest[i+len(mid) : len(rest)-1 : len(rest)-1])}
				}
				break
			}
		}
	}
	var env struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(b, &env)
	return Event{Type: env.Type, Data: env.Data}
}

// eventType is the type's name, the streaming ones without an allocation (they come once per
// delta).
func eventType(b []byte) string {
	switch string(b) {
	case "llm_text":
		return "llm_text"
	case "thinking":
		return "thinking"
	}
	return string(b)
}

func panicMessage(method string, p any) string {
	return fmt.Sprintf("panic in the host's %s: %v", method, p)
}

//export goAgentaoConfirm
func goAgentaoConfirm(h C.uintptr_t, tool, description, argsJSON, callID *C.char, p *C.agentao_reply) {
	serveRequest(p, "ConfirmTool", func(r *ConfirmReply) {
		box := cgo.Handle(h).Value().(*transportBox)
		box.t.ConfirmTool(ConfirmRequest{
			ToolName:    C.GoString(tool),
			Description: C.GoString(description),
			Args:        json.RawMessage(C.GoString(argsJSON)),
			CallID:      C.GoString(callID),
		}, r)
	})
}

//export goAgentaoAsk
func goAgentaoAsk(h C.uintptr_t, question, hintsJSON *C.char, p *C.agentao_reply) {
	serveRequest(p, "AskUser", func(r *AnswerReply) {
		q := Question{}
		if hintsJSON != nil {
			_ = json.Unmarshal([]byte(C.GoString(hintsJSON)), &q)
		}
		q.Text = C.GoString(question)
		box := cgo.Handle(h).Value().(*transportBox)
		box.t.AskUser(q, r)
	})
}

//export goAgentaoMaxIterations
func goAgentaoMaxIterations(h C.uintptr_t, count C.uint32_t, pendingJSON *C.char, p *C.agentao_reply) {
	serveRequest(p, "OnMaxIterations", func(r *MaxIterationsReply) {
		req := MaxIterationsRequest{Count: int(count)}
		if pendingJSON != nil {
			_ = json.Unmarshal([]byte(C.GoString(pendingJSON)), &req.PendingCalls)
		}
		box := cgo.Handle(h).Value().(*transportBox)
		box.t.OnMaxIterations(req, r)
	})
}

//export goAgentaoSubscribe
func goAgentaoSubscribe(h C.uintptr_t, listener C.agentao_listener_fn, listenerUserdata unsafe.Pointer, out *C.uint64_t) (st C.int32_t) {
	defer func() {
		if v := recover(); v != nil {
			st = C.AGENTAO_STATUS_INTERNAL
		}
	}()
	box := cgo.Handle(h).Value().(*transportBox)
	if box.sub == nil || listener == nil || out == nil {
		return C.AGENTAO_STATUS_NULL_ARGUMENT
	}
	// listenerUserdata is the library's memory, not Go's: a closure may keep it.
	id, err := box.sub.Subscribe(func(eventJSON string) {
		c := C.CString(eventJSON)
		C.agentao_go_call_listener(listener, listenerUserdata, c)
		freeC(c)
	})
	if err != nil {
		return C.AGENTAO_STATUS_INTERNAL
	}
	*out = C.uint64_t(id)
	return C.AGENTAO_STATUS_OK
}

//export goAgentaoUnsubscribe
func goAgentaoUnsubscribe(h C.uintptr_t, id C.uint64_t) {
	defer func() { _ = recover() }()
	if box := cgo.Handle(h).Value().(*transportBox); box.sub != nil {
		box.sub.Unsubscribe(uint64(id))
	}
}

//export goAgentaoObserve
func goAgentaoObserve(h C.uintptr_t, eventJSON *C.char, n C.size_t) {
	defer func() { _ = recover() }() // a panicking observer loses that event
	switch fn := cgo.Handle(h).Value().(type) {
	case func([]byte): // AddHostEventJSONObserver: the library's text, lent for the call
		fn(unsafe.Slice((*byte)(unsafe.Pointer(eventJSON)), int(n)))
	case func(HostEvent):
		ev, err := decodeHostEventText(C.GoStringN(eventJSON, C.int(n)))
		if err == nil {
			fn(ev)
		}
	}
}

// answer is the one shape of every deferred answer (a transport reply, a tool reply, a shell
// run): the handle, taken once (nil: already answered), goes to one consuming call.
func answer[P comparable](p P, call func(P, **C.agentao_error) C.agentao_status) error {
	var answered P // the nil handle
	if p == answered {
		return ErrAnswered
	}
	var cerr *C.agentao_error
	return statusErr(call(p, &cerr), cerr)
}

// answerText is answer for a consuming call that takes a text, copied to C for the call.
func answerText[P comparable](p P, text string, call func(P, *C.char, **C.agentao_error) C.agentao_status) error {
	return answer(p, func(p P, e **C.agentao_error) C.agentao_status {
		c := C.CString(sanitize(text))
		defer freeC(c)
		return call(p, c, e)
	})
}
