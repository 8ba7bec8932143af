//! OpenTelemetry traces and metrics (docs/observability.md): spans built from the agent's
//! typed events, exported over OTLP/HTTP by a bounded pipeline on the library's runtime.
//!
//! | file | what |
//! |---|---|
//! | `config.rs` | the `telemetry` config section and the `OTEL_*` environment variables |
//! | `traceparent.rs` | W3C trace context: the host's `traceparent` / `tracestate`, ids |
//! | `span.rs` | a span as the agent records it |
//! | `tracer.rs` | spans from the typed events ([`AgentTracer`], one per agent and sub-agent run) |
//! | `metrics.rs` | the instruments, aggregated in-process |
//! | `export.rs` | the bounded queue and the exporting task; drops counted |
//! | `otlp.rs` | the OTLP protobuf bodies (feature `otel`) |
//!
//! With no exporter configured no tracer exists: the emitter's one extra branch per event is
//! the whole cost.

pub(crate) mod config;
#[cfg(feature = "otel")]
mod export;
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
mod metrics;
#[cfg(feature = "otel")]
mod otlp;
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
mod span;
pub mod traceparent;
#[cfg(feature = "otel")]
mod tracer;

pub use config::TelemetryConfig;
#[cfg(feature = "otel")]
pub(crate) use export::Pipeline;
#[cfg(feature = "otel")]
pub use export::{ExportClosing, TelemetryStats};
pub use traceparent::{SpanContext, TraceContextError, TraceId};
#[cfg(feature = "otel")]
pub use tracer::{AgentTracer, TracerIdentity};

/// How the exporter is doing (without the `otel` feature there is none).
#[cfg(not(feature = "otel"))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetryStats {
    pub exported_spans: u64,
    pub dropped_spans: u64,
    pub failed_exports: u64,
    pub last_error: Option<String>,
}

/// Without the `otel` feature there is no exporter to wait for.
#[cfg(not(feature = "otel"))]
pub struct ExportClosing(std::convert::Infallible);

#[cfg(not(feature = "otel"))]
impl ExportClosing {
    pub fn wait_if_last(self, _may_block: bool) {
        match self.0 {}
    }
}

/// Without the `otel` feature no tracer is ever made; the type stands in so the agent's code
/// reads the same.
#[cfg(not(feature = "otel"))]
pub struct AgentTracer(std::convert::Infallible);

#[cfg(not(feature = "otel"))]
impl AgentTracer {
    pub fn set_parent(&self, _parent: Option<SpanContext>) {
        match self.0 {}
    }
    pub fn set_next_turn_parent(&self, _parent: Option<SpanContext>) {
        match self.0 {}
    }
    pub fn trace_id(&self) -> Option<TraceId> {
        match self.0 {}
    }
    pub fn turn_context(&self) -> Option<SpanContext> {
        match self.0 {}
    }
    pub fn stats(&self) -> TelemetryStats {
        match self.0 {}
    }
    pub fn closing(&self) -> ExportClosing {
        match self.0 {}
    }
}

/// The emitter's view of an agent's tracer.
pub(crate) fn as_observer(
    tracer: Option<&std::sync::Arc<AgentTracer>>,
) -> Option<std::sync::Arc<dyn crate::events::EventObserver>> {
    #[cfg(feature = "otel")]
    {
        tracer.map(|t| t.clone() as std::sync::Arc<dyn crate::events::EventObserver>)
    }
    #[cfg(not(feature = "otel"))]
    {
        tracer.map(|t| match t.0 {})
    }
}
