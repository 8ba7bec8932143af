package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"runtime/cgo"
)

// MemoryStore keeps an agent's memories (see SetMemoryStore), e.g. in a remote service.
// Records are JSON objects (see agentao.h: id, scope, type, key_normalized, title, content,
// tags, ...). Calls of one agent never overlap; they run on library threads where blocking
// is fine. An error (or a panic) makes save_memory report "Error saving memory: ..." and
// leaves the turn's prompt without memories.
type MemoryStore interface {
	// Upsert inserts record, or replaces the live record with the same scope and
	// key_normalized.
	Upsert(record json.RawMessage) error
	// List returns the live records of scope ("user", "project", or "" for both) as a JSON
	// array, most recently updated first (nil or JSON null: none).
	List(scope string) (json.RawMessage, error)
}

// MemoryGetter is an optional MemoryStore method: the live record with scope and key, or
// JSON null. Without it the library looks the record up in List.
type MemoryGetter interface {
	Get(scope, key string) (json.RawMessage, error)
}

// MemorySearcher is an optional MemoryStore method: the live records (of scope, "" for both)
// relevant to query, as a JSON array. Without it the library matches words of List's records.
type MemorySearcher interface {
	Search(query, scope string) (json.RawMessage, error)
}

// The operations of goAgentaoMemory, as shim.c numbers them.
const (
	memUpsert = 0
	memList   = 1
	memGet    = 2
	memSearch = 3
)

//export goAgentaoMemory
func goAgentaoMemory(h C.uintptr_t, op C.int, a, b *C.char, answer *C.agentao_memory_answer) {
	fail := func(message string) {
		cm := C.CString(sanitize(message))
		C.agentao_memory_answer_fail(answer, cm, nil)
		freeC(cm)
	}
	defer func() {
		if v := recover(); v != nil {
			fail(panicMessage("MemoryStore", v))
		}
	}()
	str := func(p *C.char) string {
		if p == nil {
			return ""
		}
		return C.GoString(p)
	}
	store := cgo.Handle(h).Value().(MemoryStore)
	var out json.RawMessage
	var err error
	switch op {
	case memUpsert:
		err = store.Upsert(json.RawMessage(str(a)))
	case memList:
		out, err = store.List(str(a))
	case memGet:
		out, err = store.(MemoryGetter).Get(str(a), str(b))
	case memSearch:
		out, err = store.(MemorySearcher).Search(str(a), str(b))
	}
	if err != nil {
		fail(err.Error())
		return
	}
	if op == memUpsert {
		return
	}
	// A nil Go slice marshals to null: for a list that means "no records".
	if len(out) == 0 || (op != memGet && string(out) == "null") {
		out = json.RawMessage("null")
		if op != memGet {
			out = json.RawMessage("[]")
		}
	}
	cj := C.CString(sanitize(string(out)))
	C.agentao_memory_answer_json(answer, cj, nil)
	freeC(cj)
}

// SetMemoryStore keeps the agent's memories in store: save_memory writes to it and every turn
// shows its memories to the model. nil restores a new, empty in-memory store. Right after New
// or between turns.
func (a *Agent) SetMemoryStore(store MemoryStore) error {
	var get, search C.int
	if _, ok := store.(MemoryGetter); ok {
		get = 1
	}
	if _, ok := store.(MemorySearcher); ok {
		search = 1
	}
	return a.setCapability(store != nil, store, func(p *C.agentao_agent, h C.uintptr_t, e **C.agentao_error) C.agentao_status {
		return C.agentao_go_set_memory_store(p, h, get, search, e)
	})
}
