// The libagentao demo in Go: one streamed turn on the offline scripted model, which reads a
// file, asks to write another (the host approves from another goroutine), and answers. Host
// events arrive as typed structs. With OPENAI_API_KEY set (and optionally OPENAI_BASE_URL,
// OPENAI_MODEL) the same program talks to a real endpoint.
//
// Run: scripts/test.sh go (or see docs/bindings.md for PKG_CONFIG_PATH).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentao/libagentao/bindings/go/agentao"
)

const script = `{"responses": [
 {"text": "Let me look at the notes first.", "chunk_size": 8,
  "tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"file_path": "notes.txt"}}]},
 {"tool_calls": [{"id": "call_2", "name": "write_file",
   "arguments": {"file_path": "summary.txt", "content": "The build uses make.\n"}}]},
 {"text": "I read notes.txt and wrote a one-line summary to summary.txt.", "chunk_size": 6}
]}`

// host prints events and hands confirmations to an approver goroutine, as a UI would.
type host struct {
	agentao.NullTransport
	approvals chan approval
}

type approval struct {
	req   agentao.ConfirmRequest
	reply *agentao.ConfirmReply
}

func (h *host) EmitEvent(ev agentao.Event) {
	if ev.Type != "llm_text" {
		fmt.Printf("\n  [event] %s", ev.Type)
	}
}

func (h *host) ConfirmTool(req agentao.ConfirmRequest, reply *agentao.ConfirmReply) {
	h.approvals <- approval{req, reply} // answered later, from another goroutine
}

func main() {
	dir, err := os.MkdirTemp("", "agentao-go-demo-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("Project notes\nThe build uses make.\n"), 0o644)

	llm := map[string]any{"provider": "scripted", "script": agentaoJSON(script)}
	if key := os.Getenv("OPENAI_API_KEY"); key != "" {
		// AGENTAO_WIRE=openai-responses: the same key on the Responses API.
		llm = map[string]any{"provider": envOr("AGENTAO_WIRE", "openai"), "api_key": key,
			"base_url": envOr("OPENAI_BASE_URL", "https://api.openai.com/v1"), "model": envOr("OPENAI_MODEL", "gpt-4o-mini")}
	} else if os.Getenv("ANTHROPIC_API_KEY") != "" {
		// The library reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL itself.
		llm = map[string]any{"provider": "anthropic", "model": envOr("ANTHROPIC_MODEL", "claude-sonnet-4-5")}
	}
	cfg := map[string]any{"working_directory": dir, "llm": llm}

	h := &host{approvals: make(chan approval)}
	go func() {
		for a := range h.approvals {
			fmt.Printf("\n  [approve] %s %s -> yes", a.req.ToolName, a.req.Args)
			a.reply.Allow()
		}
	}()
	agent, err := agentao.New(cfg, h, agentao.WithHostEventObserver(func(ev agentao.HostEvent) {
		switch ev := ev.(type) {
		case *agentao.ToolLifecycleEvent:
			fmt.Printf("\n  [host event] tool %s %s", ev.ToolName, ev.Phase)
		case *agentao.PermissionDecisionEvent:
			fmt.Printf("\n  [host event] permission %s: %s", ev.ToolName, ev.Outcome)
		}
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	defer agent.Close()
	fmt.Printf("libagentao %s, session %s", agentao.Version(), agent.SessionID())

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for chunk, err := range agent.Stream(ctx, "Summarise notes.txt into summary.txt.") {
		if err != nil {
			fmt.Fprintln(os.Stderr, "\nturn:", err)
			os.Exit(1)
		}
		if chunk.Outcome != nil {
			fmt.Printf("\n\n[outcome] status=%s is_answer=%v tools=%d: %s\n", chunk.Outcome.Status,
				chunk.Outcome.IsAnswer, chunk.Outcome.ToolCount, chunk.Outcome.Text)
			break
		}
		fmt.Printf("\n  [text] %s", chunk.Text)
	}
	summary, _ := os.ReadFile(filepath.Join(dir, "summary.txt"))
	fmt.Printf("summary.txt: %s", summary)
}

// agentaoJSON embeds a JSON document in the config map as it is.
func agentaoJSON(s string) any { return rawJSON(s) }

type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
