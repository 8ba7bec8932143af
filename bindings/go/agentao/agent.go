package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"iter"
	"runtime"
	"sync"
	"unsafe"
)

// Agent is one session: history, tools, permissions and a transport. Safe for concurrent use;
// one turn runs at a time (a second gets StatusTurnInProgress).
type Agent struct {
	mu        sync.Mutex
	ptr       *C.agentao_agent
	closed    bool
	active    int                                  // calls inside the library
	turns     map[*C.agentao_cancel_token]struct{} // tokens of running turns, cancelled by Close
	sessionID string
	yielded   sysmonYield
	link      *ctxLink // the last turn's context link, kept for the next turn (context_link.go)
}

// Option configures New.
type Option func(*options)

type options struct {
	observers []any // func(HostEvent) or func([]byte), in the order given
}

// WithHostEventObserver registers a host-event observer before the agent can run a turn, so
// it sees every event (see AddHostEventObserver).
func WithHostEventObserver(fn func(HostEvent)) Option {
	return func(o *options) {
		if fn != nil {
			o.observers = append(o.observers, fn)
		}
	}
}

// WithHostEventJSONObserver registers a raw-JSON host-event observer before the agent can run
// a turn, so it sees every event (see AddHostEventJSONObserver).
func WithHostEventJSONObserver(fn func(eventJSON []byte)) Option {
	return func(o *options) {
		if fn != nil {
			o.observers = append(o.observers, fn)
		}
	}
}

// New creates an agent. config is the config document (docs/config.md): a JSON string,
// []byte or json.RawMessage as it is, or any value encoding/json marshals (a map, a struct).
// transport may be nil for the built-in null transport. Stream works with every transport;
// it need not implement Subscriber.
//
// Release the agent with Close. An invalid config is an *Error with StatusInvalidConfig and a
// message naming the field.
func New(config any, transport Transport, opts ...Option) (*Agent, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	text, err := jsonText(config)
	if err != nil {
		return nil, err
	}
	ccfg, err := cstring(text)
	if err != nil {
		return nil, err
	}
	defer freeC(ccfg)
	var ptr *C.agentao_agent
	var cerr *C.agentao_error
	var st C.agentao_status
	if transport == nil {
		st = C.agentao_agent_new(ccfg, nil, &ptr, &cerr)
	} else {
		box := &transportBox{t: transport}
		box.sub, _ = transport.(Subscriber)
		sub := C.int(0)
		if box.sub != nil {
			sub = 1
		}
		// The library owns the handle from here: it calls userdata_free (which deletes it)
		// exactly once, even when agent_new fails.
		vt := C.agentao_go_transport(C.uintptr_t(newHandle(box)), sub)
		st = C.agentao_agent_new(ccfg, &vt, &ptr, &cerr)
	}
	if err := statusErr(st, cerr); err != nil {
		return nil, err
	}
	a := &Agent{ptr: ptr, turns: map[*C.agentao_cancel_token]struct{}{}}
	a.sessionID = C.GoString(C.agentao_agent_session_id(ptr))
	for _, fn := range o.observers {
		if _, err := addObserver(ptr, fn); err != nil {
			C.agentao_agent_free(ptr)
			return nil, err
		}
	}
	// Off the finalizer goroutine: freeing an exporter's last agent waits for its last posts
	// (up to the telemetry timeout), and every other finalizer would wait behind it.
	runtime.SetFinalizer(a, func(a *Agent) { go a.Close() })
	return a, nil
}

// Close releases the agent. Running turns are cancelled (reason "session-closed") without
// waiting: their calls return StatusCancelled, and the library handle is released when the
// last of them returns. Idempotent; allowed inside a callback of the agent's own turn. With a
// telemetry exporter, releasing the last agent that uses it waits for the spans not yet sent
// to be posted, up to the exporter's timeout_ms (agentao_agent_free).
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	link := a.link
	a.link = nil
	reason := C.CString("session-closed")
	for tok := range a.turns {
		C.agentao_cancel_token_cancel(tok, reason)
	}
	freeC(reason)
	p := a.takeIfIdle()
	a.mu.Unlock()
	link.remove()
	if p != nil {
		C.agentao_agent_free(p)
	}
	return nil
}

// takeIfIdle hands out the handle for freeing once the agent is closed and unused (a.mu held).
func (a *Agent) takeIfIdle() *C.agentao_agent {
	if !a.closed || a.active > 0 || a.ptr == nil {
		return nil
	}
	p := a.ptr
	a.ptr = nil
	return p
}

// acquire marks a call in progress and returns the handle; release ends it.
func (a *Agent) acquire() (*C.agentao_agent, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	a.active++
	return a.ptr, nil
}

func (a *Agent) release() {
	a.mu.Lock()
	a.active--
	p := a.takeIfIdle()
	a.mu.Unlock()
	if p != nil {
		C.agentao_agent_free(p)
	}
}

// SessionID is the agent's session id (a UUID).
func (a *Agent) SessionID() string { return a.sessionID }

// TurnOption configures one turn.
type TurnOption func(*turnOptions)

type turnOptions struct {
	maxIterations int32
	images        []Image
}

// WithMaxIterations sets the turn's iteration budget (default: the config's max_iterations).
func WithMaxIterations(n int) TurnOption {
	return func(o *turnOptions) {
		if n >= 0 && n <= 1<<31-1 {
			o.maxIterations = int32(n)
		}
	}
}

// turn is one running turn: its message, cancel token and context link.
type turn struct {
	a   *Agent
	ptr *C.agentao_agent
	msg string // checked: no NUL byte
	// cmsg is msg as a C string, made only by the calls that need one (Chat passes msg's
	// bytes to its shim, which saves two cgo calls a turn); text is Chat's answer in C. Both
	// are released by end's one cgo call.
	cmsg  *C.char
	text  *C.char
	imgs  cImages
	max   C.int32_t
	tok   *C.agentao_cancel_token
	ctx   context.Context
	link  *ctxLink // the agent's context link, or (a concurrent turn) nil and stop/fired
	stop  func() bool
	fired chan struct{}
}

// beginTurn registers a turn whose token the context's cancellation (and Close) cancels.
func (a *Agent) beginTurn(ctx context.Context, message string, opts []TurnOption) (*turn, error) {
	o := turnOptions{maxIterations: -1}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkNUL(message); err != nil {
		return nil, err
	}
	// One lock section registers the turn (Close cancels the tokens it finds) and claims the
	// context's link; the token is made before it.
	tok := C.agentao_cancel_token_new()
	linked := ctx.Done() != nil
	var link, replaced *ctxLink
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		C.agentao_cancel_token_free(tok)
		return nil, ErrClosed
	}
	a.active++
	ptr := a.ptr
	a.turns[tok] = struct{}{}
	if linked {
		link, replaced = a.claimLink(ctx, tok)
	}
	a.mu.Unlock()
	t := &turn{a: a, ptr: ptr, msg: message, imgs: newCImages(o.images), max: C.int32_t(o.maxIterations),
		ctx: ctx, tok: tok, link: link}
	replaced.remove()
	if linked {
		if ctx.Err() != nil {
			cancelToken(t.tok, context.Cause(ctx).Error())
		} else if t.link != nil {
			t.link.register()
		} else {
			t.fired = make(chan struct{})
			t.stop = context.AfterFunc(ctx, func() {
				cancelToken(t.tok, context.Cause(ctx).Error())
				close(t.fired)
			})
		}
	}
	return t, nil
}

func cancelToken(tok *C.agentao_cancel_token, reason string) {
	r := C.CString(reason)
	C.agentao_cancel_token_cancel(tok, r)
	freeC(r)
}

// end unlinks the context, waits for a cancel already in flight, and releases the token (and
// the agent's handle, when Close ran during the turn and it was the last call).
func (t *turn) end() {
	if t.link != nil {
		t.link.detach()
	}
	if t.stop != nil && !t.stop() {
		<-t.fired
	}
	a := t.a
	a.mu.Lock()
	delete(a.turns, t.tok)
	if t.link != nil {
		t.link.busy = false
	}
	a.active--
	p := a.takeIfIdle()
	a.mu.Unlock()
	C.agentao_go_turn_end(t.tok, t.cmsg, t.text)
	t.imgs.free()
	if p != nil {
		C.agentao_agent_free(p)
	}
	a.yielded.turnEnded()
}

// wrap adds the context's error to a cancelled turn's error.
func (t *turn) wrap(err error) error {
	if e, ok := err.(*Error); ok && e.Status == StatusCancelled && t.ctx.Err() != nil {
		e.cause = context.Cause(t.ctx)
	}
	return err
}

// Chat runs one turn and returns the answer text. A turn that does not end ok returns an
// *Error (StatusCancelled, StatusHostError, StatusTimeout, ...); its outcome is then readable
// with LastTurn. Cancelling ctx cancels the turn.
func (a *Agent) Chat(ctx context.Context, message string, opts ...TurnOption) (string, error) {
	t, err := a.beginTurn(ctx, message, opts)
	if err != nil {
		return "", err
	}
	defer t.end()
	var cerr *C.agentao_error
	// One cgo call: the shim copies the message and releases an OK call's error slot; the
	// answer is read here and released with the token at the turn's end.
	st := C.agentao_go_chat(t.ptr, (*C.char)(unsafe.Pointer(unsafe.StringData(t.msg))), C.size_t(len(t.msg)),
		t.imgs.p, t.imgs.n, t.max, t.tok, &t.text, &cerr)
	if st != C.AGENTAO_STATUS_OK {
		return "", t.wrap(statusErr(st, cerr))
	}
	if t.text == nil {
		return "", nil
	}
	return C.GoString(t.text), nil
}

// cMessage is the turn's message as a C string (released at the turn's end).
func (t *turn) cMessage() *C.char {
	if t.cmsg == nil {
		t.cmsg = C.CString(t.msg)
	}
	return t.cmsg
}

// Outcome is a turn's result (the TurnOutcome of docs/c-api.md).
type Outcome struct {
	Text string `json:"text"`
	// Status is "ok", "error" or "cancelled".
	Status string `json:"status"`
	// IncompleteReason is nil for a complete answer, else "no_output", "reasoning_only",
	// "length_truncated", "doom_loop", "max_iterations", "llm_error" or "hook_stop".
	IncompleteReason    *string `json:"incomplete_reason"`
	ToolCount           int     `json:"tool_count"`
	Error               *string `json:"error"`
	FinishReasonMissing bool    `json:"finish_reason_missing"`
	IsAnswer            bool    `json:"is_answer"`
}

func parseOutcome(b []byte) (*Outcome, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var o Outcome
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, &Error{Status: StatusInvalidJSON, Message: err.Error()}
	}
	return &o, nil
}

// Run runs one turn and returns its full outcome. A turn that does not end ok returns its
// outcome (when it has one: a cancelled turn's partial text) and an *Error.
func (a *Agent) Run(ctx context.Context, message string, opts ...TurnOption) (*Outcome, error) {
	t, err := a.beginTurn(ctx, message, opts)
	if err != nil {
		return nil, err
	}
	defer t.end()
	// One blocking cgo call for the turn (agentao_go_run_wait waits for on_done in C): a
	// completion callback into Go and a goroutine's wake-up cost ~20 µs more a turn.
	var cerr *C.agentao_error
	var st C.agentao_status
	var outcome, errText *C.char
	if err := statusErr(C.agentao_go_run_wait(t.ptr, t.cMessage(), t.imgs.p, t.imgs.n, t.max, t.tok, &st, &outcome, &errText, &cerr), cerr); err != nil {
		return nil, err
	}
	var outJSON []byte
	if outcome != nil {
		outJSON = C.GoBytes(unsafe.Pointer(outcome), C.int(C.strlen(outcome)))
	}
	var msg string
	if errText != nil {
		msg = C.GoString(errText)
	}
	if outcome != nil || errText != nil {
		C.agentao_go_free2(outcome, errText)
	}
	out, perr := parseOutcome(outJSON)
	if Status(st) != StatusOK {
		return out, t.wrap(&Error{Status: Status(st), Message: msg})
	}
	return out, perr
}

// Chunk is one item of a streamed turn: a text delta, or (last) the outcome.
type Chunk struct {
	Text    string
	Outcome *Outcome
}

// Stream runs one turn and yields its text deltas, in order, then a last chunk with the
// outcome. A turn that does not end ok yields its deltas, then (chunk with its outcome, error).
// Ending the iteration early cancels the turn (reason "async-cancel"); so does cancelling ctx.
// The turn starts when the iteration starts. Up to 64 KiB of deltas wait for the reader: a
// turn whose reader falls further behind waits, nothing is dropped.
func (a *Agent) Stream(ctx context.Context, message string, opts ...TurnOption) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		t, err := a.beginTurn(ctx, message, opts)
		if err != nil {
			yield(Chunk{}, err)
			return
		}
		defer t.end()
		var s *C.agentao_go_stream
		var cerr *C.agentao_error
		if err := statusErr(C.agentao_go_stream_start(t.ptr, t.cMessage(), t.imgs.p, t.imgs.n, t.max, t.tok, &s, &cerr), cerr); err != nil {
			yield(Chunk{}, t.wrap(err))
			return
		}
		finished := false
		defer func() {
			if !finished { // the consumer stopped early (or panicked): end the turn first
				cancelToken(t.tok, "async-cancel")
			}
			C.agentao_go_stream_free(s) // waits for the turn's end
		}()
		// One cgo call takes every delta queued since the last (see agentao_go_stream_take).
		buf := make([]byte, 16<<10)
		for {
			var used C.size_t
			var big, outcome, message *C.char
			var st C.agentao_status
			ended := C.agentao_go_stream_take(s, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &used, &big, &st, &outcome, &message) != 0
			for b := buf[:used]; len(b) >= 4; {
				n := int(binary.NativeEndian.Uint32(b))
				item := b[4 : 4+n]
				b = b[4+n:]
				if text, ok := deltaText(item); ok && !yield(Chunk{Text: text}, nil) {
					return
				}
			}
			if big != nil {
				text, ok := deltaText([]byte(C.GoString(big)))
				C.free(unsafe.Pointer(big))
				if ok && !yield(Chunk{Text: text}, nil) {
					return
				}
			}
			if ended {
				finished = true
				t.finish(st, outcome, message, yield)
				return
			}
		}
	}
}

// finish yields a streamed turn's last chunk from its end (status, TurnOutcome JSON, error
// message: C strings it releases).
func (t *turn) finish(st C.agentao_status, outcome, message *C.char, yield func(Chunk, error) bool) {
	var raw []byte
	if outcome != nil {
		raw = []byte(C.GoString(outcome))
	}
	msg := ""
	if message != nil {
		msg = C.GoString(message)
	}
	C.agentao_go_free2(outcome, message)
	if st == C.AGENTAO_STATUS_OK {
		out, err := parseOutcome(raw)
		if err == nil && out == nil {
			err = &Error{Status: StatusInternal, Message: "the turn ended without an outcome"}
		}
		yield(Chunk{Outcome: out}, err)
		return
	}
	if raw == nil {
		var last *C.char
		if C.agentao_agent_last_turn(t.ptr, &last, nil) == C.AGENTAO_STATUS_OK {
			raw = takeBytes(last)
		}
	}
	out, _ := parseOutcome(raw)
	yield(Chunk{Outcome: out}, t.wrap(&Error{Status: Status(st), Message: msg}))
}
