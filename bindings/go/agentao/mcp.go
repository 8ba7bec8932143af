package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"runtime/cgo"
)

// MCPRegistry returns MCP servers besides the config's mcp_servers (which win by name), as a
// JSON object {"<name>": {<server config>}} (docs/config.md), or nil for none. The library
// asks it when it is set and before each turn, on a library thread; an error or a panic
// counts as "no servers".
type MCPRegistry func() (json.RawMessage, error)

//export goAgentaoRegistryList
func goAgentaoRegistryList(h C.uintptr_t) (out *C.char) {
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	servers, err := cgo.Handle(h).Value().(MCPRegistry)()
	if err != nil || len(servers) == 0 {
		return nil
	}
	// Released with free() by the shim's release_servers.
	return C.CString(sanitize(string(servers)))
}

// SetMCPRegistry sets the agent's MCP registry (nil removes it). Its servers connect in the
// background now and are part of the next turn.
func (a *Agent) SetMCPRegistry(reg MCPRegistry) error {
	return a.setCapability(reg != nil, reg, func(p *C.agentao_agent, h C.uintptr_t, e **C.agentao_error) C.agentao_status {
		return C.agentao_go_set_mcp_registry(p, h, e)
	})
}

// MCPServerStatus is one MCP server's state.
type MCPServerStatus struct {
	Name string `json:"name"`
	// Status is "connecting", "connected" or "error".
	Status string `json:"status"`
	// Transport is "stdio" or "http".
	Transport        string   `json:"transport"`
	Protocol         *string  `json:"protocol"`
	Tools            int      `json:"tools"`
	Resources        bool     `json:"resources"`
	ResourcesEnabled bool     `json:"resources_enabled"`
	Trusted          bool     `json:"trusted"`
	Error            *string  `json:"error"`
	Stderr           []string `json:"stderr"`
}

// MCPStatus is the state of an agent's MCP servers.
type MCPStatus struct {
	Servers []MCPServerStatus `json:"servers"`
	// RegistryError is set when the registry's last answer was not valid.
	RegistryError *string `json:"registry_error,omitempty"`
}

// MCPStatus reports the agent's MCP servers; it never waits for a connection in progress.
func (a *Agent) MCPStatus() (*MCPStatus, error) {
	return getDecoded[MCPStatus](a, func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_mcp_status(p, o, e)
	})
}

// Preflight is what the permission pipeline would decide for a call now.
type Preflight struct {
	// Outcome is "allow", "deny" or "prompt".
	Outcome     string          `json:"outcome"`
	Reason      string          `json:"reason"`
	MatchedRule json.RawMessage `json:"matched_rule"`
	// Source is "read-only-gate", "hardline", "run-rule", "preset", "user-rule" or "fallback".
	Source string         `json:"source"`
	Mode   PermissionMode `json:"mode"`
	// Hardline is the floor's description when it refuses the command ("" otherwise).
	Hardline string `json:"hardline,omitempty"`
}

// Preflight answers "what would happen if the model called tool with args now?" without
// running anything or emitting an event. args is a JSON object (text or any value that
// marshals to one). Any goroutine, also while a turn runs.
func (a *Agent) Preflight(tool string, args any) (*Preflight, error) {
	text, err := jsonText(args)
	if err != nil {
		return nil, err
	}
	ct, err := cstring(tool)
	if err != nil {
		return nil, err
	}
	defer freeC(ct)
	ca, err := cstring(text)
	if err != nil {
		return nil, err
	}
	defer freeC(ca)
	return getDecoded[Preflight](a, func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_preflight(p, ct, ca, o, e)
	})
}

// AddSubagent adds (or replaces, by name) a sub-agent definition between turns: the model is
// offered its agent_<name> tool from the next turn on. def is one JSON object (docs/
// subagents.md): text, or any value that marshals to one.
func (a *Agent) AddSubagent(def any) error {
	text, err := jsonText(def)
	if err != nil {
		return err
	}
	return a.withString(text, func(p *C.agentao_agent, s *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_add_subagent(p, s, e)
	})
}
