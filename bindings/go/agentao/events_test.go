package agentao

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestHostEvents(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var observed []HostEvent
	var inCall, overlaps atomic.Int32
	obs := func(ev HostEvent) {
		if inCall.Swap(1) == 1 {
			overlaps.Add(1)
		}
		mu.Lock()
		observed = append(observed, ev)
		mu.Unlock()
		inCall.Store(0)
	}
	a := newAgent(t, config(dir, writeTurn, ""), nil, WithHostEventObserver(obs))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hs, err := a.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	if _, err := a.Events(ctx); !errors.Is(err, StatusStreamSubscribe) {
		t.Fatalf("second stream with the same filter: %v", err)
	}
	filtered, err := a.Events(ctx, a.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	defer filtered.Close()
	if _, err := a.Chat(context.Background(), "write"); err != nil {
		t.Fatal(err)
	}

	ev, err := hs.Next()
	pd, ok := ev.(*PermissionDecisionEvent)
	if err != nil || !ok {
		t.Fatalf("first event %#v, %v", ev, err)
	}
	if pd.SessionID != a.SessionID() || pd.ToolName != "write_file" || pd.ToolCallID == nil || *pd.ToolCallID != "w1" ||
		pd.Outcome != "prompt" || pd.Mode != WorkspaceWrite || pd.DecidedAt.IsZero() || pd.DecisionID == "" {
		t.Fatalf("permission decision %+v", pd)
	}
	for _, phase := range []string{"started", "completed"} {
		ev, err := hs.Next()
		tl, ok := ev.(*ToolLifecycleEvent)
		if err != nil || !ok || tl.Phase != phase || tl.ToolName != "write_file" || tl.ToolCallID != "w1" || tl.StartedAt.IsZero() {
			t.Fatalf("tool lifecycle (%s) %#v, %v", phase, ev, err)
		}
		if phase == "completed" && (tl.Outcome == nil || *tl.Outcome != "ok" || tl.CompletedAt == nil) {
			t.Fatalf("completed %+v", tl)
		}
	}
	var types []string
	for ev, err := range filtered.All() {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.EventType())
		if len(types) == 3 {
			break
		}
	}
	if strings.Join(types, ",") != "permission_decision,tool_lifecycle,tool_lifecycle" {
		t.Fatalf("filtered stream %v", types)
	}
	mu.Lock()
	if len(observed) != 3 || overlaps.Load() != 0 {
		t.Fatalf("observer saw %d events, %d overlaps", len(observed), overlaps.Load())
	}
	mu.Unlock()

	// Nothing more: a deadline ends Next with the context's error.
	short, cancelShort := context.WithTimeout(context.Background(), 60*time.Millisecond)
	defer cancelShort()
	hs.Close()
	hs2, err := a.Events(short) // a closed stream frees its filter
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hs2.Next(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an idle stream: %v", err)
	}
	hs2.Close()
	if _, err := hs2.Next(); err == nil {
		t.Fatal("Next after Close")
	}
}

func TestHostEventObservers(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, config(dir, writeTurn, ""), nil)
	var n atomic.Int32
	id, err := a.AddHostEventObserver(func(HostEvent) { n.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	if liveHandles.Load() != 1 {
		t.Fatalf("live handles %d", liveHandles.Load())
	}
	if _, err := a.Chat(context.Background(), "write"); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 3 {
		t.Fatalf("observer saw %d events", n.Load())
	}
	if !a.RemoveHostEventObserver(id) || a.RemoveHostEventObserver(id) {
		t.Fatal("RemoveHostEventObserver")
	}
	waitHandles(t) // userdata_free deleted the handle
	if _, err := a.AddHostEventObserver(func(HostEvent) {}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	waitHandles(t)
}

func TestDecodeConformanceExamples(t *testing.T) {
	// A copy of the conformance suite's examples (tests/conformance/host-event-examples.jsonl).
	b, err := os.ReadFile("testdata/host-event-examples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		ev, err := decodeHostEvent([]byte(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if _, unknown := ev.(*UnknownHostEvent); unknown {
			t.Fatalf("unknown type: %s", line)
		}
		kinds[ev.EventType()]++
	}
	if len(kinds) < 2 {
		t.Fatalf("kinds %v", kinds)
	}
	ev, err := decodeHostEvent([]byte(`{"event_type":"future_thing","x":1}`))
	if u, ok := ev.(*UnknownHostEvent); err != nil || !ok || u.Type != "future_thing" {
		t.Fatalf("unknown event %#v, %v", ev, err)
	}
}

// A stream gives the events it holds after its agent is closed, then ends: All stops, Next
// reports StatusClosed.
func TestHostEventsEndWhenTheAgentIsClosed(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), writeTurn, ""), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs, err := a.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	if _, err := a.Chat(context.Background(), "write"); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for ev, err := range hs.All() {
		if err != nil {
			t.Fatalf("after %v: %v", kinds, err)
		}
		kinds = append(kinds, ev.EventType())
	}
	if ctx.Err() != nil {
		t.Fatalf("the stream did not end: %v", ctx.Err())
	}
	want := []string{"permission_decision", "tool_lifecycle", "tool_lifecycle"}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	if _, err := hs.Next(); !errors.Is(err, StatusClosed) {
		t.Fatalf("Next after the end: %v", err)
	}
}

// A Next waiting for an event returns as soon as its context ends or the stream is closed
// from another goroutine: the library wakes it, nothing polls.
func TestHostEventsNextWakesOnCancelAndClose(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), writeTurn, ""), nil)
	ctx, cancel := context.WithCancel(context.Background())
	hs, err := a.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	time.AfterFunc(50*time.Millisecond, cancel)
	t0 := time.Now()
	if _, err := hs.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after the context's end: %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("Next returned %v after the cancel", d)
	}
	// The closed stream freed its filter.
	other, err := a.Events(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { _ = other.Close() })
	if _, err := other.Next(); err != ErrClosed {
		t.Fatalf("Next after Close: %v", err)
	}
	if _, err := other.Next(); err != ErrClosed {
		t.Fatalf("Next after Close, again: %v", err)
	}
}

// writeTurns is a script of n turns, each writing a file (host events every turn).
func writeTurns(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"tool_calls":[{"id":"w%d","name":"write_file","arguments":{"file_path":"f%d.txt","content":"x"}}]},{"text":"ok"}`, i, i)
	}
	return b.String()
}

// A stream a careless host drops without Close is finalized: its filter is free again and its
// full queue does not hold later turns. (The context watch held the stream in a cycle, so the
// finalizer never ran and the 22nd turn waited forever.)
func TestHostEventsAnAbandonedStreamIsFinalized(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), writeTurns(40), ""), nil)
	func() {
		hs, err := a.Events(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Chat(context.Background(), "go"); err != nil {
			t.Fatal(err)
		}
		for _, err := range hs.All() {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}()
	reopened := false
	for i := 0; i < 50 && !reopened; i++ {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		if hs, err := a.Events(context.Background()); err == nil {
			reopened = true
			hs.Close()
		}
	}
	if !reopened {
		t.Fatal("the abandoned stream was never finalized: its filter is still taken")
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 39; i++ {
			if _, err := a.Chat(context.Background(), "go"); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("turns hung behind an abandoned stream's full queue")
	}
}

// Next from inside a callback, while another goroutine waits in Next, answers StatusReentrant
// (it waited for that reader's lock, and the turn waited on the callback, for ever).
func TestHostEventsNextInsideACallbackIsReentrant(t *testing.T) {
	rec := newRecorder()
	a := newAgent(t, config(t.TempDir(), writeTurn, ""), rec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs, err := a.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	go func() {
		for range hs.All() {
		}
	}()
	time.Sleep(100 * time.Millisecond) // the reader now waits inside the library
	var once sync.Once
	inCallback := make(chan error, 1)
	rec.onEvent = func(Event) {
		once.Do(func() {
			_, err := hs.Next()
			inCallback <- err
		})
	}
	done := make(chan error, 1)
	go func() { _, err := a.Chat(context.Background(), "write"); done <- err }()
	select {
	case err := <-inCallback:
		if !errors.Is(err, StatusReentrant) {
			t.Fatalf("Next inside a callback: %v, want StatusReentrant", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next inside a callback blocked behind the other reader")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The event type is read without a JSON pass when it leads, as the library writes it; any
// other shape goes through the decoder and decodes the same.
func TestDecodeHostEventTypeFastPathAndFallback(t *testing.T) {
	for _, doc := range []string{
		`{"event_type":"future_kind","x":1}`,
		`{"x":1,"event_type":"future_kind"}`,
		`{"event_type":"future\u005fkind","x":1}`,
	} {
		ev, err := decodeHostEvent([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if u, ok := ev.(*UnknownHostEvent); !ok || u.Type != "future_kind" {
			t.Fatalf("%s: %#v", doc, ev)
		}
	}
	for _, doc := range []string{`{"event_type":"tool_lifecycle"`, `{"event_type":"future_kind",`} {
		if _, err := decodeHostEvent([]byte(doc)); !errors.Is(err, StatusInvalidJSON) {
			t.Fatalf("%s: %v", doc, err)
		}
	}
}
