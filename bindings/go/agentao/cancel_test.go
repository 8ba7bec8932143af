package agentao

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCancelBeforeStart(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, config(dir, `{"text":"never"}`, ""), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := a.Run(ctx, "hi")
	if !errors.Is(err, StatusCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if out == nil || out.Status != "cancelled" || out.Error == nil || *out.Error != "context canceled" {
		t.Fatalf("outcome %+v", out)
	}
	if _, err := a.Chat(ctx, "hi"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Chat: %v", err)
	}
}

func TestCancelDuringConfirmation(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	rec.deferConfirm()
	a := newAgent(t, config(dir, writeTurn, ""), rec)
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := a.Chat(ctx, "write"); errc <- err }()
	reply := <-rec.pending
	t0 := time.Now()
	cancel(errors.New("host-gave-up"))
	err := <-errc
	took := time.Since(t0)
	t.Logf("cancel during a pending confirmation: Chat returned after %v", took)
	if !errors.Is(err, StatusCancelled) || !strings.Contains(err.Error(), "host-gave-up") {
		t.Fatalf("Chat: %v", err)
	}
	if took > time.Second { // contract: at once; generous for a loaded machine
		t.Fatalf("cancel took %v", took)
	}
	if err := reply.Allow(); err != nil {
		t.Fatalf("late reply: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, ok := readFile(dir, "out.txt"); ok {
		t.Fatal("the cancelled call ran after its late approval")
	}
	// The agent takes the next turn.
	rec.confirm = nil
	if text, err := a.Chat(context.Background(), "again"); err != nil || text != "written" {
		t.Fatalf("next Chat = %q, %v", text, err)
	}
}

func TestCancelDuringStreamingAndDeadline(t *testing.T) {
	dir := t.TempDir()
	slow := `{"repeat_text":{"unit":"tick ","count":2000},"delay_ms":5}`
	a := newAgent(t, config(dir, slow+","+slow, ""), nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	out, err := a.Run(ctx, "count")
	if !errors.Is(err, StatusCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if out == nil || out.Status != "cancelled" || !strings.HasPrefix(out.Text, "tick ") || len(out.Text) > 5000 {
		t.Fatalf("outcome %+v", out)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	t0 := time.Now()
	_, err = a.Chat(ctx2, "count")
	t.Logf("deadline 100 ms: Chat returned after %v", time.Since(t0))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, StatusCancelled) {
		t.Fatalf("Chat: %v", err)
	}
	waitOK := time.Since(t0) < 3*time.Second
	if !waitOK {
		t.Fatalf("deadline honoured after %v", time.Since(t0))
	}
}
