package agentao

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestStream(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	a := newAgent(t, config(dir, `{"text":"Narration. ","tool_calls":[{"id":"l1","name":"list_directory","arguments":{}}]},`+
		`{"chunks":["Hel","lo \"","wor","ld\n"]}`, ""), rec)
	var deltas []string
	var out *Outcome
	for c, err := range a.Stream(context.Background(), "hi") {
		if err != nil {
			t.Fatal(err)
		}
		if c.Outcome != nil {
			out = c.Outcome
			continue
		}
		if out != nil {
			t.Fatal("a delta after the outcome")
		}
		deltas = append(deltas, c.Text)
	}
	if got := strings.Join(deltas, "|"); got != "Narration. |Hel|lo \"|wor|ld\n" {
		t.Fatalf("deltas %q", got)
	}
	if out == nil || out.Text != "Hello \"world\n" || out.Status != "ok" {
		t.Fatalf("outcome %+v", out)
	}
}

// A transport without Subscribe (NullTransport embedded, no Broadcaster) streams: the library
// owns the fan-out, so no stub is needed.
func TestStreamNeedsNoSubscriber(t *testing.T) {
	dir := t.TempDir()
	var tr Transport = NullTransport{}
	if _, ok := tr.(Subscriber); ok {
		t.Fatal("NullTransport implements Subscriber: the test would prove nothing")
	}
	a := newAgent(t, config(dir, `{"chunks":["no ","stub"]}`, ""), tr)
	var deltas []string
	var out *Outcome
	for c, err := range a.Stream(context.Background(), "hi") {
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if c.Outcome != nil {
			out = c.Outcome
		} else {
			deltas = append(deltas, c.Text)
		}
	}
	if got := strings.Join(deltas, "|"); got != "no |stub" {
		t.Fatalf("deltas %q", got)
	}
	if out == nil || out.Text != "no stub" || out.Status != "ok" {
		t.Fatalf("outcome %+v", out)
	}
}

func TestStreamEarlyBreakCancels(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, config(dir, `{"repeat_text":{"unit":"tick ","count":200},"delay_ms":10}`, ""), nil)
	n := 0
	for c, err := range a.Stream(context.Background(), "ticks") {
		if err != nil || c.Text != "tick " {
			t.Fatalf("item %+v, %v", c, err)
		}
		if n++; n == 3 {
			break
		}
	}
	var last *Outcome
	eventually(t, "the broken-off turn to end", 5*time.Second, func() bool {
		last, _ = a.LastTurn()
		return last != nil && last.Status == "cancelled"
	})
	if last.Error == nil || *last.Error != "async-cancel" || !strings.HasPrefix(last.Text, "tick tick tick ") || len(last.Text) > 1000 {
		t.Fatalf("outcome %+v", last)
	}
	var text string
	var err error
	eventually(t, "the next turn", 5*time.Second, func() bool {
		text, err = a.Chat(context.Background(), "again")
		return !errors.Is(err, StatusTurnInProgress)
	})
	if err != nil || text != "(script exhausted)" {
		t.Fatalf("Chat = %q, %v", text, err)
	}
}

func TestStreamContextCancel(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, config(dir, `{"repeat_text":{"unit":"tick ","count":500},"delay_ms":5}`, ""), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var final error
	var finalOut *Outcome
	for c, err := range a.Stream(ctx, "ticks") {
		if err != nil {
			final, finalOut = err, c.Outcome
			break
		}
		if n++; n == 5 {
			cancel()
		}
	}
	if !errors.Is(final, StatusCancelled) || !errors.Is(final, context.Canceled) {
		t.Fatalf("Stream ended with %v", final)
	}
	if finalOut == nil || finalOut.Status != "cancelled" {
		t.Fatalf("outcome %+v", finalOut)
	}
	// Cancelled before it starts: the error, nothing else.
	items := 0
	for _, err := range a.Stream(ctx, "x") {
		items++
		if !errors.Is(err, StatusCancelled) {
			t.Fatalf("Stream: %v", err)
		}
	}
	if items != 1 {
		t.Fatalf("%d items", items)
	}
}

// Many short streamed turns, read in batches: every one ends with its outcome (the library
// once lost it when a zero-timeout read interrupted the wait for it).
func TestStreamManyTurnsKeepTheirOutcome(t *testing.T) {
	a := newAgent(t, benchConfig(t.TempDir(), `{"chunks":["a","b"]}`), nil)
	for i := range 300 {
		var text string
		var out *Outcome
		for c, err := range a.Stream(context.Background(), "go") {
			if err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
			text += c.Text
			out = c.Outcome
		}
		if text != "ab" || out == nil || out.Text != "ab" {
			t.Fatalf("turn %d: deltas %q, outcome %+v", i, text, out)
		}
		if err := a.SetHistory("[]"); err != nil {
			t.Fatal(err)
		}
	}
}

// A delta larger than the batch buffer comes through whole, between the small ones.
func TestStreamLargeDelta(t *testing.T) {
	big := strings.Repeat("y", 40<<10)
	a := newAgent(t, config(t.TempDir(), `{"chunks":["a","`+big+`","b"]}`, ""), nil)
	var got []string
	for c, err := range a.Stream(context.Background(), "go") {
		if err != nil {
			t.Fatal(err)
		}
		if c.Outcome != nil {
			if c.Outcome.Text != "a"+big+"b" {
				t.Fatalf("outcome text of %d bytes", len(c.Outcome.Text))
			}
			continue
		}
		got = append(got, c.Text)
	}
	if len(got) != 3 || got[0] != "a" || got[1] != big || got[2] != "b" {
		t.Fatalf("%d deltas", len(got))
	}
}

// A reader that falls far behind (the turn's deltas outgrow the queue's 64 KiB bound while it
// sleeps, a delta bigger than the bound among them) still gets every delta, in order: the turn
// waits for it, nothing is dropped.
func TestStreamSlowReaderGetsEveryDelta(t *testing.T) {
	big := strings.Repeat("z", 80<<10)
	var chunks []string
	var want strings.Builder
	for i := range 3000 {
		c := strings.Repeat("x", 40) + string(rune('a'+i%26))
		if i == 1500 {
			c = big
		}
		chunks = append(chunks, `"`+c+`"`)
		want.WriteString(c)
	}
	a := newAgent(t, config(t.TempDir(), `{"chunks":[`+strings.Join(chunks, ",")+`]}`, ""), nil)
	var got strings.Builder
	n := 0
	for c, err := range a.Stream(context.Background(), "go") {
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			time.Sleep(200 * time.Millisecond) // the turn fills the queue meanwhile
		}
		if c.Outcome != nil {
			if c.Outcome.Text != want.String() {
				t.Fatalf("outcome text of %d bytes", len(c.Outcome.Text))
			}
			continue
		}
		n++
		got.WriteString(c.Text)
	}
	if n != 3000 || got.String() != want.String() {
		t.Fatalf("%d deltas, %d bytes; want 3000, %d", n, got.Len(), want.Len())
	}
}
