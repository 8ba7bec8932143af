package agentao

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const readA = `{"tool_calls":[{"id":"c1","name":"read_file","arguments":{"file_path":"a.txt"}}]},{"text":"done"}`

func lastToolResult(t *testing.T, a *Agent) string {
	t.Helper()
	h, err := a.History()
	if err != nil {
		t.Fatal(err)
	}
	var msgs []map[string]any
	if err := json.Unmarshal(h, &msgs); err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, m := range msgs {
		if m["role"] == "tool" {
			last, _ = m["content"].(string)
		}
	}
	return last
}

func TestHooks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, config(dir, readA+`,`+readA+`,`+readA, ""), nil)
	base := liveHandles.Load()
	var mu sync.Mutex
	var seen []HookRequest
	mode := "deny"
	err := a.SetHooks(func(req HookRequest, reply *HookReply) {
		mu.Lock()
		seen = append(seen, req)
		m := mode
		mu.Unlock()
		switch {
		case req.Event == HookPreToolUse && m == "deny":
			_ = reply.Deny("not from Go")
		case req.Event == HookPostToolUse && m == "context":
			// Answered later, from another goroutine.
			go func() {
				time.Sleep(30 * time.Millisecond)
				if err := reply.AddContext("checked by Go"); err != nil {
					t.Errorf("AddContext: %v", err)
				}
				if err := reply.Output(""); !errors.Is(err, ErrAnswered) {
					t.Errorf("a second answer: %v", err)
				}
			}()
		case req.Event == HookPreToolUse && m == "panic":
			panic("boom")
		default:
			_ = reply.Output("")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.Chat(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	if r := lastToolResult(t, a); !strings.Contains(r, "Hook reason: not from Go") {
		t.Fatalf("deny: %q", r)
	}
	var pre *HookRequest
	for i := range seen {
		if seen[i].Event == HookPreToolUse {
			pre = &seen[i]
		}
	}
	if pre == nil || pre.ToolName != "read_file" || pre.CallID != "c1" ||
		!strings.Contains(string(pre.Input), `"tool_input":{"file_path":"a.txt"}`) {
		t.Fatalf("request: %+v", pre)
	}

	mu.Lock()
	mode = "context"
	mu.Unlock()
	if _, err := a.Chat(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	if r := lastToolResult(t, a); !strings.Contains(r, "alpha") || !strings.Contains(r, "<system-reminder>\nchecked by Go\n</system-reminder>") {
		t.Fatalf("context: %q", r)
	}

	mu.Lock()
	mode = "panic"
	mu.Unlock()
	if _, err := a.Chat(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	if r := lastToolResult(t, a); !strings.Contains(r, "panic in the host's hooks: boom") {
		t.Fatalf("a panic denies: %q", r)
	}

	// Removing them releases their handle.
	if err := a.SetHooks(nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hooks' handle released", 5*time.Second, func() bool {
		return liveHandles.Load() == base
	})
}
