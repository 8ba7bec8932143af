//! The host's trace context (W3C `traceparent` / `tracestate`) for the agent's spans, and what
//! a host reads back: the current trace id and the exporter's counters (docs/observability.md).

use super::api::Agent;
use super::AgentError;
use crate::telemetry::{traceparent, ExportClosing, SpanContext, TelemetryStats};

fn parse(
    traceparent: Option<&str>,
    tracestate: Option<&str>,
) -> Result<Option<SpanContext>, AgentError> {
    match traceparent {
        None => {
            if tracestate.is_some() {
                return Err(AgentError::InvalidArgument(
                    "tracestate needs a traceparent".into(),
                ));
            }
            Ok(None)
        }
        Some(tp) => traceparent::parse(tp, tracestate)
            .map(Some)
            .map_err(|e| AgentError::InvalidArgument(e.0)),
    }
}

impl Agent {
    /// Every later turn's span is a child of the host's span `traceparent` (with
    /// `tracestate` passed on); `None` clears it (each turn then starts its own trace). A
    /// malformed value is `InvalidArgument` and changes nothing. With no exporter configured
    /// the value is checked and otherwise unused.
    pub fn set_trace_parent(
        &self,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
    ) -> Result<(), AgentError> {
        let ctx = parse(traceparent, tracestate)?;
        if let Some(t) = &self.core.tracer {
            t.set_parent(ctx);
        }
        Ok(())
    }

    /// As [`Agent::set_trace_parent`], for the next turn only (it wins over the agent's).
    pub fn set_turn_trace_parent(
        &self,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
    ) -> Result<(), AgentError> {
        let ctx = parse(traceparent, tracestate)?;
        if let Some(t) = &self.core.tracer {
            t.set_next_turn_parent(ctx);
        }
        Ok(())
    }

    /// The trace id (32 lowercase hex digits) of the turn that runs, else of the last turn;
    /// `None` before the first turn or when no exporter is configured.
    pub fn trace_id(&self) -> Option<String> {
        self.core
            .tracer
            .as_ref()
            .and_then(|t| t.trace_id())
            .map(|id| id.to_string())
    }

    /// The `traceparent` of the running turn's span (what a host continues inside a callback).
    pub fn turn_traceparent(&self) -> Option<String> {
        self.core
            .tracer
            .as_ref()
            .and_then(|t| t.turn_context())
            .map(|c| c.traceparent())
    }

    /// The exporter's counters; `None` when no exporter is configured.
    pub fn telemetry_stats(&self) -> Option<TelemetryStats> {
        self.core.tracer.as_ref().map(|t| t.stats())
    }

    /// Taken before the agent is dropped, for its host's free to wait on the last posts of the
    /// exporter (`ExportClosing::wait_if_last`); `None` when no exporter is configured.
    pub fn telemetry_closing(&self) -> Option<ExportClosing> {
        self.core.tracer.as_ref().map(|t| t.closing())
    }
}
