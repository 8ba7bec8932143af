package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"time"
)

// ErrTurnCancelled is the cause of a host tool's or shell run's context when the turn (or the
// library, for a shell run) cancelled the call.
var ErrTurnCancelled = errors.New("agentao: the call was cancelled")

// The library's tokens have no callback, so a watch polls one this often while the call runs.
const watchInterval = 10 * time.Millisecond

// watchToken returns a context cancelled (cause ErrTurnCancelled) once token is, and a stop
// function that ends the watch and cancels the context. token is borrowed for the call only:
// the watch keeps a child token of its own, which stays valid after the call is answered.
func watchToken(token *C.agentao_cancel_token) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	child := C.agentao_cancel_token_child(token)
	stop := make(chan struct{})
	go func() {
		defer C.agentao_cancel_token_free(child)
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		for {
			if C.agentao_cancel_token_is_cancelled(child) {
				cancel(ErrTurnCancelled)
				return
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	stopped := false
	return ctx, func() {
		if !stopped {
			stopped = true
			close(stop)
			cancel(context.Canceled)
		}
	}
}
