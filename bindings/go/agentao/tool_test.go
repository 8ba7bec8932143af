package agentao

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const lookupSchema = `{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`

func lookupSpec() ToolSpec {
	return ToolSpec{Name: "lookup", Description: "Looks a key up in the host's table.", Parameters: lookupSchema, ReadOnly: true}
}

func callLookup(id, key, final string) string {
	return fmt.Sprintf(`{"tool_calls":[{"id":%q,"name":"lookup","arguments":{"key":%q}}]},{"text":%q}`, id, key, final)
}

func historyText(t *testing.T, a *Agent) string {
	t.Helper()
	h, err := a.History()
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	return string(h)
}

// closeAndWait closes the agent and waits until the library released every handle.
func closeAndWait(t *testing.T, a *Agent) {
	t.Helper()
	a.Close()
	waitHandles(t)
}

func TestHostToolResultReachesTheModel(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	a := newAgent(t, config(dir, callLookup("c1", "k1", "done"), ""), rec)
	var calls atomic.Int32
	var seen ToolCall
	err := a.AddTool(lookupSpec(), func(ctx context.Context, call ToolCall) (string, error) {
		calls.Add(1)
		seen = call
		if ctx.Err() != nil {
			t.Errorf("ctx already done: %v", ctx.Err())
		}
		if err := call.Output("chunk from the host"); err != nil {
			t.Errorf("Output: %v", err)
		}
		return "value of " + string(call.Args), nil
	})
	if err != nil {
		t.Fatalf("AddTool: %v", err)
	}
	text, err := a.Chat(context.Background(), "look k1 up")
	if err != nil || text != "done" {
		t.Fatalf("Chat: %q, %v", text, err)
	}
	if calls.Load() != 1 || seen.ID != "c1" || string(seen.Args) != `{"key":"k1"}` {
		t.Fatalf("calls %d, call %+v", calls.Load(), seen)
	}
	// The call is over: its output sink is closed.
	if err := seen.Output("late"); !errors.Is(err, StatusClosed) {
		t.Fatalf("Output after the answer: %v", err)
	}
	if h := historyText(t, a); !strings.Contains(h, `value of {\"key\":\"k1\"}`) {
		t.Fatalf("history: %s", h)
	}
	outs := rec.find("tool_output")
	if len(outs) != 1 || !strings.Contains(string(outs[0].Data), "chunk from the host") {
		t.Fatalf("tool_output events: %+v", outs)
	}
	closeAndWait(t, a)
}

func TestHostToolErrorsAndPanics(t *testing.T) {
	dir := t.TempDir()
	var events []HostEvent
	var mu sync.Mutex
	a := newAgent(t, config(dir, callLookup("a", "x", "one")+","+callLookup("b", "y", "two")+","+callLookup("c", "z", "three"), ""), nil,
		WithHostEventObserver(func(ev HostEvent) { mu.Lock(); events = append(events, ev); mu.Unlock() }))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.AddTool(lookupSpec(), func(context.Context, ToolCall) (string, error) {
		return "", &ToolError{Type: "KeyError", Message: "no such key"}
	}))
	if text, err := a.Chat(context.Background(), "1"); err != nil || text != "one" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	if h := historyText(t, a); !strings.Contains(h, "Error executing lookup: no such key") {
		t.Fatalf("history: %s", h)
	}
	mu.Lock()
	found := false
	for _, ev := range events {
		if b, _ := json.Marshal(ev); strings.Contains(string(b), `"error_type":"KeyError"`) {
			found = true
		}
	}
	mu.Unlock()
	if !found {
		t.Fatalf("no host event with error_type KeyError: %+v", events)
	}

	// A panic is recovered into the tool's error; the turn goes on.
	spec := lookupSpec()
	spec.Replace = true
	must(a.AddTool(spec, func(context.Context, ToolCall) (string, error) { panic("index out of range [7]") }))
	if text, err := a.Chat(context.Background(), "2"); err != nil || text != "two" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	if h := historyText(t, a); !strings.Contains(h, "panic in the host's tool lookup: index out of range [7]") {
		t.Fatalf("history: %s", h)
	}

	// A plain error is a HostToolError with its text.
	must(a.AddTool(spec, func(context.Context, ToolCall) (string, error) { return "", errors.New("backend said no") }))
	if text, err := a.Chat(context.Background(), "3"); err != nil || text != "three" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	if h := historyText(t, a); !strings.Contains(h, "Error executing lookup: backend said no") {
		t.Fatalf("history: %s", h)
	}
	closeAndWait(t, a)
}

func TestHostToolAsyncReplyFromAnotherGoroutine(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, config(dir, callLookup("c1", "k2", "done"), ""), nil)
	answered := make(chan error, 1)
	err := a.AddAsyncTool(lookupSpec(), func(ctx context.Context, call ToolCall, reply *ToolReply) {
		go func() {
			time.Sleep(20 * time.Millisecond)
			if err := call.Output("working"); err != nil {
				t.Errorf("Output: %v", err)
			}
			err := reply.Result("async " + string(call.Args))
			if again := reply.Result("twice"); again != ErrAnswered {
				t.Errorf("second answer: %v", again)
			}
			answered <- err
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	if text, err := a.Chat(context.Background(), "go"); err != nil || text != "done" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("Result: %v", err)
	}
	if h := historyText(t, a); !strings.Contains(h, `async {\"key\":\"k2\"}`) {
		t.Fatalf("history: %s", h)
	}
	closeAndWait(t, a)
}

func TestHostToolContextCancelledWithTheTurnAndLateReply(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, config(dir, callLookup("c1", "slow", "done")+`,{"text":"next"}`, ""), nil)
	type pending struct {
		ctx   context.Context
		reply *ToolReply
	}
	got := make(chan pending, 1)
	if err := a.AddAsyncTool(lookupSpec(), func(ctx context.Context, _ ToolCall, reply *ToolReply) {
		got <- pending{ctx, reply}
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := a.Chat(ctx, "go"); errc <- err }()
	p := <-got
	if p.ctx.Err() != nil {
		t.Fatalf("tool ctx done before the cancel: %v", p.ctx.Err())
	}
	t0 := time.Now()
	cancel()
	if err := <-errc; !errors.Is(err, StatusCancelled) {
		t.Fatalf("Chat: %v", err)
	}
	select {
	case <-p.ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the tool's context was not cancelled with the turn")
	}
	t.Logf("tool context cancelled %v after the turn's", time.Since(t0))
	if cause := context.Cause(p.ctx); cause != ErrTurnCancelled {
		t.Fatalf("cause %v", cause)
	}
	// The late answer is harmless: accepted or refused, never in the history, no crash.
	_ = p.reply.Result("too late")
	if !p.reply.Answered() {
		t.Fatal("reply still pending")
	}
	if h := historyText(t, a); strings.Contains(h, "too late") {
		t.Fatalf("late answer reached the history: %s", h)
	}
	// The cancelled turn did not read the script's "done".
	if text, err := a.Chat(context.Background(), "again"); err != nil || text != "done" {
		t.Fatalf("Chat after cancel: %q %v", text, err)
	}
	closeAndWait(t, a)
}

func TestHostToolDroppedReplyFailsTheCall(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, config(dir, callLookup("c1", "k", "done"), ""), nil)
	if err := a.AddAsyncTool(lookupSpec(), func(context.Context, ToolCall, *ToolReply) {}); err != nil {
		t.Fatal(err)
	}
	// The turn waits for the reply until the GC finds it unreachable.
	errc := make(chan error, 1)
	go func() { _, err := a.Chat(context.Background(), "go"); errc <- err }()
	for {
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if h := historyText(t, a); !strings.Contains(h, "the host dropped the tool call without answering it") {
				t.Fatalf("history: %s", h)
			}
			closeAndWait(t, a)
			return
		case <-time.After(20 * time.Millisecond):
			runGC()
		}
	}
}

func TestHostToolRegistrationErrors(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, config(dir, `{"text":"x"}`, ""), nil)
	ok := func(context.Context, ToolCall) (string, error) { return "r", nil }
	if err := a.AddTool(lookupSpec(), ok); err != nil {
		t.Fatal(err)
	}
	if err := a.AddTool(lookupSpec(), ok); !errors.Is(err, StatusInvalidArgument) || !strings.Contains(err.Error(), "lookup") {
		t.Fatalf("duplicate: %v", err)
	}
	bad := lookupSpec()
	bad.Name = "mcp_x"
	if err := a.AddTool(bad, ok); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("mcp_ name: %v", err)
	}
	bad = lookupSpec()
	bad.Name, bad.Parameters = "other", "{not json"
	if err := a.AddTool(bad, ok); !errors.Is(err, StatusInvalidJSON) {
		t.Fatalf("bad schema: %v", err)
	}
	bad.Parameters = map[string]any{"type": "object", "properties": map[string]any{}}
	bad.Name = "nul\x00name"
	if err := a.AddTool(bad, ok); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("NUL in name: %v", err)
	}
	if err := a.AddTool(lookupSpec(), nil); !errors.Is(err, StatusNullArgument) {
		t.Fatalf("nil func: %v", err)
	}
	if removed, err := a.RemoveTool("lookup"); err != nil || !removed {
		t.Fatalf("RemoveTool: %v %v", removed, err)
	}
	if removed, err := a.RemoveTool("lookup"); err != nil || removed {
		t.Fatalf("RemoveTool again: %v %v", removed, err)
	}
	closeAndWait(t, a)
	if err := a.AddTool(lookupSpec(), ok); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
}
