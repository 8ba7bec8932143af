package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
)

// deltaText reads {"type":"text_delta","text":"..."}: a plain string is copied once, one
// with escapes goes through the JSON decoder.
func deltaText(b []byte) (string, bool) {
	const pre, suf = `{"type":"text_delta","text":"`, `"}`
	n := len(b)
	if n < len(pre)+len(suf) || string(b[:len(pre)]) != pre || string(b[n-len(suf):]) != suf {
		return "", false
	}
	body := b[len(pre) : n-len(suf)]
	for _, c := range body {
		if c == '\\' || c == '"' {
			var d struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(b, &d) != nil || d.Type != "text_delta" {
				return "", false
			}
			return d.Text, true
		}
	}
	return string(body), true
}

// getJSON runs a getter that writes a JSON document for the caller to release.
func (a *Agent) getJSON(get func(*C.agentao_agent, **C.char, **C.agentao_error) C.agentao_status) ([]byte, error) {
	ptr, err := a.acquire()
	if err != nil {
		return nil, err
	}
	defer a.release()
	var out *C.char
	var cerr *C.agentao_error
	if err := statusErr(get(ptr, &out, &cerr), cerr); err != nil {
		return nil, err
	}
	return takeBytes(out), nil
}

// getDecoded runs a getter whose JSON document decodes into a T.
func getDecoded[T any](a *Agent, get func(*C.agentao_agent, **C.char, **C.agentao_error) C.agentao_status) (*T, error) {
	b, err := a.getJSON(get)
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, &Error{Status: StatusInvalidJSON, Message: err.Error()}
	}
	return &v, nil
}

// LastTurn is the last turn's outcome (nil before the first turn). The last turn may be
// another caller's.
func (a *Agent) LastTurn() (*Outcome, error) {
	b, err := a.getJSON(func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_last_turn(p, o, e)
	})
	if err != nil {
		return nil, err
	}
	return parseOutcome(b)
}

// History is the conversation: a JSON array of chat messages (role system / user /
// assistant / tool, in the OpenAI shape). It is kept as JSON so that SetHistory(History())
// loses nothing.
func (a *Agent) History() (json.RawMessage, error) {
	return a.getJSON(func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_history(p, o, e)
	})
}

// SetHistory replaces the history (a JSON array of messages, or any value that marshals to
// one). Between turns only: StatusTurnInProgress otherwise.
func (a *Agent) SetHistory(history any) error {
	text, err := jsonText(history)
	if err != nil {
		return err
	}
	return a.withString(text, func(p *C.agentao_agent, s *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_set_history(p, s, e)
	})
}

// withString runs a call that borrows one string.
func (a *Agent) withString(s string, call func(*C.agentao_agent, *C.char, **C.agentao_error) C.agentao_status) error {
	cs, err := cstring(s)
	if err != nil {
		return err
	}
	defer freeC(cs)
	ptr, err := a.acquire()
	if err != nil {
		return err
	}
	defer a.release()
	var cerr *C.agentao_error
	return statusErr(call(ptr, cs, &cerr), cerr)
}

// PermissionMode is a permission mode.
type PermissionMode string

const (
	ReadOnly       PermissionMode = "read-only"
	WorkspaceWrite PermissionMode = "workspace-write"
	FullAccess     PermissionMode = "full-access"
	Plan           PermissionMode = "plan"
)

// Permissions is the permission snapshot.
type Permissions struct {
	Mode          PermissionMode    `json:"mode"`
	Rules         []json.RawMessage `json:"rules"`
	LoadedSources []string          `json:"loaded_sources"`
}

// ActivePermissions is the permission snapshot ("default:no-engine" among the sources when
// no engine is configured).
func (a *Agent) ActivePermissions() (*Permissions, error) {
	return getDecoded[Permissions](a, func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_active_permissions(p, o, e)
	})
}

// SetPermissionMode switches the mode for the next decision and returns the previous one.
// It emits the mode-change events through the transport on the calling goroutine's thread.
// Without an engine: StatusNoEngine.
func (a *Agent) SetPermissionMode(mode PermissionMode) (PermissionMode, error) {
	cm, err := cstring(string(mode))
	if err != nil {
		return "", err
	}
	defer freeC(cm)
	ptr, err := a.acquire()
	if err != nil {
		return "", err
	}
	defer a.release()
	var prev *C.char
	var cerr *C.agentao_error
	if err := statusErr(C.agentao_agent_set_permission_mode(ptr, cm, &prev, &cerr), cerr); err != nil {
		return "", err
	}
	return PermissionMode(takeString(prev)), nil
}

// AddPermissionRules injects rules (a JSON list in the permissions.json rule format, or a
// value that marshals to one) labelled "injected:<source>". All or nothing: an invalid rule
// is StatusInvalidArgument naming it.
func (a *Agent) AddPermissionRules(rules any, source string) error {
	text, err := jsonText(rules)
	if err != nil {
		return err
	}
	cs, err := cstring(source)
	if err != nil {
		return err
	}
	defer freeC(cs)
	return a.withString(text, func(p *C.agentao_agent, r *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_add_permission_rules(p, r, cs, e)
	})
}

// AddRunRules adds run-scope rules: deny rules are checked right after the hardline floor,
// allow rules join the user rules. nil means none; source "" means "run-spec".
func (a *Agent) AddRunRules(allow, deny any, source string) error {
	var ca, cd, cs *C.char
	for _, x := range []struct {
		v   any
		dst **C.char
	}{{allow, &ca}, {deny, &cd}} {
		if x.v == nil {
			continue
		}
		text, err := jsonText(x.v)
		if err == nil {
			*x.dst, err = cstring(text)
		}
		if err != nil {
			freeC(ca)
			return err
		}
	}
	defer freeC(ca)
	defer freeC(cd)
	if source != "" {
		var err error
		if cs, err = cstring(source); err != nil {
			return err
		}
		defer freeC(cs)
	}
	ptr, err := a.acquire()
	if err != nil {
		return err
	}
	defer a.release()
	var cerr *C.agentao_error
	return statusErr(C.agentao_agent_add_run_rules(ptr, ca, cd, cs, &cerr), cerr)
}

// AddPermissionSource adds a source label (hosts use "injected:<name>") to the snapshot.
func (a *Agent) AddPermissionSource(label string) error {
	return a.withString(label, func(p *C.agentao_agent, s *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_add_permission_source(p, s, e)
	})
}

// Usage is the session's provider-reported token totals.
type Usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	CacheReadTokens     int64 `json:"cache_read_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_tokens"`
	ReasoningTokens     int64 `json:"reasoning_tokens"`
}

// Usage returns the session's token totals.
func (a *Agent) Usage() (*Usage, error) {
	return getDecoded[Usage](a, func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_usage(p, o, e)
	})
}
