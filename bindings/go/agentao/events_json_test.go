package agentao

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/agentao/libagentao/bindings/go/agentao/internal/cbench"
)

// Two turns of one read_file call each: events in both turns.
const twoReadTurns = `{"tool_calls":[{"id":"r1","name":"read_file","arguments":{"file_path":"a.txt"}}]},{"text":"one"},` +
	`{"tool_calls":[{"id":"r2","name":"read_file","arguments":{"file_path":"a.txt"}}]},{"text":"two"}`

func TestHostEventJSONObserverMatchesCAndTyped(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var typed []HostEvent
	var texts, order []string
	var inCall, overlaps atomic.Int32
	enter := func() {
		if inCall.Swap(1) == 1 {
			overlaps.Add(1)
		}
	}
	a := newAgent(t, config(dir, writeTurn, ""), nil,
		WithHostEventObserver(func(ev HostEvent) {
			enter()
			mu.Lock()
			typed = append(typed, ev)
			order = append(order, "typed")
			mu.Unlock()
			inCall.Store(0)
		}),
		WithHostEventJSONObserver(func(eventJSON []byte) {
			enter()
			mu.Lock()
			texts = append(texts, string(eventJSON)) // the buffer is lent for the call: a copy
			order = append(order, "json")
			mu.Unlock()
			inCall.Store(0)
		}))
	stopC := cbench.RecordHostEvents(unsafe.Pointer(a.ptr))
	if _, err := a.Chat(context.Background(), "write"); err != nil {
		t.Fatal(err)
	}
	fromC := stopC()
	mu.Lock()
	defer mu.Unlock()
	if len(fromC) != 3 || overlaps.Load() != 0 {
		t.Fatalf("C observer saw %d events, Go observers overlapped %d times", len(fromC), overlaps.Load())
	}
	// Byte for byte what the C API hands out, in the same order.
	if !reflect.DeepEqual(texts, fromC) {
		t.Fatalf("JSON observer\n%q\nC observer\n%q", texts, fromC)
	}
	// The same events as the typed observer, each delivered to both before the next.
	if len(typed) != len(texts) {
		t.Fatalf("typed observer saw %d events, JSON observer %d", len(typed), len(texts))
	}
	for i, text := range texts {
		ev, err := decodeHostEventText(text)
		if err != nil || !reflect.DeepEqual(ev, typed[i]) {
			t.Fatalf("event %d: %q decodes to %#v (%v), the typed observer got %#v", i, text, ev, err, typed[i])
		}
		if order[2*i] != "typed" || order[2*i+1] != "json" {
			t.Fatalf("delivery order %v", order)
		}
	}
	if _, ok := typed[0].(*PermissionDecisionEvent); !ok {
		t.Fatalf("first event %#v", typed[0])
	}
}

func TestHostEventJSONObserverRemoval(t *testing.T) {
	dir := t.TempDir()
	waitHandles(t) // the earlier tests' agents
	a := newAgent(t, config(dir, twoReadTurns, ""), nil)
	var typedN, jsonN atomic.Int32
	if _, err := a.AddHostEventObserver(func(HostEvent) { typedN.Add(1) }); err != nil {
		t.Fatal(err)
	}
	id, err := a.AddHostEventJSONObserver(func([]byte) { jsonN.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	if liveHandles.Load() != 2 {
		t.Fatalf("live handles %d", liveHandles.Load())
	}
	if _, err := a.Chat(context.Background(), "one"); err != nil {
		t.Fatal(err)
	}
	first := typedN.Load()
	if first == 0 || jsonN.Load() != first {
		t.Fatalf("first turn: typed %d, JSON %d", first, jsonN.Load())
	}
	// One removal API for both kinds; the closure is released on removal, once.
	if !a.RemoveHostEventObserver(id) || a.RemoveHostEventObserver(id) {
		t.Fatal("RemoveHostEventObserver")
	}
	eventually(t, "the removed observer's handle released", 5*time.Second, func() bool { return liveHandles.Load() == 1 })
	if _, err := a.Chat(context.Background(), "two"); err != nil {
		t.Fatal(err)
	}
	if typedN.Load() != 2*first || jsonN.Load() != first {
		t.Fatalf("after removal: typed %d, JSON %d (want %d, %d)", typedN.Load(), jsonN.Load(), 2*first, first)
	}
	// Released on agent close.
	if _, err := a.AddHostEventJSONObserver(func([]byte) {}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	waitHandles(t)
	// Refused registrations hold nothing: a nil closure, a closed agent, an agent New refused.
	if _, err := a.AddHostEventJSONObserver(func([]byte) {}); err == nil {
		t.Fatal("AddHostEventJSONObserver on a closed agent")
	}
	b := newAgent(t, config(dir, `{"text":"ok"}`, ""), nil)
	if _, err := b.AddHostEventJSONObserver(nil); !errors.Is(err, StatusNullArgument) {
		t.Fatalf("nil observer: %v", err)
	}
	if _, err := New(`{"llm":`, nil, WithHostEventJSONObserver(func([]byte) {})); err == nil {
		t.Fatal("New accepted a bad config")
	}
	if liveHandles.Load() != 0 {
		t.Fatalf("live handles %d after refused registrations", liveHandles.Load())
	}
}

func TestHostEventJSONObserverPanic(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	a := newAgent(t, config(dir, writeTurn, ""), nil,
		WithHostEventJSONObserver(func([]byte) { calls++; panic("observer exploded") }))
	if text, err := a.Chat(context.Background(), "write"); err != nil || text != "written" {
		t.Fatalf("Chat = %q, %v", text, err)
	}
	if calls != 3 {
		t.Fatalf("observer called %d times", calls)
	}
}
