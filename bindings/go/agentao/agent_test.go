package agentao

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLifecycle(t *testing.T) {
	if v := Version(); v != "0.1.0" && !strings.Contains(v, ".") {
		t.Fatalf("Version() = %q", v)
	}
	dir := t.TempDir()
	rec := newRecorder()
	a, err := New(config(dir, `{"text":"hello"}`, ""), rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.SessionID()) != 36 {
		t.Fatalf("session id %q", a.SessionID())
	}
	if last, err := a.LastTurn(); err != nil || last != nil {
		t.Fatalf("LastTurn before a turn = %v, %v", last, err)
	}
	text, err := a.Chat(context.Background(), "hi")
	if err != nil || text != "hello" {
		t.Fatalf("Chat = %q, %v", text, err)
	}
	if liveHandles.Load() != 1 {
		t.Fatalf("live handles %d, want 1 (the transport)", liveHandles.Load())
	}
	a.Close()
	a.Close() // idempotent
	waitHandles(t)
	if _, err := a.Chat(context.Background(), "again"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Chat after Close: %v", err)
	}
	if _, err := a.History(); !errors.Is(err, ErrClosed) {
		t.Fatalf("History after Close: %v", err)
	}
	for range a.Stream(context.Background(), "x") {
		break
	}

	// A config given as a Go value is marshalled.
	b, err := New(map[string]any{"working_directory": dir,
		"llm": map[string]any{"provider": "scripted", "script": map[string]any{"responses": []any{map[string]any{"text": "from a map"}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if text, err := b.Chat(context.Background(), "hi"); err != nil || text != "from a map" {
		t.Fatalf("Chat = %q, %v", text, err)
	}
	b.Close()
}

func TestFinalizerReleasesAgent(t *testing.T) {
	dir := t.TempDir()
	func() {
		a, err := New(config(dir, `{"text":"x"}`, ""), newRecorder())
		if err != nil {
			t.Fatal(err)
		}
		_ = a.SessionID()
	}()
	eventually(t, "the finalizer to free the agent and its transport", 10*time.Second, func() bool {
		runGC()
		return liveHandles.Load() == 0
	})
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	_, err := New(`{"working_directory":42}`, newRecorder())
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusInvalidConfig || !strings.Contains(e.Message, "working_directory") {
		t.Fatalf("bad config: %v", err)
	}
	waitHandles(t) // the transport handle was released by the failed New
	if _, err := New(`{"working_directory":`, nil); !errors.Is(err, StatusInvalidJSON) {
		t.Fatalf("bad JSON: %v", err)
	}
	if _, err := New("{\"working_directory\":\"a\x00b\"}", nil); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("NUL in config: %v", err)
	}
	if _, err := New(func() {}, nil); !errors.Is(err, StatusInvalidJSON) {
		t.Fatalf("unmarshallable config: %v", err)
	}
	if _, err := New("{\"working_directory\":\"\xff\"}", nil); !errors.Is(err, StatusInvalidUTF8) {
		t.Fatalf("bad UTF-8 config: %v", err)
	}
	a := newAgent(t, config(dir, `{"text":"ok"}`, ""), nil)
	if _, err := a.Chat(context.Background(), "bad \xff utf-8"); !errors.Is(err, StatusInvalidUTF8) {
		t.Fatalf("bad UTF-8 message: %v", err)
	}
	if _, err := a.Chat(context.Background(), "nul \x00 byte"); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("NUL in message: %v", err)
	}
	if err := a.SetHistory(`[{"role":"wizard"}]`); err == nil {
		t.Fatal("SetHistory accepted a bad role")
	}
	if err := a.SetHistory(`[`); !errors.Is(err, StatusInvalidJSON) {
		t.Fatalf("SetHistory bad JSON: %v", err)
	}
	if _, err := a.AddHostEventObserver(nil); !errors.Is(err, StatusNullArgument) {
		t.Fatalf("nil observer: %v", err)
	}
	// Nothing above consumed the script.
	if text, err := a.Chat(context.Background(), "hi"); err != nil || text != "ok" {
		t.Fatalf("Chat = %q, %v", text, err)
	}
}

func TestErrors(t *testing.T) {
	err := error(&Error{Status: StatusHostError, Message: "the operator said no"})
	if !errors.Is(err, StatusHostError) || errors.Is(err, StatusCancelled) {
		t.Fatal("errors.Is on statuses")
	}
	if !errors.Is(err, &Error{Status: StatusHostError}) {
		t.Fatal("errors.Is on *Error")
	}
	if got := err.Error(); got != "agentao: HOST_ERROR: the operator said no" {
		t.Fatalf("Error() = %q", got)
	}
	if StatusCancelled.String() != "CANCELLED" || Status(99).String() != "UNKNOWN" {
		t.Fatal("status names")
	}
}

func TestHistoryAndUsage(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, config(dir, `{"text":"one","usage":{"prompt_tokens":7,"completion_tokens":3}},{"text":"two"}`, ""), nil)
	if _, err := a.Chat(context.Background(), "first"); err != nil {
		t.Fatal(err)
	}
	h, err := a.History()
	if err != nil || !strings.Contains(string(h), `first"},{"role":"assistant","content":"one"}`) {
		t.Fatalf("History = %s, %v", h, err)
	}
	u, err := a.Usage()
	if err != nil || u.PromptTokens != 7 || u.CompletionTokens != 3 {
		t.Fatalf("Usage = %+v, %v", u, err)
	}
	if err := a.SetHistory([]map[string]string{{"role": "user", "content": "replaced"}}); err != nil {
		t.Fatal(err)
	}
	h2, _ := a.History()
	if string(h2) != `[{"content":"replaced","role":"user"}]` { // the library keeps the keys as given
		t.Fatalf("History after SetHistory = %s", h2)
	}
	if err := a.SetHistory(h); err != nil {
		t.Fatal(err)
	}
	if h3, _ := a.History(); string(h3) != string(h) {
		t.Fatalf("History did not round-trip:\n%s\n%s", h, h3)
	}
}

func TestRunAndTurnInProgress(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	rec.deferConfirm()
	a := newAgent(t, config(dir, writeTurn, ""), rec)
	var wg sync.WaitGroup
	wg.Add(1)
	var out *Outcome
	var runErr error
	go func() {
		defer wg.Done()
		out, runErr = a.Run(context.Background(), "write")
	}()
	reply := <-rec.pending
	if _, err := a.Chat(context.Background(), "second"); !errors.Is(err, StatusTurnInProgress) {
		t.Fatalf("second turn: %v", err)
	}
	if err := a.SetHistory(`[]`); !errors.Is(err, StatusTurnInProgress) {
		t.Fatalf("SetHistory during a turn: %v", err)
	}
	if err := reply.Allow(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if runErr != nil || out == nil || out.Text != "written" || out.Status != "ok" || out.ToolCount != 1 || !out.IsAnswer || out.IncompleteReason != nil {
		t.Fatalf("Run = %+v, %v", out, runErr)
	}
	if got, _ := readFile(dir, "out.txt"); got != "deferred" {
		t.Fatalf("out.txt = %q", got)
	}
}

func TestReentrantFromCallback(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	var a *Agent
	var inner error
	rec.confirm = func(_ ConfirmRequest, r *ConfirmReply) {
		_, inner = a.Chat(context.Background(), "nested")
		if h, err := a.History(); err != nil || len(h) == 0 { // getters are allowed
			inner = errors.Join(inner, errors.New("History inside a callback failed"))
		}
		_ = r.Allow()
	}
	a = newAgent(t, config(dir, writeTurn, ""), rec)
	if _, err := a.Chat(context.Background(), "write"); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(inner, StatusReentrant) {
		t.Fatalf("nested Chat: %v", inner)
	}
}

func TestCloseDuringTurnAndInsideCallback(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	rec.deferConfirm()
	a, err := New(config(dir, writeTurn, ""), rec)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := a.Chat(context.Background(), "write"); errc <- err }()
	reply := <-rec.pending
	t0 := time.Now()
	a.Close()
	err = <-errc
	took := time.Since(t0)
	t.Logf("Chat returned %v after Close", took)
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusCancelled || !strings.Contains(e.Message, "session-closed") {
		t.Fatalf("Chat after Close: %v", err)
	}
	if took > 2*time.Second {
		t.Fatalf("Close took %v to end the turn", took)
	}
	// The late answer is harmless.
	if err := reply.Allow(); err != nil {
		t.Fatalf("late reply: %v", err)
	}
	if _, ok := readFile(dir, "out.txt"); ok {
		t.Fatal("the cancelled call ran after its late approval")
	}
	waitHandles(t)

	// Close inside the agent's own EmitEvent.
	rec2 := newRecorder()
	var b *Agent
	var once sync.Once
	rec2.onEvent = func(ev Event) {
		if ev.Type == "llm_call_started" {
			once.Do(func() { b.Close() })
		}
	}
	b, err = New(config(dir, `{"chunks":["a","b"],"delay_ms":20}`, ""), rec2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Chat(context.Background(), "hi"); !errors.Is(err, StatusCancelled) {
		t.Fatalf("Chat closed from its own callback: %v", err)
	}
	waitHandles(t)
}
