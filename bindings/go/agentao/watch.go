package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"runtime/cgo"
)

// ErrTurnCancelled is the cause of a host tool's or shell run's context when the turn (or the
// library, for a shell run) cancelled the call.
var ErrTurnCancelled = errors.New("agentao: the call was cancelled")

// watchToken returns a context cancelled (cause ErrTurnCancelled) once token is, and a stop
// function that ends the watch and cancels the context. token is borrowed for the call only:
// the watch is on a child token of its own, which stays valid after the call is answered. The
// library calls back when the token is cancelled (agentao_cancel_token_watch): nothing polls.
func watchToken(token *C.agentao_cancel_token) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	child := C.agentao_cancel_token_child(token)
	h := newHandle(func() { cancel(ErrTurnCancelled) })
	var id C.uint64_t
	// Refused only without a token; the library's userdata_free then already deleted h.
	C.agentao_go_watch(child, h, &id, nil)
	stopped := false
	return ctx, func() {
		if !stopped {
			stopped = true
			// A watch that has not fired is removed (its userdata_free deletes the handle); one
			// that fired deleted it after its callback.
			C.agentao_cancel_token_unwatch(child, id)
			C.agentao_cancel_token_free(child)
			cancel(context.Canceled)
		}
	}
}

//export goAgentaoCancelled
func goAgentaoCancelled(h C.uintptr_t) {
	defer func() { _ = recover() }()
	cgo.Handle(h).Value().(func())()
}
