package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"sync"
)

// Transport is how an agent talks to its host (the reference's Transport). Its methods run on
// library threads. Embed NullTransport to implement only some of them.
//
// ConfirmTool, AskUser and OnMaxIterations receive a reply to answer exactly once, inside the
// call or later from any goroutine; the turn waits (cancellably) for the answer. A reply that
// becomes unreachable without an answer is failed by its finalizer, so a forgotten reply
// ends the wait instead of hanging the turn. A panic in any method is recovered: a panicking
// EmitEvent loses that event, a panicking ConfirmTool or OnMaxIterations fails its request (the
// turn ends with StatusHostError), a panicking AskUser fails the question (the tool reports an
// error and the turn goes on).
type Transport interface {
	// EmitEvent receives every internal event, in order, never concurrently for one agent.
	// It must return quickly.
	EmitEvent(ev Event)
	// ConfirmTool approves or declines a tool call that needs confirmation.
	ConfirmTool(req ConfirmRequest, reply *ConfirmReply)
	// AskUser answers a question from the model.
	AskUser(q Question, reply *AnswerReply)
	// OnMaxIterations decides what happens when the iteration budget is spent.
	OnMaxIterations(req MaxIterationsRequest, reply *MaxIterationsReply)
}

// Subscriber is implemented by a transport that can fan events out (the reference's
// subscribe). Optional: Stream works with any transport (the library delivers the deltas
// itself); embed a Broadcaster when other code of yours wants to subscribe to the events.
type Subscriber interface {
	Subscribe(listener func(eventJSON string)) (id uint64, err error)
	Unsubscribe(id uint64)
}

// Event is one internal event: {"type": ..., "schema_version": 1, "data": {...}}.
type Event struct {
	Type string
	// Data is the event's "data" object; its keys are those of the reference (open: ignore
	// unknown keys).
	Data json.RawMessage
}

// ConfirmRequest is a tool call waiting for approval.
type ConfirmRequest struct {
	ToolName    string
	Description string
	Args        json.RawMessage
	CallID      string
}

// Question is a question from the model (the ask_user tool).
type Question struct {
	Text        string
	Header      *string  `json:"header"`
	Options     []string `json:"options"`
	Multiple    bool     `json:"multiple"`
	AllowCustom bool     `json:"allow_custom"`
}

// MaxIterationsRequest says the iteration budget is spent.
type MaxIterationsRequest struct {
	Count int
	// PendingCalls are the last assistant message's tool calls.
	PendingCalls []PendingCall
}

// PendingCall is a tool call of a MaxIterationsRequest.
type PendingCall struct {
	Name string `json:"name"`
	Args string `json:"args"`
}

// NullTransport is the reference's NullTransport: it discards events, approves tools,
// answers questions non-interactively and stops at the iteration limit.
type NullTransport struct{}

func (NullTransport) EmitEvent(Event) {}

func (NullTransport) ConfirmTool(_ ConfirmRequest, r *ConfirmReply) { _ = r.Allow() }

func (NullTransport) AskUser(_ Question, r *AnswerReply) {
	_ = r.Answer("[ask_user: not available in non-interactive mode]")
}

func (NullTransport) OnMaxIterations(_ MaxIterationsRequest, r *MaxIterationsReply) { _ = r.Stop() }

// Broadcaster is a ready Subscriber: embed it in a transport and call Notify from EmitEvent
// to fan events out to subscribers. Safe for concurrent use.
type Broadcaster struct {
	mu        sync.Mutex
	next      uint64
	listeners map[uint64]func(string)
}

func (b *Broadcaster) Subscribe(listener func(eventJSON string)) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.listeners == nil {
		b.listeners = map[uint64]func(string){}
	}
	b.next++
	b.listeners[b.next] = listener
	return b.next, nil
}

func (b *Broadcaster) Unsubscribe(id uint64) {
	b.mu.Lock()
	delete(b.listeners, id)
	b.mu.Unlock()
}

// Notify delivers eventJSON to every listener on the calling goroutine.
func (b *Broadcaster) Notify(eventJSON string) {
	b.mu.Lock()
	ls := make([]func(string), 0, len(b.listeners))
	for _, l := range b.listeners {
		ls = append(ls, l)
	}
	b.mu.Unlock()
	for _, l := range ls {
		l(eventJSON)
	}
}

// Confirmation is an answer to ConfirmTool.
type Confirmation int32

const (
	Allow           Confirmation = C.AGENTAO_CONFIRMATION_ALLOW
	Deny            Confirmation = C.AGENTAO_CONFIRMATION_DENY
	DenyUnavailable Confirmation = C.AGENTAO_CONFIRMATION_DENY_UNAVAILABLE
)

// ConfirmReply answers a ConfirmTool request.
type ConfirmReply struct{ reply }

// Confirm answers with c.
func (r *ConfirmReply) Confirm(c Confirmation) error {
	return answer(r.take(), func(p *C.agentao_reply, e **C.agentao_error) C.agentao_status {
		return C.agentao_reply_confirm(p, C.int32_t(c), e)
	})
}

func (r *ConfirmReply) Allow() error           { return r.Confirm(Allow) }
func (r *ConfirmReply) Deny() error            { return r.Confirm(Deny) }
func (r *ConfirmReply) DenyUnavailable() error { return r.Confirm(DenyUnavailable) }

// AnswerReply answers an AskUser question.
type AnswerReply struct{ reply }

// Answer answers with text.
func (r *AnswerReply) Answer(text string) error {
	return answerText(r.take(), text, func(p *C.agentao_reply, t *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_reply_text(p, t, e)
	})
}

// MaxIterationsReply answers an OnMaxIterations request.
type MaxIterationsReply struct{ reply }

func (r *MaxIterationsReply) action(v any) error {
	b, _ := json.Marshal(v)
	return answerText(r.take(), string(b), func(p *C.agentao_reply, j *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_reply_json(p, j, e)
	})
}

// Stop ends the turn (incomplete reason max_iterations).
func (r *MaxIterationsReply) Stop() error { return r.action(map[string]string{"action": "stop"}) }

// Continue grants a whole new budget.
func (r *MaxIterationsReply) Continue() error {
	return r.action(map[string]string{"action": "continue"})
}

// NewInstruction continues with a new user instruction.
func (r *MaxIterationsReply) NewInstruction(message string) error {
	return r.action(map[string]string{"action": "new_instruction", "message": message})
}

// sanitize drops NUL bytes, which a C string cannot carry.
func sanitize(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b := make([]byte, 0, len(s))
			for j := 0; j < len(s); j++ {
				if s[j] != 0 {
					b = append(b, s[j])
				}
			}
			return string(b)
		}
	}
	return s
}
