package agentao

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestPermissions(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	a := newAgent(t, config(dir, `{"tool_calls":[{"id":"w1","name":"write_file","arguments":{"file_path":"secret.txt","content":"x"}}]},{"text":"done"}`,
		`"permissions":{"mode":"workspace-write"}`), rec)
	rules := []map[string]any{{"tool": "write_file", "args": map[string]string{"file_path": "secret"}, "action": "deny"}}
	if err := a.AddPermissionRules(rules, "host"); err != nil {
		t.Fatal(err)
	}
	if err := a.AddPermissionSource("injected:tenant-policy"); err != nil {
		t.Fatal(err)
	}
	p, err := a.ActivePermissions()
	if err != nil || p.Mode != WorkspaceWrite {
		t.Fatalf("ActivePermissions = %+v, %v", p, err)
	}
	for _, s := range []string{"preset:workspace-write", "injected:host", "injected:tenant-policy"} {
		if !slices.Contains(p.LoadedSources, s) {
			t.Fatalf("sources %v lack %s", p.LoadedSources, s)
		}
	}
	if text, err := a.Chat(context.Background(), "write the secret"); err != nil || text != "done" {
		t.Fatalf("Chat = %q, %v", text, err)
	}
	if _, ok := readFile(dir, "secret.txt"); ok {
		t.Fatal("a denied write ran")
	}
	err = a.AddPermissionRules(`[{"tool":"x","action":"maybe"}]`, "bad")
	if !errors.Is(err, StatusInvalidArgument) || !strings.Contains(err.Error(), "rules[0]") {
		t.Fatalf("bad rule: %v", err)
	}
	if err := a.AddRunRules(nil, `[{"tool":"read_file","action":"deny"}]`, ""); err != nil {
		t.Fatal(err)
	}
	p, _ = a.ActivePermissions()
	if !slices.Contains(p.LoadedSources, "injected:run-spec") || slices.Contains(p.LoadedSources, "injected:bad") {
		t.Fatalf("sources %v", p.LoadedSources)
	}
	prev, err := a.SetPermissionMode(ReadOnly)
	if err != nil || prev != WorkspaceWrite {
		t.Fatalf("SetPermissionMode = %q, %v", prev, err)
	}
	if prev, _ = a.SetPermissionMode(FullAccess); prev != ReadOnly {
		t.Fatalf("previous %q", prev)
	}
	if len(rec.find("permission_mode_changed")) != 2 {
		t.Fatalf("mode events: %s", rec.types())
	}
	if p, _ = a.ActivePermissions(); p.Mode != FullAccess {
		t.Fatalf("mode %q", p.Mode)
	}
	if _, err := a.SetPermissionMode("sideways"); err == nil {
		t.Fatal("a bad mode was accepted")
	}

	b := newAgent(t, config(dir, `{"text":"x"}`, ""), nil)
	if _, err := b.SetPermissionMode(ReadOnly); !errors.Is(err, StatusNoEngine) {
		t.Fatalf("no engine: %v", err)
	}
	if err := b.AddPermissionRules(`[]`, "host"); !errors.Is(err, StatusNoEngine) {
		t.Fatalf("no engine: %v", err)
	}
	p, err = b.ActivePermissions()
	if err != nil || p.Mode != WorkspaceWrite || !slices.Equal(p.LoadedSources, []string{"default:no-engine"}) || len(p.Rules) != 0 {
		t.Fatalf("no-engine snapshot %+v, %v", p, err)
	}
}
