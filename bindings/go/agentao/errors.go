package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
)

// Status is the library's status code (agentao_status). A Status is also an error value, so
// errors.Is(err, StatusCancelled) tests the status of any error this package returns.
type Status int32

// The statuses of agentao.h; values are stable.
const (
	StatusOK              Status = 0
	StatusNullArgument    Status = 1
	StatusInvalidArgument Status = 2
	StatusInvalidUTF8     Status = 3
	StatusInvalidJSON     Status = 4
	StatusInvalidConfig   Status = 5
	StatusTurnInProgress  Status = 6
	StatusNoSubscribe     Status = 7
	StatusStreamSubscribe Status = 8
	StatusCancelled       Status = 9
	StatusTimeout         Status = 10
	StatusReentrant       Status = 11
	StatusPanic           Status = 12
	StatusInternal        Status = 13
	StatusHostError       Status = 14
	StatusClosed          Status = 15
	StatusNoEngine        Status = 16
	// StatusEventsDropped: a host-event stream skipped events a cancelled turn could not
	// queue; the stream goes on after it.
	StatusEventsDropped Status = 17
	// StatusConflict: a session commit continued a version another agent had replaced.
	StatusConflict Status = 18
	// StatusStoreUnavailable: the session store failed or cannot be reached.
	StatusStoreUnavailable Status = 19
	// StatusCorruptSession: a session document or stored session cannot be read.
	StatusCorruptSession Status = 20
)

// String is the status's short name, e.g. "CANCELLED".
func (s Status) String() string { return C.GoString(C.agentao_status_name(C.int32_t(s))) }

func (s Status) Error() string { return "agentao: " + s.String() }

// ErrClosed is returned by every method of an Agent after Close.
var ErrClosed = errors.New("agentao: agent is closed")

// ErrAnswered is returned when a reply is answered a second time.
var ErrAnswered = errors.New("agentao: reply already answered")

// Error is a failed call: the status and the library's message. A cancelled turn's error
// also wraps the context's error (errors.Is(err, context.Canceled) holds).
type Error struct {
	Status  Status
	Message string
	cause   error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "agentao: " + e.Status.String()
	}
	return "agentao: " + e.Status.String() + ": " + e.Message
}

// Is matches a Status, or another *Error with the same status.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return e.Status == t
	case *Error:
		return e.Status == t.Status
	}
	return false
}

func (e *Error) Unwrap() error { return e.cause }

// statusErr turns a status and its optional error object into a Go error, releasing the object.
func statusErr(st C.agentao_status, cerr *C.agentao_error) error {
	if st == C.AGENTAO_STATUS_OK {
		C.agentao_error_free(cerr)
		return nil
	}
	e := &Error{Status: Status(st)}
	if cerr != nil {
		e.Message = C.GoString(C.agentao_error_message(cerr))
		C.agentao_error_free(cerr)
	}
	return e
}
