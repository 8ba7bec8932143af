package agentao

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/agentao/libagentao/bindings/go/agentao/internal/cbench"
)

const benchDeltas = 2000

func benchConfig(dir string, response string) string {
	return fmt.Sprintf(`{"working_directory":%q,"llm":{"provider":"scripted","script":{"responses":[],"exhausted":%s}}}`, dir, response)
}

// noopTransport is a Go transport that does nothing with events (bench/bench.c's no-op emit).
type noopTransport struct {
	Broadcaster
	NullTransport
	n int
}

func (t *noopTransport) EmitEvent(Event) { t.n++ }

func streamGo(b *testing.B, a *Agent) (time.Duration, int) {
	t0 := time.Now()
	n := 0
	for c, err := range a.Stream(context.Background(), "go") {
		if err != nil {
			b.Fatal(err)
		}
		if c.Outcome == nil {
			n++
		}
	}
	d := time.Since(t0)
	cbench.ResetHistory(unsafe.Pointer(a.ptr))
	return d, n
}

// BenchmarkStreamDelta: one op is a turn of 2000 one-character deltas, streamed alternately
// through the Go binding (Agent.Stream) and straight through the C pull stream; reported per
// delta. "null" uses the built-in null transport on one shared agent; "transport" gives the Go
// agent a Go transport with a no-op EmitEvent and the C agent a no-op C emit, so the one
// EmitEvent callback per delta (llm_text) counts as binding overhead.
func BenchmarkStreamDelta(b *testing.B) {
	cfg := benchConfig(b.TempDir(), fmt.Sprintf(`{"repeat_text":{"unit":"x","count":%d}}`, benchDeltas))
	for _, mode := range []string{"null", "transport"} {
		b.Run(mode, func(b *testing.B) {
			var tr Transport
			if mode == "transport" {
				tr = &noopTransport{}
			}
			a, err := New(cfg, tr)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			cAgent := unsafe.Pointer(a.ptr)
			if mode == "transport" {
				cAgent = cbench.NewAgentCEmit(cfg)
				defer cbench.Free(cAgent)
			}
			streamGo(b, a) // warm-up
			cbench.StreamTurn(cAgent)
			var goT, cT time.Duration
			var goN, cN int
			b.ResetTimer()
			for range b.N {
				d, n := streamGo(b, a)
				goT, goN = goT+d, goN+n
				d, n = cbench.StreamTurn(cAgent)
				cT, cN = cT+d, cN+n
			}
			if goN != b.N*benchDeltas || cN != b.N*benchDeltas {
				b.Fatalf("deltas: go %d, c %d, want %d", goN, cN, b.N*benchDeltas)
			}
			goPer := float64(goT.Nanoseconds()) / float64(goN)
			cPer := float64(cT.Nanoseconds()) / float64(cN)
			b.ReportMetric(goPer, "go-ns/delta")
			b.ReportMetric(cPer, "c-ns/delta")
			b.ReportMetric(goPer-cPer, "overhead-ns/delta")
		})
	}
}

// BenchmarkTurn: one op is a one-response chat turn, alternately through Agent.Chat and
// agentao_agent_chat on the same agent (history reset outside the timed part).
func BenchmarkTurn(b *testing.B) {
	benchTurnAgainstC(b, func(ctx context.Context, a *Agent) error {
		_, err := a.Chat(ctx, "go")
		return err
	})
}

// BenchmarkRun: the same through Agent.Run (the asynchronous run API, waited for in C).
func BenchmarkRun(b *testing.B) {
	benchTurnAgainstC(b, func(ctx context.Context, a *Agent) error {
		_, err := a.Run(ctx, "go")
		return err
	})
}

// benchTurnAgainstC times turn and agentao_agent_chat alternately on one agent, per turn.
func benchTurnAgainstC(b *testing.B, turn func(context.Context, *Agent) error) {
	a, err := New(benchConfig(b.TempDir(), `{"text":"hello"}`), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	p := unsafe.Pointer(a.ptr)
	ctx, cancel := context.WithCancel(context.Background()) // a cancellable context, the usual case
	defer cancel()
	var goT, cT time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := turn(ctx, a); err != nil {
			b.Fatal(err)
		}
		goT += time.Since(t0)
		cbench.ResetHistory(p)
		cT += cbench.ChatTurn(p)
	}
	goPer := float64(goT.Nanoseconds()) / float64(b.N) / 1000
	cPer := float64(cT.Nanoseconds()) / float64(b.N) / 1000
	b.ReportMetric(goPer, "go-us/turn")
	b.ReportMetric(cPer, "c-us/turn")
	b.ReportMetric(goPer-cPer, "overhead-us/turn")
}

// BenchmarkHostEventJSONCopy: what a JSON observer that keeps an event pays for its copy
// (string(eventJSON); the conformance examples, 300-620 bytes), the copy the binding leaves
// to the closure.
func BenchmarkHostEventJSONCopy(b *testing.B) {
	data, err := os.ReadFile("testdata/host-event-examples.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	var sink string
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sink = string(lines[i%len(lines)])
	}
	_ = sink
}
