package agentao

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const toolTurn = `{"text":"Let me write that file.","chunk_size":5,` +
	`"tool_calls":[{"id":"call_w1","name":"write_file","arguments":{"file_path":"notes/a.txt","content":"alpha"}}]},` +
	`{"text":"Done writing.","chunk_size":4}`

func TestTransportCanonicalOrder(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	var confirmReq ConfirmRequest
	rec.confirm = func(req ConfirmRequest, r *ConfirmReply) { confirmReq = req; _ = r.Allow() }
	a := newAgent(t, config(dir, toolTurn, ""), rec)
	text, err := a.Chat(context.Background(), "write a file")
	if err != nil || text != "Done writing." {
		t.Fatalf("Chat = %q, %v", text, err)
	}
	if got, _ := readFile(dir, "notes/a.txt"); got != "alpha" {
		t.Fatalf("notes/a.txt = %q", got)
	}
	want := "turn_begin,turn_start,llm_call_started,llm_call_delta,llm_text*,llm_call_completed," +
		"tool_confirmation,tool_start,tool_complete,tool_result,turn_start,llm_call_started," +
		"llm_call_delta,llm_text*,llm_call_completed,turn_end"
	if got := rec.types(); got != want {
		t.Fatalf("event order:\n got %s\nwant %s", got, want)
	}
	if confirmReq.ToolName != "write_file" || confirmReq.CallID != "call_w1" {
		t.Fatalf("confirm request %+v", confirmReq)
	}
	var args map[string]string
	if err := json.Unmarshal(confirmReq.Args, &args); err != nil || args["content"] != "alpha" {
		t.Fatalf("confirm args %s: %v", confirmReq.Args, err)
	}
	var joined strings.Builder
	for _, ev := range rec.find("llm_text") {
		var d struct{ Chunk string }
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("llm_text data %s: %v", ev.Data, err)
		}
		joined.WriteString(d.Chunk)
	}
	if joined.String() != "Let me write that file.Done writing." {
		t.Fatalf("llm_text chunks %q", joined.String())
	}
	var end struct {
		Status    string `json:"status"`
		FinalText string `json:"final_text"`
		ToolCount int    `json:"tool_count"`
	}
	ends := rec.find("turn_end")
	if len(ends) != 1 || json.Unmarshal(ends[0].Data, &end) != nil || end.Status != "ok" || end.FinalText != "Done writing." || end.ToolCount != 1 {
		t.Fatalf("turn_end %+v", end)
	}
	if rec.overlaps.Load() != 0 {
		t.Fatalf("%d EmitEvent calls overlapped", rec.overlaps.Load())
	}
}

func TestParseEventFallback(t *testing.T) {
	ev := parseEvent([]byte(`{"data":{"x":1},"type":"odd","schema_version":1}`))
	if ev.Type != "odd" || string(ev.Data) != `{"x":1}` {
		t.Fatalf("fallback parse: %+v", ev)
	}
	ev = parseEvent([]byte(`{"type":"t","schema_version":1,"data":{"y":"\""}}`))
	if ev.Type != "t" || string(ev.Data) != `{"y":"\""}` {
		t.Fatalf("fast parse: %+v", ev)
	}
}

func TestDeclinedConfirmation(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	rec.confirm = func(_ ConfirmRequest, r *ConfirmReply) { _ = r.Deny() }
	a := newAgent(t, config(dir, writeTurn, ""), rec)
	if text, err := a.Chat(context.Background(), "write"); err != nil || text != "written" {
		t.Fatalf("Chat = %q, %v", text, err)
	}
	if _, ok := readFile(dir, "out.txt"); ok {
		t.Fatal("a declined write ran")
	}
	h, _ := a.History()
	if !strings.Contains(string(h), "Tool execution declined: 'write_file' needed approval and was not approved.") {
		t.Fatalf("history %s", h)
	}
}

func TestDeferredConfirmFromAnotherGoroutine(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	rec.deferConfirm()
	a := newAgent(t, config(dir, writeTurn, ""), rec)
	answered := make(chan error, 1)
	go func() {
		r := <-rec.pending
		time.Sleep(150 * time.Millisecond)
		answered <- r.Allow()
		answered <- r.Deny() // a second answer is refused
	}()
	t0 := time.Now()
	text, err := a.Chat(context.Background(), "write")
	took := time.Since(t0)
	if err != nil || text != "written" {
		t.Fatalf("Chat = %q, %v", text, err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if err := <-answered; !errors.Is(err, ErrAnswered) {
		t.Fatalf("second answer: %v", err)
	}
	if took < 140*time.Millisecond {
		t.Fatalf("the turn did not wait for the deferred answer (%v)", took)
	}
	if got, _ := readFile(dir, "out.txt"); got != "deferred" {
		t.Fatalf("out.txt = %q", got)
	}
}

func TestDeferredFailIsHostError(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	rec.deferConfirm()
	a := newAgent(t, config(dir, writeTurn, ""), rec)
	go func() { _ = (<-rec.pending).Fail("the operator said no") }()
	_, err := a.Chat(context.Background(), "write")
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusHostError || !strings.Contains(e.Message, "the operator said no") {
		t.Fatalf("Chat: %v", err)
	}
	last, _ := a.LastTurn()
	if last == nil || last.Status != "error" || last.Error == nil || *last.Error != "the operator said no" {
		t.Fatalf("LastTurn %+v", last)
	}
}

func TestDroppedReplyFailsTheRequest(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	rec.confirm = func(ConfirmRequest, *ConfirmReply) {} // forgets the reply
	a := newAgent(t, config(dir, writeTurn, ""), rec)
	errc := make(chan error, 1)
	go func() { _, err := a.Chat(context.Background(), "write"); errc <- err }()
	var err error
	eventually(t, "the dropped reply's finalizer", 10*time.Second, func() bool {
		runGC()
		select {
		case err = <-errc:
			return true
		default:
			return false
		}
	})
	if !errors.Is(err, StatusHostError) || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("Chat: %v", err)
	}
}

func TestReplyTimeout(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	rec.deferConfirm()
	a := newAgent(t, config(dir, writeTurn, `"reply_timeout_ms":200`), rec)
	t0 := time.Now()
	_, err := a.Chat(context.Background(), "write")
	if took := time.Since(t0); !errors.Is(err, StatusTimeout) || took < 190*time.Millisecond || took > 5*time.Second {
		t.Fatalf("Chat: %v after %v", err, took)
	}
	if err := (<-rec.pending).Allow(); err != nil { // late: harmless
		t.Fatal(err)
	}
}

func runMax(t *testing.T, budget int, answer func(*MaxIterationsReply) error) (*recorder, *Agent, string, error) {
	t.Helper()
	dir := t.TempDir()
	rec := newRecorder()
	rec.onMax = func(_ MaxIterationsRequest, r *MaxIterationsReply) {
		if err := answer(r); err != nil {
			t.Errorf("answer: %v", err)
		}
	}
	a := newAgent(t, config(dir, loopTurn, ""), rec)
	text, err := a.Chat(context.Background(), "work", WithMaxIterations(budget))
	return rec, a, text, err
}

func TestMaxIterations(t *testing.T) {
	t.Run("stop", func(t *testing.T) {
		rec, a, text, err := runMax(t, 2, (*MaxIterationsReply).Stop)
		if err != nil || text != "step 2" || rec.maxIters.Load() != 1 {
			t.Fatalf("Chat = %q, %v (%d callbacks)", text, err, rec.maxIters.Load())
		}
		if rec.lastMax.Count != 2 || len(rec.lastMax.PendingCalls) != 1 || rec.lastMax.PendingCalls[0].Name != "list_directory" ||
			!strings.Contains(rec.lastMax.PendingCalls[0].Args, "d2") {
			t.Fatalf("request %+v", rec.lastMax)
		}
		last, _ := a.LastTurn()
		if last.IncompleteReason == nil || *last.IncompleteReason != "max_iterations" || last.IsAnswer || last.ToolCount != 2 {
			t.Fatalf("outcome %+v", last)
		}
	})
	t.Run("continue", func(t *testing.T) {
		rec, a, text, err := runMax(t, 3, (*MaxIterationsReply).Continue)
		if err != nil || text != "final answer" || rec.maxIters.Load() != 1 {
			t.Fatalf("Chat = %q, %v (%d callbacks)", text, err, rec.maxIters.Load())
		}
		if last, _ := a.LastTurn(); last.ToolCount != 5 || last.IncompleteReason != nil {
			t.Fatalf("outcome %+v", last)
		}
	})
	t.Run("new instruction", func(t *testing.T) {
		_, a, text, err := runMax(t, 3, func(r *MaxIterationsReply) error { return r.NewInstruction("Please wrap up in one sentence.") })
		if err != nil || text != "final answer" {
			t.Fatalf("Chat = %q, %v", text, err)
		}
		if h, _ := a.History(); !strings.Contains(string(h), `{"role":"user","content":"Please wrap up in one sentence."}`) {
			t.Fatalf("history %s", h)
		}
	})
	t.Run("deferred continue from another goroutine", func(t *testing.T) {
		dir := t.TempDir()
		rec := newRecorder()
		rec.onMax = func(_ MaxIterationsRequest, r *MaxIterationsReply) { rec.pendingMx <- r }
		a := newAgent(t, config(dir, loopTurn, ""), rec)
		go func() {
			r := <-rec.pendingMx
			time.Sleep(100 * time.Millisecond)
			_ = r.Continue()
		}()
		t0 := time.Now()
		text, err := a.Chat(context.Background(), "work", WithMaxIterations(3))
		if err != nil || text != "final answer" || time.Since(t0) < 95*time.Millisecond {
			t.Fatalf("Chat = %q, %v after %v", text, err, time.Since(t0))
		}
	})
	t.Run("failed", func(t *testing.T) {
		_, _, _, err := runMax(t, 1, func(r *MaxIterationsReply) error { return r.Fail("no budget") })
		if !errors.Is(err, StatusHostError) {
			t.Fatalf("Chat: %v", err)
		}
	})
}

// panicky panics in the methods it is told to.
type panicky struct {
	Broadcaster
	emit, confirm, max bool
	emits              int
}

func (p *panicky) EmitEvent(Event) {
	p.emits++
	if p.emit {
		panic("emit exploded")
	}
}

func (p *panicky) ConfirmTool(_ ConfirmRequest, r *ConfirmReply) {
	if p.confirm {
		panic("confirm exploded")
	}
	_ = r.Allow()
}

func (p *panicky) AskUser(_ Question, r *AnswerReply) { panic("ask exploded") }

func (p *panicky) OnMaxIterations(_ MaxIterationsRequest, r *MaxIterationsReply) {
	if p.max {
		panic("max exploded")
	}
	_ = r.Stop()
}

func TestPanicInCallbacks(t *testing.T) {
	dir := t.TempDir()
	t.Run("EmitEvent: events lost, the turn goes on", func(t *testing.T) {
		p := &panicky{emit: true}
		a := newAgent(t, config(dir, writeTurn, ""), p)
		if text, err := a.Chat(context.Background(), "write"); err != nil || text != "written" {
			t.Fatalf("Chat = %q, %v", text, err)
		}
		if p.emits < 5 {
			t.Fatalf("only %d emits", p.emits)
		}
	})
	t.Run("ConfirmTool: the request fails, HOST_ERROR", func(t *testing.T) {
		a := newAgent(t, config(dir, writeTurn, ""), &panicky{confirm: true})
		_, err := a.Chat(context.Background(), "write")
		if !errors.Is(err, StatusHostError) || !strings.Contains(err.Error(), "panic in the host's ConfirmTool: confirm exploded") {
			t.Fatalf("Chat: %v", err)
		}
	})
	t.Run("OnMaxIterations: the request fails, HOST_ERROR", func(t *testing.T) {
		a := newAgent(t, config(dir, loopTurn, ""), &panicky{max: true})
		_, err := a.Chat(context.Background(), "work", WithMaxIterations(1))
		if !errors.Is(err, StatusHostError) || !strings.Contains(err.Error(), "max exploded") {
			t.Fatalf("Chat: %v", err)
		}
	})
	t.Run("observer: event lost, the turn goes on", func(t *testing.T) {
		calls := 0
		a := newAgent(t, config(dir, writeTurn, ""), nil, WithHostEventObserver(func(HostEvent) { calls++; panic("observer exploded") }))
		if text, err := a.Chat(context.Background(), "write"); err != nil || text != "written" {
			t.Fatalf("Chat = %q, %v", text, err)
		}
		if calls != 3 {
			t.Fatalf("observer called %d times", calls)
		}
	})
	t.Run("the agent still works after", func(t *testing.T) {
		a := newAgent(t, config(dir, `{"text":"still alive"}`, ""), &panicky{})
		if text, err := a.Chat(context.Background(), "hi"); err != nil || text != "still alive" {
			t.Fatalf("Chat = %q, %v", text, err)
		}
	})
}
