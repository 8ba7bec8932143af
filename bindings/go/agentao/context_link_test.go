package agentao

import (
	"context"
	"errors"
	"testing"
	"time"
)

const slowTurn = `{"repeat_text":{"unit":"tick ","count":2000},"delay_ms":5}`

// Turns on one context share one link, and cancelling the context still cancels the turn that
// runs, and every turn after it.
func TestOneContextLinksEveryTurn(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"one"},{"text":"two"},`+slowTurn+`,{"text":"four"}`, ""), nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if text, err := a.Chat(ctx, "1"); err != nil || text != "one" {
		t.Fatalf("Chat = %q, %v", text, err)
	}
	first := a.link
	if text, err := a.Chat(ctx, "2"); err != nil || text != "two" {
		t.Fatalf("Chat = %q, %v", text, err)
	}
	if first == nil || a.link != first || first.ctx != ctx || first.busy || first.tok != nil {
		t.Fatalf("link %+v, then %+v", first, a.link)
	}
	cause := errors.New("host-gave-up")
	go func() { time.Sleep(50 * time.Millisecond); cancel(cause) }()
	if _, err := a.Chat(ctx, "3"); !errors.Is(err, StatusCancelled) || !errors.Is(err, cause) {
		t.Fatalf("Chat during the cancel: %v", err)
	}
	if _, err := a.Chat(ctx, "4"); !errors.Is(err, StatusCancelled) || !errors.Is(err, cause) {
		t.Fatalf("Chat on the cancelled context: %v", err)
	}
	if _, err := a.Chat(context.Background(), "5"); err != nil {
		t.Fatalf("Chat on another context: %v", err)
	}
}

// A turn on another context replaces the link: the old context's cancel no longer reaches the
// agent's turns, the new one's does.
func TestAnotherContextReplacesTheLink(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"one"},`+slowTurn, ""), nil)
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	if _, err := a.Chat(ctxA, "1"); err != nil {
		t.Fatal(err)
	}
	old := a.link
	ctxB, cancelB := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := a.Chat(ctxB, "2"); errc <- err }()
	time.Sleep(50 * time.Millisecond)
	cancelA()
	select {
	case err := <-errc:
		t.Fatalf("the turn on ctxB ended when ctxA was cancelled: %v", err)
	case <-time.After(150 * time.Millisecond):
	}
	if old.stop() {
		t.Fatal("ctxA's registration was still there")
	}
	cause := errors.New("b-cancelled")
	cancelB(cause)
	if err := <-errc; !errors.Is(err, StatusCancelled) || !errors.Is(err, cause) {
		t.Fatalf("Chat on ctxB: %v", err)
	}
}

// Close removes the link's registration from the host's context.
func TestCloseRemovesTheContextLink(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"one"}`, ""), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := a.Chat(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	l := a.link
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if a.link != nil || l.stop() {
		t.Fatal("the link outlived Close")
	}
	cancel()
}

// taggedContext is a context of an uncomparable type (comparing two of them panics).
type taggedContext struct {
	context.Context
	tags []string
}

// A context of an uncomparable type is linked for its turn only, and still cancels it.
func TestAnUncomparableContextIsLinkedPerTurn(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"one"},{"text":"two"},`+slowTurn, ""), nil)
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := taggedContext{Context: base, tags: []string{"a"}}
	for _, want := range []string{"one", "two"} { // the second compared it with the first's
		if text, err := a.Chat(ctx, "x"); err != nil || text != want {
			t.Fatalf("Chat = %q, %v", text, err)
		}
	}
	if a.link != nil {
		t.Fatal("an uncomparable context was kept")
	}
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := a.Chat(ctx, "x"); !errors.Is(err, StatusCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Chat: %v", err)
	}
}
