package agentao

import (
	"context"
	"errors"
	"testing"
)

// A refused registration releases its handle exactly once, in the library: the binding no
// longer deletes it itself (a second Delete of a cgo.Handle panics, and the count would go
// below the baseline).
func TestRefusedRegistrationReleasesTheHandleOnce(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"ok"}`, ""), nil)
	base := liveHandles.Load()
	noop := func(context.Context, ToolCall) (string, error) { return "", nil }
	for _, name := range []string{"plan_save", "mcp_x", "read_file"} {
		err := a.AddTool(ToolSpec{Name: name, Description: "d"}, noop)
		var e *Error
		if !errors.As(err, &e) || e.Status != StatusInvalidArgument {
			t.Fatalf("AddTool(%q): %v, want StatusInvalidArgument", name, err)
		}
		if got := liveHandles.Load(); got != base {
			t.Fatalf("after refusing %q: %d live handles, want %d", name, got, base)
		}
	}
	if _, err := a.Chat(context.Background(), "hi"); err != nil {
		t.Fatalf("Chat: %v", err)
	}
}
