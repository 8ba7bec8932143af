package agentao

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// config is a scripted-provider config: responses is the JSON list body (no brackets), extra
// further top-level members (no braces, no trailing comma).
func config(dir, responses, extra string) string {
	if extra != "" {
		extra += ","
	}
	d, _ := json.Marshal(dir)
	return fmt.Sprintf(`{"working_directory":%s,%s"llm":{"provider":"scripted","script":{"responses":[%s]}}}`, d, extra, responses)
}

func newAgent(t *testing.T, cfg string, tr Transport, opts ...Option) *Agent {
	t.Helper()
	a, err := New(cfg, tr, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(timeout); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func readFile(dir, rel string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, rel))
	return string(b), err == nil
}

const writeTurn = `{"tool_calls":[{"id":"w1","name":"write_file","arguments":{"file_path":"out.txt","content":"deferred"}}]},` +
	`{"text":"written"},{"text":"second turn"}`

const loopTurn = `{"repeat":5,"text":"step {i}","tool_calls":[{"id":"l{i}","name":"list_directory","arguments":{"directory_path":"./d{i}"}}]},` +
	`{"text":"final answer"}`

// recorder is a Transport that records what it sees and answers as told.
type recorder struct {
	Broadcaster
	mu        sync.Mutex
	events    []Event
	inEmit    atomic.Int32
	overlaps  atomic.Int32
	confirms  atomic.Int32
	maxIters  atomic.Int32
	confirm   func(ConfirmRequest, *ConfirmReply) // nil: allow
	onMax     func(MaxIterationsRequest, *MaxIterationsReply)
	onEvent   func(Event)
	lastMax   MaxIterationsRequest
	lastTool  string
	pending   chan *ConfirmReply
	pendingMx chan *MaxIterationsReply
}

func newRecorder() *recorder {
	return &recorder{pending: make(chan *ConfirmReply, 16), pendingMx: make(chan *MaxIterationsReply, 16)}
}

func (r *recorder) EmitEvent(ev Event) {
	if r.inEmit.Swap(1) == 1 {
		r.overlaps.Add(1)
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	if r.onEvent != nil {
		r.onEvent(ev)
	}
	r.inEmit.Store(0)
}

func (r *recorder) ConfirmTool(req ConfirmRequest, reply *ConfirmReply) {
	r.confirms.Add(1)
	r.mu.Lock()
	r.lastTool = req.ToolName
	r.mu.Unlock()
	if r.confirm != nil {
		r.confirm(req, reply)
		return
	}
	_ = reply.Allow()
}

func (r *recorder) AskUser(q Question, reply *AnswerReply) { _ = reply.Answer("recorded answer") }

func (r *recorder) OnMaxIterations(req MaxIterationsRequest, reply *MaxIterationsReply) {
	r.maxIters.Add(1)
	r.mu.Lock()
	r.lastMax = req
	r.mu.Unlock()
	if r.onMax != nil {
		r.onMax(req, reply)
		return
	}
	_ = reply.Stop()
}

// deferConfirm keeps every confirmation reply for the test to answer.
func (r *recorder) deferConfirm() {
	r.confirm = func(_ ConfirmRequest, reply *ConfirmReply) { r.pending <- reply }
}

// types joins the event types, consecutive llm_text collapsed to "llm_text*".
func (r *recorder) types() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		ty := ev.Type
		if ty == "llm_text" {
			ty = "llm_text*"
			if len(out) > 0 && out[len(out)-1] == ty {
				continue
			}
		}
		out = append(out, ty)
	}
	return strings.Join(out, ",")
}

func (r *recorder) find(ty string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, ev := range r.events {
		if ev.Type == ty {
			out = append(out, ev)
		}
	}
	return out
}

// waitHandles waits until the library has released every handle the binding gave it.
func waitHandles(t *testing.T) {
	t.Helper()
	eventually(t, "every cgo.Handle released", 10*time.Second, func() bool { return liveHandles.Load() == 0 })
}
