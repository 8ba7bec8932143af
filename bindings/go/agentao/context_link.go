package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"reflect"
	"sync"
)

// ctxLink links a context to the agent's turns and stays registered from one turn to the next
// while the host passes the same context, as it usually does (one per request, or the
// application's own). Registering a context.AfterFunc and removing it again cost a turn
// ~0.4 µs, about half of what the binding adds to a short turn.
//
// The link holds no reference to the Agent (the context's registration keeps it alive, and the
// Agent's finalizer must still be able to run); Close and a turn with another context remove it.
type ctxLink struct {
	ctx context.Context
	mu  sync.Mutex
	// stop removes the registration (context.AfterFunc's stop); set once, under mu.
	stop func() bool
	// tok is the token of the turn the link serves, nil between turns; under mu, so that the
	// turn's end (which clears it before releasing the token) waits for a cancel in flight.
	tok *C.agentao_cancel_token
	// busy: a turn holds the link (under the Agent's mu). A second turn at the same time links
	// on its own.
	busy bool
}

// fire is the registration's function: it cancels the turn the link serves, if any (a turn
// that starts once the context is done finds ctx.Err() set and starts cancelled).
func (l *ctxLink) fire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tok != nil {
		cancelToken(l.tok, context.Cause(l.ctx).Error())
	}
}

// claimLink returns the link the turn with token tok uses for ctx, nil when a concurrent turn
// holds it (a.mu held). A link for another context that no turn holds is replaced; its old
// registration is returned for removal outside the lock.
func (a *Agent) claimLink(ctx context.Context, tok *C.agentao_cancel_token) (l *ctxLink, replaced *ctxLink) {
	l = a.link
	if l != nil && l.busy {
		return nil, nil
	}
	// Only a context of a comparable type is kept: comparing two interface values of one
	// uncomparable type panics, and a link's context is compared with the next turn's.
	if l == nil || l.ctx != ctx {
		if !reflect.TypeOf(ctx).Comparable() {
			return nil, nil
		}
		replaced = l
		l = &ctxLink{ctx: ctx}
		a.link = l
	}
	l.busy = true
	l.mu.Lock()
	l.tok = tok
	l.mu.Unlock()
	return l, replaced
}

// register makes sure the link's context is watched (the first turn on a new link).
func (l *ctxLink) register() {
	l.mu.Lock()
	registered := l.stop != nil
	l.mu.Unlock()
	if registered {
		return
	}
	stop := context.AfterFunc(l.ctx, l.fire)
	l.mu.Lock()
	l.stop = stop
	l.mu.Unlock()
}

// remove ends the link's registration (its function may still be running: it finds no turn).
func (l *ctxLink) remove() {
	if l == nil {
		return
	}
	l.mu.Lock()
	stop := l.stop
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// detach ends the turn's use of the link: no cancel of the context reaches its token after
// this (the turn's end then clears busy under the Agent's mu).
func (l *ctxLink) detach() {
	l.mu.Lock()
	l.tok = nil
	l.mu.Unlock()
}
