package agentao

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

func TestMCPStatusNoServersAndAFailingServer(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"fine"}`, ""), nil)
	st, err := a.MCPStatus()
	if err != nil || st == nil || len(st.Servers) != 0 {
		t.Fatalf("MCPStatus: %+v %v", st, err)
	}
	b := newAgent(t, config(t.TempDir(), `{"text":"fine"}`, `"mcp_servers":{"gone":{"command":"/nonexistent/mcp-server"}}`), nil)
	if text, err := b.Chat(context.Background(), "go"); err != nil || text != "fine" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	st, err = b.MCPStatus()
	if err != nil || len(st.Servers) != 1 {
		t.Fatalf("MCPStatus: %+v %v", st, err)
	}
	s := st.Servers[0]
	if s.Name != "gone" || s.Status != "error" || s.Transport != "stdio" || s.Error == nil || *s.Error == "" {
		t.Fatalf("server %+v", s)
	}
	closeAndWait(t, a)
	closeAndWait(t, b)
	if _, err := a.MCPStatus(); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
}

func TestMCPRegistryServersAppearInTheStatus(t *testing.T) {
	a := newAgent(t, config(t.TempDir(), `{"text":"one"},{"text":"two"}`, ""), nil)
	var asked atomic.Int32
	err := a.SetMCPRegistry(func() (json.RawMessage, error) {
		asked.Add(1)
		return json.RawMessage(`{"from_registry":{"command":"/nonexistent/registry-server"}}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if text, err := a.Chat(context.Background(), "go"); err != nil || text != "one" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	st, err := a.MCPStatus()
	if err != nil || len(st.Servers) != 1 || st.Servers[0].Name != "from_registry" || asked.Load() == 0 {
		t.Fatalf("MCPStatus: %+v %v (asked %d)", st, err, asked.Load())
	}
	// A registry that panics counts as "no servers"; the turn still runs.
	if err := a.SetMCPRegistry(func() (json.RawMessage, error) { panic("registry down") }); err != nil {
		t.Fatal(err)
	}
	if text, err := a.Chat(context.Background(), "again"); err != nil || text != "two" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	if st, _ := a.MCPStatus(); len(st.Servers) != 0 {
		t.Fatalf("servers after the panicking registry: %+v", st)
	}
	if err := a.SetMCPRegistry(nil); err != nil {
		t.Fatal(err)
	}
	closeAndWait(t, a)
}

func TestPreflight(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, config(dir, `{"text":"x"}`, ""), nil)
	p, err := a.Preflight("read_file", map[string]string{"file_path": "a.txt"})
	if err != nil || p.Outcome != "allow" || p.Mode != WorkspaceWrite {
		t.Fatalf("Preflight: %+v %v", p, err)
	}
	p, err = a.Preflight("run_shell_command", `{"command":"rm -rf /"}`)
	if err != nil || p.Outcome == "allow" {
		t.Fatalf("Preflight: %+v %v", p, err)
	}
	if _, err := a.Preflight("no_such_tool", `{}`); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("unknown tool: %v", err)
	}
	if _, err := a.Preflight("read_file", `{oops`); !errors.Is(err, StatusInvalidJSON) {
		t.Fatalf("bad args: %v", err)
	}
	if _, ok := readFile(dir, "a.txt"); ok {
		t.Fatal("preflight ran the tool")
	}
	closeAndWait(t, a)
}

func TestAddSubagent(t *testing.T) {
	dir := t.TempDir()
	d, _ := json.Marshal(dir)
	cfg := `{"working_directory":` + string(d) + `,"llm":{"provider":"scripted","script":{"responses":[` +
		toolCall("c1", "agent_helper_one", `{"task":"summarise"}`, "parent done") +
		`],"subagents":{"helper-one":[{"text":"child summary"}]}}}}`
	a := newAgent(t, cfg, nil)
	if err := a.AddSubagent(map[string]any{"name": "helper-one", "description": "Summarises.", "max_turns": 3}); err != nil {
		t.Fatal(err)
	}
	if text, err := a.Chat(context.Background(), "delegate"); err != nil || text != "parent done" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	if h := historyText(t, a); !strings.Contains(h, "child summary") {
		t.Fatalf("history: %s", h)
	}
	if err := a.AddSubagent(`{"name":"x","max_turns":0}`); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("max_turns 0: %v", err)
	}
	if err := a.AddSubagent(`{oops`); !errors.Is(err, StatusInvalidJSON) {
		t.Fatalf("bad JSON: %v", err)
	}
	closeAndWait(t, a)
}
