package agentao

/*
#include "shim.h"
*/
import "C"

// TelemetryStatus is the OpenTelemetry exporter's state (agentao_agent_telemetry_status;
// docs/observability.md). Agents with the same telemetry settings share one exporter, and so
// its counts.
type TelemetryStatus struct {
	// Enabled is false (and the counts zero) when no exporter is configured.
	Enabled bool `json:"enabled"`
	// The counts since the exporter started.
	ExportedSpans uint64 `json:"exported_spans"`
	DroppedSpans  uint64 `json:"dropped_spans"`
	FailedExports uint64 `json:"failed_exports"`
	// LastError is the last failed export's reason; nil when none failed.
	LastError *string `json:"last_error"`
}

// SetTraceparent makes every later turn a child of the host's span: traceparent is a W3C
// traceparent header value (00-<32 hex>-<16 hex>-<2 hex>), tracestate its tracestate ("" for
// none). An empty traceparent clears it (each turn then starts a trace of its own). A
// malformed value is StatusInvalidArgument and changes nothing. Any goroutine, also from a
// transport callback.
func (a *Agent) SetTraceparent(traceparent, tracestate string) error {
	return a.setTraceparent(traceparent, tracestate,
		func(p *C.agentao_agent, tp, ts *C.char, e **C.agentao_error) C.agentao_status {
			return C.agentao_agent_set_traceparent(p, tp, ts, e)
		})
}

// SetTurnTraceparent is SetTraceparent for the next turn only: it wins over the agent's once,
// then later turns go back to the agent's. An empty traceparent withdraws a value set for the
// next turn.
func (a *Agent) SetTurnTraceparent(traceparent, tracestate string) error {
	return a.setTraceparent(traceparent, tracestate,
		func(p *C.agentao_agent, tp, ts *C.char, e **C.agentao_error) C.agentao_status {
			return C.agentao_agent_set_turn_traceparent(p, tp, ts, e)
		})
}

// TraceID is the trace id (32 lowercase hex digits) of the turn that runs (called from one of
// its callbacks, e.g. EmitEvent), else of the last turn; "" before the first turn or when no
// exporter is configured.
func (a *Agent) TraceID() (string, error) {
	b, err := a.getJSON(func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_trace_id(p, o, e)
	})
	return string(b), err
}

// TelemetryStatus reports the exporter's counters.
func (a *Agent) TelemetryStatus() (*TelemetryStatus, error) {
	return getDecoded[TelemetryStatus](a, func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_telemetry_status(p, o, e)
	})
}

// An empty string is NULL to the library: "no traceparent" / "no tracestate".
func (a *Agent) setTraceparent(traceparent, tracestate string,
	set func(*C.agentao_agent, *C.char, *C.char, **C.agentao_error) C.agentao_status) error {
	var ctp, cts *C.char
	var err error
	if traceparent != "" {
		if ctp, err = cstring(traceparent); err != nil {
			return err
		}
		defer freeC(ctp)
	}
	if tracestate != "" {
		if cts, err = cstring(tracestate); err != nil {
			return err
		}
		defer freeC(cts)
	}
	ptr, err := a.acquire()
	if err != nil {
		return err
	}
	defer a.release()
	var cerr *C.agentao_error
	return statusErr(set(ptr, ctp, cts, &cerr), cerr)
}
