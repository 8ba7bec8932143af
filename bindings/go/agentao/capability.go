package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync"
)

// The one pattern of every host capability (docs/bindings.md, "Adding a capability"): the Go
// value goes to the library behind a cgo.Handle (userdata, released by userdata_free); shim.c
// has one C trampoline per callback slot, which calls an exported Go function with the handle;
// a request answered later is answered through a reply type that embeds reply (serveRequest).

// setCapability installs v (when present) behind a new cgo.Handle through set, a shim setter
// (agentao_go_set_*), or removes the capability: set with handle 0 passes NULL to the library.
// The library owns the handle from the call on: userdata_free deletes it, on failure too.
// present is the caller's nil check: a nil func or interface stored in an any is not nil.
func (a *Agent) setCapability(present bool, v any, set func(*C.agentao_agent, C.uintptr_t, **C.agentao_error) C.agentao_status) error {
	ptr, err := a.acquire()
	if err != nil {
		return err
	}
	defer a.release()
	var h C.uintptr_t
	if present {
		h = newHandle(v)
	}
	var cerr *C.agentao_error
	return statusErr(set(ptr, h, &cerr), cerr)
}

// reply owns one agentao_reply until it is answered.
type reply struct {
	mu sync.Mutex
	p  *C.agentao_reply // nil once answered
}

func (r *reply) take() *C.agentao_reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.p
	r.p = nil
	return p
}

// Fail fails the request with message: a failed confirmation or max-iterations request ends
// the turn with StatusHostError; a failed question becomes the tool's error result.
func (r *reply) Fail(message string) error {
	return answerText(r.take(), message, func(p *C.agentao_reply, m *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_reply_fail(p, m, e)
	})
}

// Answered reports whether the reply has been answered (or failed).
func (r *reply) Answered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p == nil
}

// base is the embedded reply of a reply type (ConfirmReply, HookReply, ...).
func (r *reply) base() *reply { return r }

// replyType is a pointer to a reply type: a struct that embeds reply.
type replyType[T any] interface {
	*T
	base() *reply
}

// serveRequest is the one shape of every deferred request a Go callback answers through a
// reply (the transport's three, the compaction controller, hooks): the reply owns p; a panic
// in ask before the reply is answered fails it with a message naming what, and so does its
// finalizer once the reply becomes unreachable unanswered (no turn waits forever on a
// forgotten reply).
func serveRequest[T any, R replyType[T]](p *C.agentao_reply, what string, ask func(R)) {
	r := R(new(T))
	r.base().p = p
	defer func() {
		if v := recover(); v != nil {
			_ = r.base().Fail(panicMessage(what, v))
		}
	}()
	runtime.SetFinalizer(r, func(r R) { failDropped(r.base()) })
	ask(r)
}

// failDropped is the finalizer of an unanswered reply.
func failDropped(r *reply) {
	if p := r.take(); p != nil {
		cm := C.CString("the host dropped the request without answering it")
		C.agentao_reply_fail(p, cm, nil)
		freeC(cm)
	}
}
