package agentao

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

var png = []byte{0x89, 'P', 'N', 'G', 1, 2, 3}

// longHistory is twelve messages of about 400 characters: a short summary makes them smaller.
func longHistory() string {
	filler := strings.Repeat("x", 400)
	var parts []string
	for i := 0; i < 6; i++ {
		parts = append(parts,
			fmt.Sprintf(`{"role":"user","content":"request %d %s"}`, i, filler),
			fmt.Sprintf(`{"role":"assistant","content":"answer %d %s"}`, i, filler))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestImagesWithChatRunAndStream(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"one"},{"text":"two"},{"text":"three"}`, ""), nil)
	ctx := context.Background()
	img := WithImages(Image{MIMEType: "image/png", Data: png})
	if text, err := a.Chat(ctx, "look", img); err != nil || text != "one" {
		t.Fatalf("Chat: %q, %v", text, err)
	}
	if out, err := a.Run(ctx, "again", img); err != nil || out.Text != "two" {
		t.Fatalf("Run: %+v, %v", out, err)
	}
	var got strings.Builder
	for c, err := range a.Stream(ctx, "and", WithImages(Image{MIMEType: "image/webp", Data: png})) {
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		got.WriteString(c.Text)
	}
	if got.String() != "three" {
		t.Fatalf("Stream: %q", got.String())
	}
	h, _ := a.History()
	if n := strings.Count(string(h), `"type":"image_url"`); n != 3 {
		t.Fatalf("%d images in the history, want 3: %s", n, h)
	}
	if !strings.Contains(string(h), "data:image/webp;base64,iVBORwECAw==") {
		t.Fatalf("history: %s", h)
	}
	_, err := a.Chat(ctx, "bad", WithImages(Image{MIMEType: "image/svg+xml", Data: png}))
	if !errors.Is(err, StatusInvalidArgument) || !strings.Contains(err.Error(), "image/svg+xml") {
		t.Fatalf("bad image: %v", err)
	}
}

func TestContextUsageAndCompact(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"S1 summary"}`, ""), nil)
	u, err := a.ContextUsage()
	if err != nil || u.Window != 200000 || u.BreakerOpen || u.LearnedWindow != nil {
		t.Fatalf("ContextUsage: %+v, %v", u, err)
	}
	r, err := a.Compact(context.Background(), "")
	if err != nil || r.Status != "skipped" {
		t.Fatalf("Compact of an empty history: %+v, %v", r, err)
	}
	if err := a.SetHistory(longHistory()); err != nil {
		t.Fatal(err)
	}
	r, err = a.Compact(context.Background(), "host_asked")
	if err != nil || r.Status != "success" || r.PostMsgs >= r.PreMsgs {
		t.Fatalf("Compact: %+v, %v", r, err)
	}
	if h, _ := a.History(); !strings.Contains(string(h), "S1 summary") {
		t.Fatalf("history: %s", h)
	}
	if u, _ := a.ContextUsage(); u.Compactions != 1 {
		t.Fatalf("compactions: %d", u.Compactions)
	}
}

func TestCompactionController(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"never"}`, ""), nil)
	if err := a.SetHistory(longHistory()); err != nil {
		t.Fatal(err)
	}
	base := liveHandles.Load()
	var mu sync.Mutex
	var seen []CompactionRequest
	mode := "cancel"
	err := a.SetCompactionController(func(req CompactionRequest, reply *CompactionReply) {
		mu.Lock()
		seen = append(seen, req)
		m := mode
		mu.Unlock()
		switch m {
		case "cancel":
			_ = reply.Cancel("not now")
		case "panic":
			panic("boom")
		case "later":
			go func() {
				time.Sleep(30 * time.Millisecond)
				if err := reply.Summary("GO SUMMARY"); err != nil {
					t.Errorf("Summary: %v", err)
				}
				if err := reply.Allow(); !errors.Is(err, ErrAnswered) {
					t.Errorf("a second answer: %v", err)
				}
			}()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := a.Compact(ctx, "host")
	if err != nil || r.Status != "cancelled" || r.Detail == nil ||
		*r.Detail != "cancelled by the compaction controller: not now" {
		t.Fatalf("cancel: %+v, %v", r, err)
	}
	q := seen[0]
	if q.Trigger != CompactionManual || q.Kind != CompactionFull || q.Reason != "host" ||
		q.Window != 200000 || q.MessagesToSummarize+q.MessagesKept != 12 || q.ChildTaskID != "" ||
		!strings.Contains(string(q.Messages), "request 0 xxx") {
		t.Fatalf("request: %+v", q)
	}

	mu.Lock()
	mode = "panic"
	mu.Unlock()
	r, err = a.Compact(ctx, "")
	if err != nil || r.Status != "cancelled" || !strings.Contains(*r.Detail, "panic in the host's compaction controller: boom") {
		t.Fatalf("panic: %+v, %v", r, err)
	}

	mu.Lock()
	mode = "later"
	mu.Unlock()
	r, err = a.Compact(ctx, "")
	if err != nil || r.Status != "success" {
		t.Fatalf("later: %+v, %v", r, err)
	}
	if h, _ := a.History(); !strings.Contains(string(h), "GO SUMMARY") {
		t.Fatalf("history: %s", h)
	}

	// Removing it releases its handle.
	if err := a.SetCompactionController(nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the controller's handle released", 5*time.Second, func() bool {
		return liveHandles.Load() == base
	})
}
