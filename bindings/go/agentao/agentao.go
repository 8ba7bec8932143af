// Package agentao is the Go binding of libagentao: it runs a governed LLM agent (turn loop,
// tools, host confirmations, permission engine, host events) through the library's C ABI.
//
// Ownership: an *Agent owns its C handle; Close releases it (a finalizer is only a safety
// net). Strings cross the boundary as copies, and callbacks get Go values that stay valid
// after they return. No Go pointer is ever stored in C memory: callbacks find their Go side
// through a cgo.Handle, deleted when the library releases the userdata.
//
// Threads: every method is safe for concurrent use. Transport methods and observers run on
// library threads; for one agent, EmitEvent and observer calls never overlap. A reply
// (ConfirmReply, AnswerReply, MaxIterationsReply) may be answered inside the callback or later
// from any goroutine.
//
// Cancellation: Chat, Run and Stream take a context.Context; its cancellation cancels the
// turn (the turn ends with an error matching StatusCancelled and the context's error). An
// agent stays registered on the last context it ran a turn with (one context.AfterFunc, kept
// for the next turn on the same context) until a turn on another context or Close.
//
// Errors are values: *Error carries the Status and the library's message, and
// errors.Is(err, agentao.StatusCancelled) (or any other Status) tests the status.
//
// The library is found with pkg-config (package "agentao"): set PKG_CONFIG_PATH to the
// directory holding agentao.pc. See docs/bindings.md.
package agentao

/*
#cgo pkg-config: agentao
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"strings"
	"unsafe"
)

// Version is the library's version, "MAJOR.MINOR.PATCH".
func Version() string { return C.GoString(C.agentao_version()) }

// HostEventsSchema is the JSON Schema (v3) of the host events the library emits.
func HostEventsSchema() string { return C.GoString(C.agentao_host_events_schema()) }

// SetWorkerThreads sets the size of the library's runtime; only before the first agent.
func SetWorkerThreads(n int) error {
	if n < 1 || n > 1<<16 {
		return &Error{Status: StatusInvalidArgument, Message: "worker threads must be between 1 and 65536"}
	}
	var cerr *C.agentao_error
	return statusErr(C.agentao_runtime_set_worker_threads(C.uint32_t(n), &cerr), cerr)
}

// takeString copies and releases a string the library handed out.
func takeString(s *C.char) string {
	if s == nil {
		return ""
	}
	out := C.GoString(s)
	C.agentao_string_free(s)
	return out
}

// takeBytes is takeString for JSON documents.
func takeBytes(s *C.char) []byte {
	if s == nil {
		return nil
	}
	out := C.GoBytes(unsafe.Pointer(s), C.int(C.strlen(s)))
	C.agentao_string_free(s)
	return out
}

// jsonText turns a JSON argument into text: strings, []byte and json.RawMessage are taken
// as they are, anything else is marshalled.
func jsonText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case json.RawMessage:
		return string(v), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", &Error{Status: StatusInvalidJSON, Message: err.Error()}
	}
	return string(b), nil
}

// cstring is C.CString that refuses text the library could not read anyway.
func cstring(s string) (*C.char, error) {
	if err := checkNUL(s); err != nil {
		return nil, err
	}
	return C.CString(s), nil
}

// checkNUL refuses a string a C string cannot carry.
func checkNUL(s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return &Error{Status: StatusInvalidArgument, Message: "string contains a NUL byte"}
	}
	return nil
}

func freeC(p *C.char) { C.free(unsafe.Pointer(p)) }
