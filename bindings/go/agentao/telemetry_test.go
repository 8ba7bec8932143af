package agentao

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

const (
	hostTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	hostParent = "00-" + hostTrace + "-00f067aa0ba902b7-01"
	turnTrace  = "0af7651916cd43dd8448eb211c80319c"
	turnParent = "00-" + turnTrace + "-b7ad6b7169203331-01"
	// Port 9 (discard) on loopback: nothing answers; exports fail and the turns must not care.
	downExporter = `"telemetry":{"endpoint":"http://127.0.0.1:9","timeout_ms":500}`
)

// traceIDsSeen records the trace id TraceID gives inside EmitEvent at each turn's end.
type traceIDsSeen struct {
	mu    sync.Mutex
	agent *Agent
	last  string
	err   error
}

func (s *traceIDsSeen) recorder() *recorder {
	r := newRecorder()
	r.onEvent = func(ev Event) {
		if ev.Type != "turn_end" {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.last, s.err = s.agent.TraceID()
	}
	return r
}

func (s *traceIDsSeen) get(t *testing.T) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		t.Fatalf("TraceID inside EmitEvent: %v", s.err)
	}
	return s.last
}

func chatWant(t *testing.T, a *Agent, msg, want string) {
	t.Helper()
	if text, err := a.Chat(context.Background(), msg); err != nil || text != want {
		t.Fatalf("Chat(%q): %q %v", msg, text, err)
	}
}

func TestTelemetryWithoutAnExporter(t *testing.T) {
	seen := &traceIDsSeen{}
	a := newAgent(t, config(t.TempDir(), `{"text":"hi"}`, ""), seen.recorder())
	seen.agent = a
	if id, err := a.TraceID(); err != nil || id != "" {
		t.Fatalf("TraceID before a turn: %q %v", id, err)
	}
	// Checked even so, and accepted.
	if err := a.SetTraceparent(hostParent, ""); err != nil {
		t.Fatalf("SetTraceparent: %v", err)
	}
	chatWant(t, a, "go", "hi")
	if id := seen.get(t); id != "" {
		t.Fatalf("TraceID in the turn with no exporter: %q", id)
	}
	st, err := a.TelemetryStatus()
	if err != nil || st.Enabled || st.ExportedSpans != 0 || st.FailedExports != 0 || st.LastError != nil {
		t.Fatalf("TelemetryStatus: %+v %v", st, err)
	}
	closeAndWait(t, a)
	if _, err := a.TraceID(); err != ErrClosed {
		t.Fatalf("TraceID after Close: %v", err)
	}
	if err := a.SetTraceparent(hostParent, ""); err != ErrClosed {
		t.Fatalf("SetTraceparent after Close: %v", err)
	}
}

func TestTelemetryMalformedValuesAreRefused(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"hi"}`, ""), nil)
	for _, c := range []struct {
		traceparent, tracestate string
		turn                    bool
		want                    Status
		needle                  string
	}{
		{"00-xyz-00f067aa0ba902b7-01", "", false, StatusInvalidArgument, "trace id"},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", false, StatusInvalidArgument, "all zeros"},
		{"", "a=b", true, StatusInvalidArgument, "needs a traceparent"},
		{hostParent, "no-equals", true, StatusInvalidArgument, "key=value"},
		{"00-\x00", "", false, StatusInvalidArgument, "NUL"},
		{"00-\xff\xfe", "", false, StatusInvalidUTF8, "traceparent"},
	} {
		set := a.SetTraceparent
		if c.turn {
			set = a.SetTurnTraceparent
		}
		err := set(c.traceparent, c.tracestate)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.needle) {
			t.Errorf("set(%q, %q, turn %v): %v, want %v with %q", c.traceparent, c.tracestate, c.turn, err, c.want, c.needle)
		}
	}
	// Empty clears (and withdraws): accepted with nothing set.
	if err := a.SetTraceparent("", ""); err != nil {
		t.Fatalf("clear: %v", err)
	}
	if err := a.SetTurnTraceparent("", ""); err != nil {
		t.Fatalf("withdraw: %v", err)
	}
}

func TestTelemetryTraceparentPerAgentAndPerTurn(t *testing.T) {
	seen := &traceIDsSeen{}
	a := newAgent(t, config(t.TempDir(),
		`{"text":"one"},{"text":"two"},{"text":"three"},{"text":"four"}`, downExporter), seen.recorder())
	seen.agent = a
	if err := a.SetTraceparent(hostParent, "vendor=abc"); err != nil {
		t.Fatalf("SetTraceparent: %v", err)
	}
	// A malformed value afterwards changes nothing: the turn is still the host's trace.
	if err := a.SetTraceparent("00-bad", ""); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("malformed SetTraceparent: %v", err)
	}
	if err := a.SetTurnTraceparent("00-bad", ""); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("malformed SetTurnTraceparent: %v", err)
	}
	chatWant(t, a, "first", "one")
	if id := seen.get(t); id != hostTrace {
		t.Fatalf("trace id in the first turn: %q", id)
	}
	if id, err := a.TraceID(); err != nil || id != hostTrace {
		t.Fatalf("TraceID after the turn: %q %v", id, err)
	}

	// The next turn's traceparent wins once, then the agent's again.
	if err := a.SetTurnTraceparent(turnParent, ""); err != nil {
		t.Fatalf("SetTurnTraceparent: %v", err)
	}
	chatWant(t, a, "second", "two")
	if id := seen.get(t); id != turnTrace {
		t.Fatalf("trace id in the per-turn turn: %q", id)
	}
	chatWant(t, a, "third", "three")
	if id := seen.get(t); id != hostTrace {
		t.Fatalf("trace id after the per-turn turn: %q", id)
	}

	// Cleared: the turn starts a trace of its own.
	if err := a.SetTraceparent("", ""); err != nil {
		t.Fatalf("clear: %v", err)
	}
	chatWant(t, a, "fourth", "four")
	if id := seen.get(t); len(id) != 32 || id == hostTrace || id == turnTrace {
		t.Fatalf("trace id of a turn of its own: %q", id)
	}

	st, err := a.TelemetryStatus()
	if err != nil || !st.Enabled {
		t.Fatalf("TelemetryStatus: %+v %v", st, err)
	}
}
