//! A span as the agent records it: plain data, finished once, then handed to the exporter.
//! The OTLP encoding of it is `otlp.rs`'s; nothing here knows the wire.

use std::time::SystemTime;

use super::traceparent::{SpanContext, SpanId, TraceId};

/// An attribute's value (the OTLP `AnyValue` kinds the agent uses).
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    StrList(Vec<String>),
}

impl From<&str> for AttrValue {
    fn from(s: &str) -> Self {
        AttrValue::Str(s.to_owned())
    }
}

impl From<String> for AttrValue {
    fn from(s: String) -> Self {
        AttrValue::Str(s)
    }
}

impl From<i64> for AttrValue {
    fn from(v: i64) -> Self {
        AttrValue::Int(v)
    }
}

impl From<u64> for AttrValue {
    fn from(v: u64) -> Self {
        AttrValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<u32> for AttrValue {
    fn from(v: u32) -> Self {
        AttrValue::Int(i64::from(v))
    }
}

impl From<usize> for AttrValue {
    fn from(v: usize) -> Self {
        AttrValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<f64> for AttrValue {
    fn from(v: f64) -> Self {
        AttrValue::Float(v)
    }
}

impl From<bool> for AttrValue {
    fn from(v: bool) -> Self {
        AttrValue::Bool(v)
    }
}

/// One `key = value`; keys are the semantic conventions' names or our `agentao.*` ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    pub key: &'static str,
    pub value: AttrValue,
}

/// The OTLP span kinds the agent makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Internal,
    /// A call out of the process: the model, an MCP server.
    Client,
}

/// How a span ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanStatus {
    Unset,
    Error(String),
}

/// Something that happened at one moment within a span (a permission decision, a host's
/// confirmation, a retry).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    pub name: &'static str,
    pub time: SystemTime,
    pub attributes: Vec<Attribute>,
}

/// A span, open or finished.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub parent_span_id: Option<SpanId>,
    pub trace_state: String,
    pub flags: u8,
    pub name: String,
    pub kind: SpanKind,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<Attribute>,
    pub events: Vec<SpanEvent>,
    pub status: SpanStatus,
}

impl SpanRecord {
    /// A span starting now under `parent`, or the root of a new trace.
    pub(crate) fn start(name: String, kind: SpanKind, parent: Option<&SpanContext>) -> Self {
        let now = SystemTime::now();
        SpanRecord {
            trace_id: parent.map_or_else(TraceId::random, |p| p.trace_id),
            span_id: SpanId::random(),
            parent_span_id: parent.map(|p| p.span_id),
            trace_state: parent.map(|p| p.trace_state.clone()).unwrap_or_default(),
            flags: parent.map_or(1, |p| p.flags),
            name,
            kind,
            start: now,
            end: now,
            attributes: Vec::new(),
            events: Vec::new(),
            status: SpanStatus::Unset,
        }
    }

    /// Where a child of this span sits.
    pub(crate) fn context(&self) -> SpanContext {
        SpanContext {
            trace_id: self.trace_id,
            span_id: self.span_id,
            flags: self.flags,
            trace_state: self.trace_state.clone(),
        }
    }

    /// Sets `key`, replacing an earlier value of it.
    pub(crate) fn set(&mut self, key: &'static str, value: impl Into<AttrValue>) {
        let value = value.into();
        match self.attributes.iter_mut().find(|a| a.key == key) {
            Some(a) => a.value = value,
            None => self.attributes.push(Attribute { key, value }),
        }
    }

    pub(crate) fn attribute(&self, key: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find(|a| a.key == key)
            .map(|a| &a.value)
    }

    pub(crate) fn event(&mut self, name: &'static str, attributes: Vec<Attribute>) {
        self.events.push(SpanEvent {
            name,
            time: SystemTime::now(),
            attributes,
        });
    }

    pub(crate) fn fail(&mut self, message: impl Into<String>) {
        self.status = SpanStatus::Error(message.into());
    }

    /// Ends the span now.
    pub(crate) fn finish(mut self) -> Self {
        self.end = SystemTime::now();
        self
    }
}

/// `key = value` for an event's attribute list.
pub(crate) fn attr(key: &'static str, value: impl Into<AttrValue>) -> Attribute {
    Attribute {
        key,
        value: value.into(),
    }
}
