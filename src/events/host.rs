//! Host events (spec §3): the stable, schema-checked projection of what a turn did.
//!
//! The wire form is the reference's v3 `model_dump_json()`: compact JSON, keys in model field
//! order, optional fields present as `null`, millisecond UTC timestamps ending in `Z`. Nobody
//! assembles these by hand: they are projected from the typed events
//! (`host_projection::host_event`), with the field rules (redaction, rule projection,
//! timestamps) defined here.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::cancel::CancelToken;

/// The v3 schema this library targets (byte-identical to the reference's export).
pub const HOST_EVENTS_SCHEMA_V3: &str =
    include_str!("../../docs/schema/host.events.v3.schema.json");

/// Capacity of each pull stream's queue (spec §3.8).
pub(crate) const STREAM_CAPACITY: usize = 64;

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, UTC, truncated to milliseconds.
pub(crate) fn now_rfc3339() -> String {
    rfc3339_millis(chrono::Utc::now())
}

/// Written directly, not through a parsed `strftime` format (two per tool call: that parse was
/// 2 % of a tool-loop iteration).
pub(crate) fn rfc3339_millis(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The reference's `redact_summary`: whitespace collapsed, trimmed, empty → none, capped at 240
/// code points (237 + `...`).
pub(crate) fn redact_summary(s: &str) -> Option<String> {
    let collapsed = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return None;
    }
    if collapsed.chars().count() > 240 {
        let mut cut: String = collapsed.chars().take(237).collect();
        cut.push_str("...");
        return Some(cut);
    }
    Some(collapsed)
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

/// `matched_rule` projection: top-level scalars and nulls kept; nested objects keep their
/// scalar, list and null members; top-level lists keep their scalar items; the rest is dropped.
pub(crate) fn project_rule(rule: &Value) -> Option<Value> {
    let obj = rule.as_object()?;
    let mut out = Map::new();
    for (k, v) in obj {
        match v {
            Value::Object(inner) => {
                let kept: Map<String, Value> = inner
                    .iter()
                    .filter(|(_, x)| is_scalar(x) || x.is_array())
                    .map(|(a, b)| (a.clone(), b.clone()))
                    .collect();
                out.insert(k.clone(), Value::Object(kept));
            }
            Value::Array(items) => {
                out.insert(
                    k.clone(),
                    Value::Array(items.iter().filter(|x| is_scalar(x)).cloned().collect()),
                );
            }
            scalar => {
                out.insert(k.clone(), scalar.clone());
            }
        }
    }
    Some(Value::Object(out))
}

/// One host event: the closed union of the v3 schema, discriminated by `event_type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event_type", rename_all = "snake_case")]
pub(crate) enum HostEvent {
    ToolLifecycle(ToolLifecycleEvent),
    PermissionDecision(PermissionDecisionEvent),
    /// A sub-agent spawned and how it ended (`subagents::outcome`; docs/subagents.md).
    SubagentLifecycle(SubagentLifecycleEvent),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ToolPhase {
    Started,
    Completed,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ToolOutcome {
    Ok,
    Error,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PermissionOutcome {
    Allow,
    Deny,
    Prompt,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolLifecycleEvent {
    pub(crate) session_id: String,
    pub(crate) turn_id: Option<String>,
    pub(crate) tool_call_id: String,
    pub(crate) tool_name: String,
    pub(crate) phase: ToolPhase,
    pub(crate) started_at: String,
    pub(crate) completed_at: Option<String>,
    pub(crate) outcome: Option<ToolOutcome>,
    pub(crate) summary: Option<String>,
    pub(crate) error_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PermissionDecisionEvent {
    pub(crate) session_id: String,
    pub(crate) turn_id: Option<String>,
    pub(crate) tool_call_id: Option<String>,
    pub(crate) tool_name: String,
    pub(crate) decision_id: String,
    pub(crate) outcome: PermissionOutcome,
    pub(crate) mode: String,
    pub(crate) matched_rule: Option<Value>,
    pub(crate) reason: Option<String>,
    pub(crate) loaded_sources: Vec<String>,
    pub(crate) decided_at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SubagentPhase {
    Spawned,
    Completed,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SubagentLifecycleEvent {
    pub(crate) session_id: String,
    pub(crate) parent_session_id: Option<String>,
    pub(crate) parent_task_id: Option<String>,
    pub(crate) parent_tool_call_id: Option<String>,
    pub(crate) child_session_id: Option<String>,
    pub(crate) child_task_id: String,
    pub(crate) phase: SubagentPhase,
    pub(crate) task_summary: Option<String>,
    pub(crate) started_at: String,
    pub(crate) completed_at: Option<String>,
    pub(crate) error_type: Option<String>,
    pub(crate) usage: Option<SubagentUsage>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SubagentUsage {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) cache_read_tokens: u64,
    pub(crate) cache_creation_tokens: u64,
    pub(crate) reasoning_tokens: u64,
}

/// A host-event observer: called inline, in order, for every event of the agent.
pub(crate) type Observer = Arc<dyn Fn(&str) + Send + Sync>;

struct StreamSub {
    id: u64,
    filter: Option<String>,
    tx: mpsc::Sender<StreamItem>,
    /// Events dropped for this stream and not yet reported to its reader.
    dropped: Arc<AtomicU64>,
}

/// One queued event, with the number of events dropped just before it.
pub(crate) struct StreamItem {
    dropped_before: u64,
    json: Arc<str>,
}

/// What a host-event stream yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamNext {
    Event(Arc<str>),
    /// This many events were dropped here, between the previous event and the next: a turn was
    /// cancelled (or its agent freed) while the stream was full, and it does not wait for a
    /// reader once it is cancelled.
    Dropped(u64),
    /// The stream was closed.
    Closed,
}

/// The reading end of a host-event stream: events in order, and where events were dropped,
/// one [`StreamNext::Dropped`] at the place of the gap.
pub struct HostEventReceiver {
    rx: mpsc::Receiver<StreamItem>,
    dropped: Arc<AtomicU64>,
    /// The event that followed a gap, held back while the gap is reported.
    held: Option<Arc<str>>,
}

impl HostEventReceiver {
    fn item(&mut self, item: StreamItem) -> StreamNext {
        if item.dropped_before > 0 {
            self.held = Some(item.json);
            StreamNext::Dropped(item.dropped_before)
        } else {
            StreamNext::Event(item.json)
        }
    }

    /// Drops not carried by a queued event (nothing was sent since): reported when the queue
    /// is empty, which is where they happened.
    fn loose_drops(&self) -> Option<StreamNext> {
        match self.dropped.swap(0, Ordering::AcqRel) {
            0 => None,
            n => Some(StreamNext::Dropped(n)),
        }
    }

    /// The next item if one is ready, without waiting.
    pub fn try_next(&mut self) -> Option<StreamNext> {
        if let Some(json) = self.held.take() {
            return Some(StreamNext::Event(json));
        }
        match self.rx.try_recv() {
            Ok(item) => Some(self.item(item)),
            Err(mpsc::error::TryRecvError::Empty) => self.loose_drops(),
            Err(mpsc::error::TryRecvError::Disconnected) => {
                Some(self.loose_drops().unwrap_or(StreamNext::Closed))
            }
        }
    }

    /// Waits for the next item.
    pub(crate) async fn next(&mut self) -> StreamNext {
        if let Some(n) = self.try_next() {
            return n;
        }
        match self.rx.recv().await {
            Some(item) => self.item(item),
            None => self.loose_drops().unwrap_or(StreamNext::Closed),
        }
    }

    /// Closes the queue for good: what it held is dropped, a publisher waiting for room gets
    /// its event back, and every later read is [`StreamNext::Closed`].
    pub fn close(&mut self) {
        self.rx.close();
        while self.rx.try_recv().is_ok() {}
        self.held = None;
        self.dropped.store(0, Ordering::Release);
    }

    /// Waits for the next item on a thread outside the runtime.
    pub fn blocking_next(&mut self) -> StreamNext {
        if let Some(n) = self.try_next() {
            return n;
        }
        match self.rx.blocking_recv() {
            Some(item) => self.item(item),
            None => self.loose_drops().unwrap_or(StreamNext::Closed),
        }
    }
}

#[derive(Default)]
struct HubInner {
    observers: Vec<(u64, Observer)>,
    streams: Vec<StreamSub>,
}

/// Per-agent fan-out of host events to observers and pull streams.
#[derive(Default)]
pub struct HostEventHub {
    inner: Mutex<Arc<HubInner>>,
    listeners: AtomicUsize,
    next_id: AtomicU64,
}

#[derive(Debug, thiserror::Error)]
#[error("a host-event stream with this session filter is already open")]
pub struct StreamSubscribeError;

impl HostEventHub {
    /// Whether anyone listens; events are not even built otherwise.
    pub(crate) fn has_listeners(&self) -> bool {
        self.listeners.load(Ordering::Acquire) > 0
    }

    fn update(&self, f: impl FnOnce(&mut HubInner) -> Option<u64>) -> Option<u64> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = HubInner {
            observers: guard.observers.clone(),
            streams: guard
                .streams
                .iter()
                .map(|s| StreamSub {
                    id: s.id,
                    filter: s.filter.clone(),
                    tx: s.tx.clone(),
                    dropped: s.dropped.clone(),
                })
                .collect(),
        };
        let r = f(&mut next);
        self.listeners
            .store(next.observers.len() + next.streams.len(), Ordering::Release);
        *guard = Arc::new(next);
        r
    }

    pub fn add_observer(&self, observer: Observer) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        self.update(|h| {
            h.observers.push((id, observer));
            None
        });
        id
    }

    /// Idempotent; true when the observer was registered.
    pub(crate) fn remove_observer(&self, id: u64) -> bool {
        self.update(|h| {
            let before = h.observers.len();
            h.observers.retain(|(i, _)| *i != id);
            (h.observers.len() != before).then_some(1)
        })
        .is_some()
    }

    /// Opens a pull stream. `filter`: only events of that session (None: all of this agent).
    pub fn open_stream(
        &self,
        filter: Option<String>,
    ) -> Result<(u64, HostEventReceiver), StreamSubscribeError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
        let dropped = Arc::new(AtomicU64::new(0));
        let receiver = HostEventReceiver {
            rx,
            dropped: dropped.clone(),
            held: None,
        };
        let mut clash = false;
        self.update(|h| {
            if h.streams
                .iter()
                .any(|s| s.filter == filter && !s.tx.is_closed())
            {
                clash = true;
            } else {
                h.streams.retain(|s| !s.tx.is_closed());
                h.streams.push(StreamSub {
                    id,
                    filter,
                    tx,
                    dropped,
                });
            }
            None
        });
        if clash {
            Err(StreamSubscribeError)
        } else {
            Ok((id, receiver))
        }
    }

    pub fn close_stream(&self, id: u64) {
        self.update(|h| {
            h.streams.retain(|s| s.id != id);
            None
        });
    }

    /// Delivers one event: observers first (inline; a panicking one is contained), then each
    /// matching stream, waiting for room (back-pressure: a slow reader slows the turn) unless
    /// the stream was closed or `cancel` fires. Once `cancel` has fired (the turn was cancelled
    /// or its agent freed) nothing waits: an event that finds its stream full is dropped for
    /// that stream and counted, and the reader is told how many, where they were dropped (the
    /// reference drops blocked writes of a cancelled turn the same way).
    ///
    /// Only the projection publishes ([`HostEventHub::project`]): nobody else builds an event.
    pub(super) async fn publish(&self, session_id: &str, event: &HostEvent, cancel: &CancelToken) {
        if !self.has_listeners() {
            return;
        }
        let json = serde_json::to_string(event).expect("host events serialize");
        let snapshot = self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (_, obs) in &snapshot.observers {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| obs(&json)));
        }
        if snapshot.streams.is_empty() {
            return;
        }
        let shared: Arc<str> = Arc::from(json);
        for s in &snapshot.streams {
            if s.filter.as_deref().is_some_and(|f| f != session_id) {
                continue;
            }
            let dropped_before = s.dropped.swap(0, Ordering::AcqRel);
            let item = StreamItem {
                dropped_before,
                json: shared.clone(),
            };
            let item = match s.tx.try_send(item) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => continue,
                Err(mpsc::error::TrySendError::Full(item)) => item,
            };
            let delivered = !cancel.is_cancelled()
                && tokio::select! {
                    biased;
                    // Err: closed meanwhile, which is not a drop the reader could see.
                    _ = s.tx.send(item) => true,
                    _ = cancel.cancelled() => false,
                };
            if !delivered {
                s.dropped.fetch_add(dropped_before + 1, Ordering::AcqRel);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_the_strftime_form() {
        use chrono::TimeZone;
        for (secs, nanos) in [
            (0, 0),
            (1_764_777_600, 5_000_000),
            (4_102_444_799, 999_999_999),
        ] {
            let t = chrono::Utc.timestamp_opt(secs, nanos).unwrap();
            let old = t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
            assert_eq!(rfc3339_millis(t), old);
        }
        assert_eq!(now_rfc3339().len(), "2026-12-03T16:00:00.123Z".len());
    }

    #[test]
    fn summary_redaction() {
        assert_eq!(redact_summary("  a \n\t b "), Some("a b".into()));
        assert_eq!(redact_summary(" \n"), None);
        let long = "x".repeat(300);
        let r = redact_summary(&long).unwrap();
        assert_eq!(r.chars().count(), 240);
        assert!(r.ends_with("..."));
    }

    #[test]
    fn rule_projection() {
        let r = serde_json::json!({"tool": "web_fetch", "action": "deny",
            "domain": {"blocklist": ["a"], "nested": {"x": 1}, "url_arg": "url"},
            "list": [1, {"x": 1}]});
        let p = project_rule(&r).unwrap();
        assert_eq!(
            p,
            serde_json::json!({"tool": "web_fetch", "action": "deny",
            "domain": {"blocklist": ["a"], "url_arg": "url"}, "list": [1]})
        );
    }

    #[test]
    fn timestamps_have_millis_and_z() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 24);
        assert!(t.ends_with('Z'));
    }

    #[test]
    fn reference_examples_round_trip_through_our_types() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/conformance/host-event-examples.jsonl"
        ))
        .expect("tests/conformance/host-event-examples.jsonl");
        let mut n = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let ev: HostEvent =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(serde_json::to_string(&ev).unwrap(), line);
            n += 1;
        }
        assert_eq!(n, 10);
        let extra = r#"{"event_type":"tool_lifecycle","session_id":"s","turn_id":null,"tool_call_id":"c","tool_name":"t","phase":"started","started_at":"2026-01-01T00:00:00.000Z","completed_at":null,"outcome":null,"summary":null,"error_type":null,"x":1}"#;
        assert!(
            serde_json::from_str::<HostEvent>(extra).is_err(),
            "closed models"
        );
    }

    #[test]
    fn one_stream_per_filter() {
        let hub = HostEventHub::default();
        let (_, _rx) = hub.open_stream(None).unwrap();
        assert!(hub.open_stream(None).is_err());
        assert!(hub.open_stream(Some("s".into())).is_ok());
    }
}
