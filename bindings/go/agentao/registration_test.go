package agentao

import (
	"context"
	"encoding/json"
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

// Every capability is installed and removed through the one setCapability path: the removal
// (handle 0 in the shim, NULL to the library) is accepted for each, and once the agent is
// freed no handle of theirs is left.
func TestEveryCapabilityInstallsAndRemoves(t *testing.T) {
	base := liveHandles.Load()
	a := newAgent(t, config(t.TempDir(), `{"text":"ok"}`, ""), nil)
	steps := []struct {
		name            string
		install, remove func() error
	}{
		{"file system", func() error { return a.SetFileSystem(&memFS{}) }, func() error { return a.SetFileSystem(nil) }},
		{"shell executor", func() error { return a.SetShellExecutor(&hostShell{}, "") }, func() error { return a.SetShellExecutor(nil, "") }},
		{"memory store", func() error { return a.SetMemoryStore(&hostMemory{}) }, func() error { return a.SetMemoryStore(nil) }},
		{"MCP registry", func() error { return a.SetMCPRegistry(func() (json.RawMessage, error) { return nil, nil }) },
			func() error { return a.SetMCPRegistry(nil) }},
		{"compaction controller", func() error { return a.SetCompactionController(func(CompactionRequest, *CompactionReply) {}) },
			func() error { return a.SetCompactionController(nil) }},
		{"hooks", func() error { return a.SetHooks(func(HookRequest, *HookReply) {}) }, func() error { return a.SetHooks(nil) }},
	}
	for _, s := range steps {
		if err := s.install(); err != nil {
			t.Fatalf("installing the %s: %v", s.name, err)
		}
		if err := s.remove(); err != nil {
			t.Fatalf("removing the %s: %v", s.name, err)
		}
	}
	if _, err := a.Chat(context.Background(), "hi"); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	a.Close()
	if got := liveHandles.Load(); got != base {
		t.Fatalf("after Close: %d live handles, want %d", got, base)
	}
}
