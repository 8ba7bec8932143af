package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// HostEvent is one host event of the v3 contract (docs/schema/host.events.v3.schema.json):
// *ToolLifecycleEvent, *PermissionDecisionEvent, *SubagentLifecycleEvent, or
// *UnknownHostEvent for an event type this binding does not know.
type HostEvent interface {
	// EventType is the wire "event_type".
	EventType() string
}

// The event types (ToolLifecycleEvent, PermissionDecisionEvent, SubagentLifecycleEvent,
// SubagentUsage) are generated from the schema: host_events_gen.go.

// UnknownHostEvent is an event of a type this binding does not know (readers ignore what
// they do not understand; the JSON is kept).
type UnknownHostEvent struct {
	Type string
	JSON json.RawMessage
}

func (e *UnknownHostEvent) EventType() string { return e.Type }

// decodeHostEvent decodes the v3 wire form by its event_type.
func decodeHostEvent(b []byte) (HostEvent, error) { return decodeHostEventText(string(b)) }

// decodeHostEventText is decodeHostEvent on the event as one string, copied out of C once: the
// decoder reads its bytes in place, and the typed event's strings are substrings of it.
func decodeHostEventText(text string) (HostEvent, error) {
	// Read only: no byte of a string is ever written, and nothing keeps b past this call
	// (UnknownHostEvent gets a copy).
	b := unsafe.Slice(unsafe.StringData(text), len(text))
	eventType, ok := leadingEventType(text)
	if !ok {
		var head struct {
			EventType string `json:"event_type"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return nil, &Error{Status: StatusInvalidJSON, Message: err.Error()}
		}
		eventType = head.EventType
	}
	ev := newHostEvent(eventType)
	if ev == nil {
		if ok && !json.Valid(b) { // the fast path has not read it all
			return nil, &Error{Status: StatusInvalidJSON, Message: "the host event is not valid JSON"}
		}
		return &UnknownHostEvent{Type: eventType, JSON: []byte(text)}, nil
	}
	// Without reflection first (host_event_decoder.go); what that decoder does not read, or
	// reads as invalid, encoding/json decodes again and answers for.
	if decodeFast(text, ev.(fastDecodable)) {
		return ev, nil
	}
	ev = newHostEvent(eventType)
	if err := json.Unmarshal(b, ev); err != nil {
		return nil, &Error{Status: StatusInvalidJSON, Message: err.Error()}
	}
	return ev, nil
}

// leadingEventType reads the event type the library writes first ({"event_type":"T",...})
// without a JSON pass over the whole event (the typed decode that follows is the one); false
// for any other shape, which the full decoder then reads.
func leadingEventType(text string) (string, bool) {
	const pre = `{"event_type":"`
	if !strings.HasPrefix(text, pre) {
		return "", false
	}
	rest := text[len(pre):]
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '\\':
			return "", false
		case '"':
			return rest[:i], true
		}
	}
	return "", false
}

// HostEventStream reads an agent's host events (the reference's agent.events()). Only events
// published after it opened arrive. Its queue holds 64 events and a slow reader slows the
// turn (nothing is dropped), so read it steadily or Close it. Safe for concurrent use.
type HostEventStream struct {
	ctx context.Context
	// mu: readers hold it shared around their call into the library (several may wait at
	// once, and a Next from inside a callback reaches the library, which answers
	// StatusReentrant); Close holds it alone to release the handle.
	mu sync.RWMutex
	s  *C.agentao_host_event_stream
	// w is all the context watch holds: a watch that held the stream would keep it
	// reachable, and its finalizer would never run.
	w         *streamWake
	stopWatch func() bool
}

// streamWake wakes a Next waiting in the library (Close, the context's end) without waiting
// for the readers' lock, and never after the handle was freed.
type streamWake struct {
	mu     sync.Mutex
	raw    *C.agentao_host_event_stream // nil once freed
	closed bool                         // by Close
}

// wake closes the library's stream (once the handle is gone, nothing).
func (w *streamWake) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.raw != nil {
		C.agentao_host_event_stream_close(w.raw)
	}
}

func (w *streamWake) closedByClose() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// Events opens a host-event stream of this agent, read until ctx is done or the stream is
// closed. With sessionID set, only that session's events arrive. Only one stream per filter
// may be open at a time (StatusStreamSubscribe otherwise).
func (a *Agent) Events(ctx context.Context, sessionID ...string) (*HostEventStream, error) {
	ptr, err := a.acquire()
	if err != nil {
		return nil, err
	}
	defer a.release()
	var filter *C.char
	if len(sessionID) > 0 && sessionID[0] != "" {
		if filter, err = cstring(sessionID[0]); err != nil {
			return nil, err
		}
		defer freeC(filter)
	}
	var s *C.agentao_host_event_stream
	var cerr *C.agentao_error
	if err := statusErr(C.agentao_agent_host_events_open(ptr, filter, &s, &cerr), cerr); err != nil {
		return nil, err
	}
	w := &streamWake{raw: s}
	hs := &HostEventStream{ctx: ctx, s: s, w: w}
	// The context's end closes the stream in the library, which wakes a waiting Next: it
	// waits there without polling.
	hs.stopWatch = context.AfterFunc(ctx, w.wake)
	runtime.SetFinalizer(hs, (*HostEventStream).Close)
	return hs, nil
}

// Next waits for the next event. It returns the context's error once the context is done,
// ErrClosed after Close, and StatusClosed once the agent was closed (after the events the
// stream still held).
func (hs *HostEventStream) Next() (HostEvent, error) {
	for {
		if err := hs.ctx.Err(); err != nil {
			return nil, err
		}
		ev, err, again := hs.next()
		if !again {
			return ev, err
		}
	}
}

// forever is the longest wait one call makes (~49 days); Next calls again after it.
const forever = ^C.uint32_t(0)

func (hs *HostEventStream) next() (HostEvent, error, bool) {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	if hs.s == nil {
		return nil, ErrClosed, false
	}
	wait := forever
	if dl, ok := hs.ctx.Deadline(); ok {
		wait = C.uint32_t(min(max(time.Until(dl), 0), time.Duration(forever)*time.Millisecond).Milliseconds())
	}
	var item *C.char
	var cerr *C.agentao_error
	st := C.agentao_host_event_stream_next(hs.s, wait, &item, &cerr)
	if st == C.AGENTAO_STATUS_TIMEOUT {
		C.agentao_error_free(cerr)
		return nil, nil, true
	}
	if st == C.AGENTAO_STATUS_CLOSED {
		if hs.w.closedByClose() {
			C.agentao_error_free(cerr)
			return nil, ErrClosed, false
		}
		if err := hs.ctx.Err(); err != nil {
			C.agentao_error_free(cerr)
			return nil, err, false
		}
	}
	if err := statusErr(st, cerr); err != nil {
		return nil, err, false
	}
	ev, err := decodeHostEventText(takeString(item))
	return ev, err, false
}

// All iterates over the events until the context is done, the stream is closed, or its
// agent was closed and the events it held are read. A gap
// (StatusEventsDropped: a cancelled turn dropped events the stream had no room for) is
// yielded as an error and iteration goes on; any other error ends the iteration.
func (hs *HostEventStream) All() iter.Seq2[HostEvent, error] {
	return func(yield func(HostEvent, error) bool) {
		for {
			ev, err := hs.Next()
			if err == ErrClosed || errors.Is(err, StatusClosed) || (err != nil && hs.ctx.Err() != nil) {
				return
			}
			if !yield(ev, err) || (err != nil && !errors.Is(err, StatusEventsDropped)) {
				return
			}
		}
	}
}

// Close closes the stream (idempotent); a Next waiting on it returns ErrClosed, and a turn
// blocked on its full queue resumes.
func (hs *HostEventStream) Close() error {
	hs.w.mu.Lock()
	hs.w.closed = true
	hs.w.mu.Unlock()
	hs.w.wake()
	hs.stopWatch()
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.s != nil {
		hs.w.mu.Lock()
		hs.w.raw = nil
		hs.w.mu.Unlock()
		C.agentao_host_event_stream_free(hs.s)
		hs.s = nil
	}
	return nil
}

// ObserverID identifies a host-event observer.
type ObserverID uint64

// AddHostEventObserver registers fn for every host event of this agent; it runs inline on a
// library thread, in order, never concurrently with another observer call of this agent, and
// must return quickly. A panic in fn loses that event.
func (a *Agent) AddHostEventObserver(fn func(HostEvent)) (ObserverID, error) {
	if fn == nil {
		return 0, errNilObserver()
	}
	return a.addObserver(fn)
}

// AddHostEventJSONObserver registers fn for every host event of this agent as the library
// writes it: eventJSON is the event's JSON text, byte for byte what the C API's observer
// receives (docs/schema/host.events.v3.schema.json), undecoded. It is for a host that forwards events (to a
// log, a channel, another process) and has no use for AddHostEventObserver's typed decode,
// which costs most of an event's time in the binding.
//
// Ownership: eventJSON is the library's buffer, lent for the call (as io.Writer's Write and
// bufio.Scanner's Bytes lend theirs): it is valid only until fn returns and must not be
// modified. A closure that keeps the text copies it (string(eventJSON), bytes.Clone); the
// binding does not copy for every closure, since the copy added ~0.2 µs to the observer's
// ~0.5 µs over the C observer (docs/performance.md).
//
// Threads and order are AddHostEventObserver's: fn runs inline on a library thread, in order,
// never concurrently with another observer call of this agent (typed or JSON, which see the
// same events in the same order), and must return quickly. A panic in fn loses that event.
// The id shares AddHostEventObserver's space: RemoveHostEventObserver removes either kind.
func (a *Agent) AddHostEventJSONObserver(fn func(eventJSON []byte)) (ObserverID, error) {
	if fn == nil {
		return 0, errNilObserver()
	}
	return a.addObserver(fn)
}

// errNilObserver is the error for a nil observer of either kind (checked while fn is still
// typed: a nil func in an `any` is not nil).
func errNilObserver() error {
	return &Error{Status: StatusNullArgument, Message: "observer is nil"}
}

// addObserver registers fn (a func(HostEvent) or a func([]byte)) on the open agent.
func (a *Agent) addObserver(fn any) (ObserverID, error) {
	ptr, err := a.acquire()
	if err != nil {
		return 0, err
	}
	defer a.release()
	return addObserver(ptr, fn)
}

// addObserver registers fn, a func(HostEvent) or a func([]byte) (goAgentaoObserve tells
// them apart).
func addObserver(ptr *C.agentao_agent, fn any) (ObserverID, error) {
	var id C.uint64_t
	var cerr *C.agentao_error
	// The library owns the handle from here: userdata_free deletes it, on failure too.
	if err := statusErr(C.agentao_go_add_observer(ptr, newHandle(fn), &id, &cerr), cerr); err != nil {
		return 0, err
	}
	return ObserverID(id), nil
}

// RemoveHostEventObserver removes an observer of either kind (AddHostEventObserver,
// AddHostEventJSONObserver); false when it was not registered.
func (a *Agent) RemoveHostEventObserver(id ObserverID) bool {
	ptr, err := a.acquire()
	if err != nil {
		return false
	}
	defer a.release()
	return bool(C.agentao_agent_remove_host_event_observer(ptr, C.uint64_t(id)))
}
