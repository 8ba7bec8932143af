//! Events: the agent's typed [`TurnEvent`]s and their projections (the transport JSON sent to
//! the transport's `emit`, host events v3), the transport itself, and the host events'
//! observers and pull streams.
//!
//! Where a callback is made: `emit` and `observe` go through [`Emitter::send`]; the blocking
//! requests (`confirm_tool`, `ask_user`, `on_max_iterations`) through [`transport::Transport`];
//! host events through [`host::HostEventHub::project`].

mod event_data;
pub mod host;
pub(crate) mod host_projection;
mod json_text;
pub(crate) mod subagent_event;
pub mod transport;
pub mod turn_event;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use event_data::event_data;
pub use json_text::JsonText;
pub(crate) use json_text::{plain_len, push_json_string};
use transport::Transport;
pub use turn_event::TurnEvent;

/// An in-process reader of every typed event an emitter sends, beside its transport: the
/// telemetry's tracer (a layer above this one, hence a trait).
pub(crate) trait EventObserver: Send + Sync {
    /// One event, inline on the sending thread, before the transport gets it. Must return
    /// quickly and never call back into the agent.
    fn observe(&self, event: &TurnEvent<'_>);
    /// The observer of a sub-agent's run spawned as `child_task_id` (its emitter's).
    fn child(&self, child_task_id: &str) -> Option<Arc<dyn EventObserver>>;
}

/// Serializes `emit` per agent without holding a lock across the callback.
///
/// One caller at a time owns the gate (one atomic swap) and delivers; anyone who finds it taken
/// (another thread, or the same thread re-entering from inside `emit`) queues an owned copy that
/// the owner delivers before it lets go. So callbacks never overlap, a re-entrant emit cannot
/// deadlock, and the uncontended path costs one compare-and-swap.
pub(crate) struct Emitter {
    transport: Arc<dyn Transport>,
    /// [`Transport::always_listens`], asked once.
    always_listens: bool,
    /// [`Transport::observes`], asked once.
    observes: bool,
    /// The tracer, when telemetry is exported; `None` costs one branch per event.
    observer: Option<Arc<dyn EventObserver>>,
    busy: AtomicBool,
    queued: AtomicUsize,
    pending: Mutex<VecDeque<String>>,
}

impl Emitter {
    pub(crate) fn new(transport: Arc<dyn Transport>) -> Self {
        Emitter {
            always_listens: transport.always_listens(),
            observes: transport.observes(),
            observer: None,
            transport,
            busy: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            pending: Mutex::new(VecDeque::new()),
        }
    }

    /// This emitter with `observer` reading every event it sends.
    pub(crate) fn with_observer(mut self, observer: Option<Arc<dyn EventObserver>>) -> Self {
        self.observer = observer;
        self
    }

    /// The observer of a sub-agent's run spawned as `child_task_id`, when this emitter has one.
    pub(crate) fn child_observer(&self, child_task_id: &str) -> Option<Arc<dyn EventObserver>> {
        self.observer.as_ref()?.child(child_task_id)
    }

    pub(crate) fn transport(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    /// Whether an event emitted now reaches anyone (the transport observes typed events or
    /// [`Transport::listens`]): callers skip building events nobody receives.
    pub(crate) fn listens(&self) -> bool {
        self.observes() || self.writes_json()
    }

    /// Whether an event emitted now is wanted as transport JSON ([`Transport::listens`]).
    pub(crate) fn writes_json(&self) -> bool {
        self.always_listens || self.transport.listens()
    }

    /// Whether the typed events are read in-process: by the transport
    /// ([`Transport::observes`]) or by an [`EventObserver`].
    pub(crate) fn observes(&self) -> bool {
        self.observes || self.observer.is_some()
    }

    /// Delivers one typed event: to the transport's [`Transport::observe`] when it observes,
    /// and as JSON written into `writer` to its `emit` when it listens.
    #[inline]
    pub(crate) fn send(&self, writer: &mut EventWriter, event: &TurnEvent<'_>) {
        self.send_with(writer, event, self.writes_json());
    }

    /// [`Emitter::send`] with [`Emitter::writes_json`] already asked: a streamed delta asks
    /// once, for the event and the stream item.
    #[inline]
    pub(crate) fn send_with(&self, writer: &mut EventWriter, event: &TurnEvent<'_>, json: bool) {
        if let Some(observer) = &self.observer {
            observer.observe(event);
        }
        if self.observes {
            self.transport.observe(event);
        }
        if json {
            if let Some(text) = event.write_json(writer) {
                self.emit(text);
            }
        }
    }

    /// An event of the agent's own, outside a turn (a mode change, an MCP server's status),
    /// which has no host event: sent as [`Emitter::send`] sends, when anyone listens.
    pub(crate) fn send_notice(&self, event: &TurnEvent<'_>) {
        debug_assert!(
            !host_projection::has_host_event(event),
            "{} has a host event to publish",
            event.kind()
        );
        if self.listens() {
            self.send(&mut EventWriter::default(), event);
        }
    }

    pub(crate) fn emit(&self, event: JsonText<'_>) {
        if self.try_own() {
            let _unwinding = LetGoOnUnwind(&self.busy);
            if self.queued.load(Ordering::Acquire) > 0 {
                self.drain();
            }
            self.transport.emit_json(event);
            self.release();
        } else {
            self.enqueue(event.as_str().to_owned());
        }
    }

    fn try_own(&self) -> bool {
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    fn enqueue(&self, event: String) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(event);
        self.queued.fetch_add(1, Ordering::Release);
        // The owner may have let go between our failed swap and the push: deliver it ourselves.
        if self.try_own() {
            self.drain();
            self.release();
        }
    }

    /// Delivers what is queued; called by the owner.
    fn drain(&self) {
        let _unwinding = LetGoOnUnwind(&self.busy);
        while self.queued.load(Ordering::Acquire) > 0 {
            let next = self
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            match next {
                Some(ev) => {
                    self.queued.fetch_sub(1, Ordering::Release);
                    self.transport.emit(&ev);
                }
                None => break,
            }
        }
    }

    fn release(&self) {
        loop {
            self.busy.store(false, Ordering::Release);
            if self.queued.load(Ordering::Acquire) == 0 || !self.try_own() {
                return;
            }
            self.drain();
        }
    }
}

/// Lets go of an emitter whose transport's `emit` unwound while this call owned it: an owner
/// that is gone left every later event of the agent queued forever. What is queued then goes
/// with the next event (delivering it while unwinding could panic again and abort).
struct LetGoOnUnwind<'a>(&'a AtomicBool);

impl Drop for LetGoOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(false, Ordering::Release);
        }
    }
}

/// Builds event JSON into one reusable buffer per turn, so an event costs no allocation once
/// the buffer is warm. Each event is left with a NUL byte after it ([`JsonText`]), so the C
/// boundary lends it in place.
#[derive(Default)]
pub(crate) struct EventWriter {
    buf: String,
    /// The fixed head `buf` starts with, when a text delta's writer left it there: the next
    /// delta with the same head keeps it instead of writing it again. Empty otherwise.
    kept_head: &'static str,
}

impl EventWriter {
    /// A writer whose buffer starts with room for `bytes`: one allocation instead of a
    /// growth (and a copy) at each larger event while the buffer warms up.
    pub(crate) fn with_capacity(bytes: usize) -> Self {
        EventWriter {
            buf: String::with_capacity(bytes),
            kept_head: "",
        }
    }

    /// `{"type":…,"schema_version":1,"data":<data>}` through serde: how events were written
    /// before they were typed, kept as the reference the byte tests compare the typed events to.
    #[cfg(test)]
    pub(crate) fn event<T: serde::Serialize + ?Sized>(
        &mut self,
        ty: &str,
        data: &T,
    ) -> JsonText<'_> {
        self.event_head(ty);
        self.serialized(|buf| {
            serde_json::to_writer(&mut *buf, data).expect("event data serializes");
        });
        self.end("}")
    }

    /// [`EventWriter::event`] for a typed event's data (see [`EventData`]).
    pub(crate) fn data_event<D: EventData + ?Sized>(&mut self, ty: &str, data: &D) -> JsonText<'_> {
        self.event_head(ty);
        self.serialized(|buf| {
            let mut fields = Fields::open(buf);
            data.write_fields(&mut fields);
            fields.close();
        });
        self.end("}")
    }

    /// `{"type":ty,"schema_version":1,"data":{key:text}}` without building a map.
    #[cfg(test)]
    pub(crate) fn text_event(&mut self, ty: &str, key: &str, text: &str) -> JsonText<'_> {
        self.text_event_head(ty, key);
        push_json_string(&mut self.buf, text);
        self.end("}}")
    }

    /// [`EventWriter::text_event`] with the head written once ([`text_event_head!`]).
    pub(crate) fn text_event_at(&mut self, head: TextEventHead, text: &str) -> JsonText<'_> {
        self.fixed_head(head.0);
        push_json_string(&mut self.buf, text);
        self.end("}}")
    }

    /// `{"type":"text_delta","text":…}`: the stream entry point's delta item.
    pub(crate) fn text_delta(&mut self, text: &str) -> TextDelta<'_> {
        self.fixed_head(TEXT_DELTA_HEAD);
        push_json_string(&mut self.buf, text);
        TextDelta(self.end("}"))
    }

    /// [`EventWriter::text_delta`] for text its caller knows needs no JSON escaping (no `"`,
    /// backslash or control character: a wire string read without escapes), copied between
    /// quotes without being scanned again.
    pub(crate) fn text_delta_verbatim(&mut self, text: &str) -> TextDelta<'_> {
        debug_assert_eq!(
            plain_len(text.as_bytes()),
            text.len(),
            "{text:?} needs escaping"
        );
        self.fixed_head(TEXT_DELTA_HEAD);
        self.buf.reserve(text.len() + 2);
        self.buf.push('"');
        self.buf.push_str(text);
        self.buf.push('"');
        TextDelta(self.end("}"))
    }

    /// [`EventWriter::text_event`] with the head written once ([`text_event_head!`]) and the
    /// text already a JSON string (quoted and escaped), e.g. [`TextDelta::text_json`]: a delta
    /// is escaped once for the event and the item, and its head is one copy.
    pub(crate) fn text_event_json(&mut self, head: TextEventHead, text_json: &str) -> JsonText<'_> {
        self.fixed_head(head.0);
        self.buf.push_str(text_json);
        self.end("}}")
    }

    /// The buffer holding only `head`: cut back to it when the last text delta left it there
    /// (a streamed delta's writers each write the same head every time), else written. Only
    /// this method sets `kept_head` and every other writer clears it before it clears the
    /// buffer, so the buffer still starts with it.
    fn fixed_head(&mut self, head: &'static str) {
        if std::ptr::eq(self.kept_head, head) {
            debug_assert!(self.buf.starts_with(head));
            self.buf.truncate(head.len());
        } else {
            self.buf.clear();
            self.buf.push_str(head);
            self.kept_head = head;
        }
    }

    /// `{"type":ty,"schema_version":1,"data":{key:` in a cleared buffer.
    #[cfg(test)]
    fn text_event_head(&mut self, ty: &str, key: &str) {
        self.event_head(ty);
        self.buf.push_str("{\"");
        self.buf.push_str(key);
        self.buf.push_str("\":");
    }

    /// `{"type":ty,"schema_version":1,"data":` in a cleared buffer.
    fn event_head(&mut self, ty: &str) {
        self.kept_head = "";
        self.buf.clear();
        self.buf.push_str("{\"type\":\"");
        self.buf.push_str(ty);
        self.buf.push_str("\",\"schema_version\":1,\"data\":");
    }

    /// Appends what serde_json writes (bytes) to the text: the buffer is checked for UTF-8
    /// once, as before. The text deltas' methods above write `str`s and need no check.
    fn serialized(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let mut bytes = std::mem::take(&mut self.buf).into_bytes();
        write(&mut bytes);
        // serde_json writes UTF-8 and the fixed parts are ASCII.
        self.buf = String::from_utf8(bytes).expect("JSON text is UTF-8");
    }

    /// Closes the text with `tail` and the NUL that [`JsonText`] promises.
    fn end(&mut self, tail: &str) -> JsonText<'_> {
        self.buf.push_str(tail);
        self.buf.push('\0');
        JsonText::terminated(&self.buf)
    }
}

/// An event's `data` object whose keys are the library's own field names, written by
/// [`EventWriter::data_event`]. [`event_data!`] declares the struct and implements this.
pub(crate) trait EventData {
    fn write_fields(&self, fields: &mut Fields<'_>);
}

/// A JSON object being written into an event buffer, one field at a time. The keys are
/// written as they are: they are our own field names, plain ASCII with nothing to escape, and
/// serde_json's key path (an escaping scan and its map state per key) was most of what an
/// event cost. The values go through serde_json as before.
pub(crate) struct Fields<'b> {
    buf: &'b mut Vec<u8>,
    empty: bool,
}

impl<'b> Fields<'b> {
    fn open(buf: &'b mut Vec<u8>) -> Self {
        buf.push(b'{');
        Fields { buf, empty: true }
    }

    /// `"key":value`; `quoted_key` is the key with its quotes and colon (`"key":`).
    pub(crate) fn field<T: FieldValue + ?Sized>(&mut self, quoted_key: &'static str, value: &T) {
        self.field_with(quoted_key, |buf| value.write_json(buf));
    }

    /// `"key":` and a value that `write` appends as JSON itself.
    pub(crate) fn field_with(
        &mut self,
        quoted_key: &'static str,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        debug_assert!(is_plain_key(quoted_key), "{quoted_key} needs escaping");
        if !std::mem::take(&mut self.empty) {
            self.buf.push(b',');
        }
        self.buf.extend_from_slice(quoted_key.as_bytes());
        write(self.buf);
    }

    fn close(self) {
        self.buf.push(b'}');
    }
}

/// A value of an event's field, written as serde_json writes it: strings, integers and
/// booleans directly (serde_json's serializer per field was most of what a listening host's
/// `llm_call_*` events cost), anything else through serde_json. Every type an event
/// struct holds has an impl (a missing one does not compile).
pub(crate) trait FieldValue {
    fn write_json(&self, out: &mut Vec<u8>);
}

impl FieldValue for &str {
    fn write_json(&self, out: &mut Vec<u8>) {
        push_json_string(out, self);
    }
}

impl FieldValue for String {
    fn write_json(&self, out: &mut Vec<u8>) {
        push_json_string(out, self);
    }
}

impl FieldValue for bool {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
    }
}

impl<T: FieldValue> FieldValue for Option<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Some(v) => v.write_json(out),
            None => out.extend_from_slice(b"null"),
        }
    }
}

/// Integers with `itoa`, as serde_json writes them.
macro_rules! integer_field_value {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            fn write_json(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(itoa::Buffer::new().format(*self).as_bytes());
            }
        }
    )*};
}
integer_field_value!(u32, u64, usize);

/// Through serde_json: floats (its shortest form) and nested JSON.
macro_rules! serialized_field_value {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            fn write_json(&self, out: &mut Vec<u8>) {
                serde_json::to_writer(out, self).expect("event data serializes");
            }
        }
    )*};
}
serialized_field_value!(f64, &serde_json::Map<String, serde_json::Value>, &[usize]);

/// `"key":` with a key that JSON needs no escape for.
fn is_plain_key(quoted_key: &str) -> bool {
    quoted_key
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix("\":"))
        .is_some_and(|k| k.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'))
}

const TEXT_DELTA_HEAD: &str = "{\"type\":\"text_delta\",\"text\":";

/// `{"type":ty,"schema_version":1,"data":{key:`, as [`EventWriter::text_event`] writes it.
#[derive(Clone, Copy)]
pub(crate) struct TextEventHead(&'static str);

impl TextEventHead {
    #[doc(hidden)]
    pub(crate) const fn written(head: &'static str) -> Self {
        TextEventHead(head)
    }
}

/// The [`TextEventHead`] of event type `$ty` with its text under `$key`, built at compile time.
macro_rules! text_event_head {
    ($ty:literal, $key:literal) => {
        $crate::events::TextEventHead::written(concat!(
            "{\"type\":\"",
            $ty,
            "\",\"schema_version\":1,\"data\":{\"",
            $key,
            "\":"
        ))
    };
}
pub(crate) use text_event_head;

/// A rendered `text_delta` item.
#[derive(Clone, Copy)]
pub(crate) struct TextDelta<'a>(JsonText<'a>);

impl<'a> TextDelta<'a> {
    pub(crate) fn json(self) -> JsonText<'a> {
        self.0
    }

    pub(crate) fn as_str(self) -> &'a str {
        self.0.as_str()
    }

    /// The text as the item holds it: a JSON string, quotes included.
    pub(crate) fn text_json(self) -> &'a str {
        let item = self.as_str();
        &item[TEXT_DELTA_HEAD.len()..item.len() - 1]
    }
}

#[cfg(test)]
mod tests {
    /// Text without anything to escape is written by `text_delta_verbatim` as `text_delta`
    /// writes it.
    #[test]
    fn a_verbatim_delta_is_the_delta_written_with_escaping() {
        for text in [
            "",
            "plain",
            "é 😀 \u{7f} / ' < >",
            "long text of many words and more words",
        ] {
            let mut w = super::EventWriter::default();
            let escaped = w.text_delta(text).as_str().to_owned();
            assert_eq!(w.text_delta_verbatim(text).as_str(), escaped);
        }
    }

    use super::*;

    fn written<T: FieldValue>(v: T) -> String {
        let mut out = Vec::new();
        v.write_json(&mut out);
        String::from_utf8(out).unwrap()
    }

    /// Every field value is written as serde_json writes it.
    #[test]
    fn field_values_are_the_bytes_serde_json_writes() {
        let texts = [
            "",
            "plain",
            "quote \" back \\ slash",
            "\n\r\t\u{8}\u{c}",
            "\u{0}\u{1f}\u{7f}",
            "caf\u{e9} \u{2028}\u{2029} \u{1f600}",
            "</script>",
            "a long line of text ".repeat(20).leak(),
        ];
        for t in texts {
            assert_eq!(written(t), serde_json::to_string(t).unwrap(), "{t:?}");
            assert_eq!(written(t.to_owned()), serde_json::to_string(t).unwrap());
            assert_eq!(written(Some(t)), serde_json::to_string(&Some(t)).unwrap());
        }
        assert_eq!(written(None::<&str>), "null");
        assert_eq!(written(None::<String>), "null");
        for n in [0u64, 1, 9, 10, 99, 12_345, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(written(n), serde_json::to_string(&n).unwrap());
            assert_eq!(written(Some(n)), serde_json::to_string(&Some(n)).unwrap());
            assert_eq!(
                written(n as usize),
                serde_json::to_string(&(n as usize)).unwrap()
            );
            assert_eq!(
                written(n as u32),
                serde_json::to_string(&(n as u32)).unwrap()
            );
        }
        assert_eq!(written(None::<u64>), "null");
        for b in [true, false] {
            assert_eq!(written(b), serde_json::to_string(&b).unwrap());
            assert_eq!(written(Some(b)), serde_json::to_string(&Some(b)).unwrap());
        }
        for f in [
            0.0,
            -0.0,
            1.5,
            0.1 + 0.2,
            1e21,
            123.456,
            f64::NAN,
            f64::INFINITY,
        ] {
            assert_eq!(written(f), serde_json::to_string(&f).unwrap());
            assert_eq!(written(Some(f)), serde_json::to_string(&Some(f)).unwrap());
        }
        let map = serde_json::json!({"b": [1, "x"], "a": null});
        let map = map.as_object().unwrap();
        assert_eq!(written(map), serde_json::to_string(map).unwrap());
    }
    use std::sync::Mutex;

    struct Recorder {
        seen: Mutex<Vec<String>>,
        inner: Mutex<Option<Arc<Emitter>>>,
    }

    impl Transport for Recorder {
        fn emit(&self, event: &str) {
            let s = event.to_owned();
            let reenter = s.contains("\"first\"");
            self.seen.lock().unwrap().push(s);
            if reenter {
                // Re-entrant emit from inside the callback: queued, delivered after we return.
                let e = self.inner.lock().unwrap().clone().unwrap();
                let mut w = EventWriter::default();
                e.emit(w.text_event("log", "m", "nested"));
                assert_eq!(self.seen.lock().unwrap().len(), 1);
            }
        }
    }

    #[test]
    fn reentrant_emit_is_queued_not_deadlocked() {
        let rec = Arc::new(Recorder {
            seen: Mutex::new(Vec::new()),
            inner: Mutex::new(None),
        });
        let e = Arc::new(Emitter::new(rec.clone()));
        *rec.inner.lock().unwrap() = Some(e.clone());
        let mut w = EventWriter::default();
        e.emit(w.text_event("log", "m", "first"));
        e.emit(w.text_event("log", "m", "second"));
        let seen = rec.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 3);
        assert!(seen[1].contains("nested") && seen[2].contains("second"));
        *rec.inner.lock().unwrap() = None;
    }

    /// Panics on its first event, then records.
    struct PanicsOnce {
        panicked: std::sync::atomic::AtomicBool,
        seen: Mutex<Vec<String>>,
    }

    impl Transport for PanicsOnce {
        fn emit(&self, event: &str) {
            if !self.panicked.swap(true, Ordering::SeqCst) {
                panic!("the host's emit broke");
            }
            self.seen.lock().unwrap().push(event.to_owned());
        }
    }

    /// A transport whose `emit` panicked once still gets the agent's later events: the
    /// emitter is not left owned by the call that unwound (every later event was queued
    /// forever, and the queue grew without bound).
    #[test]
    fn a_panicking_emit_does_not_stop_later_events() {
        let t = Arc::new(PanicsOnce {
            panicked: std::sync::atomic::AtomicBool::new(false),
            seen: Mutex::new(Vec::new()),
        });
        let e = Emitter::new(t.clone());
        let mut w = EventWriter::default();
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            e.emit(w.text_event("log", "m", "first"))
        }));
        assert!(first.is_err(), "the panic reaches the emitting code");
        e.emit(w.text_event("log", "m", "second"));
        let seen = t.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(seen[0].contains("second"));
        assert_eq!(e.queued.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn writer_escapes() {
        let mut w = EventWriter::default();
        let s = w
            .text_event("llm_text", "chunk", "a\"b\0c")
            .as_str()
            .to_owned();
        assert_eq!(
            s,
            r#"{"type":"llm_text","schema_version":1,"data":{"chunk":"a\"b\u0000c"}}"#
        );
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["data"]["chunk"], "a\"b\u{0}c");
    }

    /// The event built from the item's escaped text is the event built from the text.
    #[test]
    fn one_escaping_for_the_event_and_the_item() {
        let (mut items, mut events) = (EventWriter::default(), EventWriter::default());
        for text in ["a", "a\"b\0c\\", "line\n\t\u{1f}", "é 😀 \u{2028}", ""] {
            let item = items.text_delta(text);
            let direct = item.as_str().to_owned();
            let v: serde_json::Value = serde_json::from_str(&direct).unwrap();
            assert_eq!(v, serde_json::json!({"type": "text_delta", "text": text}));
            let spliced = events
                .text_event_json(text_event_head!("llm_text", "chunk"), item.text_json())
                .as_str()
                .to_owned();
            assert_eq!(
                spliced,
                events.text_event("llm_text", "chunk", text).as_str()
            );
        }
    }

    /// Texts with every control character, quotes, backslashes and non-ASCII text.
    fn awkward_texts() -> Vec<String> {
        let controls: String = (0u8..0x20).map(char::from).collect();
        vec![
            String::new(),
            "abcd".into(),
            controls.clone(),
            format!("a{controls}b\"c\\d/e\u{7f}"),
            "é 😀 \u{2028} 中文 \0".into(),
        ]
    }

    /// The text events and the item, written with [`push_json_string`], are the bytes serde_json
    /// wrote for them before (a `{key: text}` map through [`EventWriter::event`]).
    #[test]
    fn text_events_are_the_serde_rendering() {
        let (mut w, mut reference) = (EventWriter::default(), EventWriter::default());
        for text in awkward_texts() {
            let old = reference
                .event("thinking", &serde_json::json!({ "text": text }))
                .as_str()
                .to_owned();
            assert_eq!(w.text_event("thinking", "text", &text).as_str(), old);
            let item = w.text_delta(&text).as_str().to_owned();
            let mut old_item = TEXT_DELTA_HEAD.as_bytes().to_vec();
            serde_json::to_writer(&mut old_item, &text).unwrap();
            old_item.push(b'}');
            assert_eq!(item.as_bytes(), old_item);
        }
    }

    /// A writer that keeps a text delta's head between deltas writes what a fresh writer
    /// writes, whatever came in between: runs of deltas of either kind, each kind after the
    /// other, after other events, after a different text head, after a longer event.
    #[test]
    fn a_kept_head_writes_what_a_fresh_writer_writes() {
        const OTHER: TextEventHead = text_event_head!("thinking", "text");
        let texts = awkward_texts();
        let mut w = EventWriter::default();
        for (i, text) in texts.iter().enumerate() {
            let fresh = |f: &dyn Fn(&mut EventWriter) -> String| f(&mut EventWriter::default());
            for step in 0..7 {
                let json = {
                    let mut f = EventWriter::default();
                    f.text_delta(text).text_json().to_owned()
                };
                let (ours, theirs) = match (i + step) % 7 {
                    0 | 1 => (
                        w.text_delta(text).as_str().to_owned(),
                        fresh(&|f| f.text_delta(text).as_str().to_owned()),
                    ),
                    2 | 3 => (
                        w.text_event_json(text_event_head!("llm_text", "chunk"), &json)
                            .as_str()
                            .to_owned(),
                        fresh(&|f| {
                            f.text_event_json(text_event_head!("llm_text", "chunk"), &json)
                                .as_str()
                                .to_owned()
                        }),
                    ),
                    4 => (
                        w.text_event_json(OTHER, &json).as_str().to_owned(),
                        fresh(&|f| f.text_event_json(OTHER, &json).as_str().to_owned()),
                    ),
                    5 => (
                        w.text_event("thinking", "text", text).as_str().to_owned(),
                        fresh(&|f| f.text_event("thinking", "text", text).as_str().to_owned()),
                    ),
                    _ => (
                        w.event("e", &serde_json::json!({ "t": text }))
                            .as_str()
                            .to_owned(),
                        fresh(&|f| {
                            f.event("e", &serde_json::json!({ "t": text }))
                                .as_str()
                                .to_owned()
                        }),
                    ),
                };
                assert_eq!(ours, theirs, "{text:?} step {step}");
            }
        }
    }

    /// Every writer method leaves its text followed by one NUL and no NUL inside, so C reads
    /// the whole event from the pointer it is lent.
    #[test]
    fn the_writer_never_writes_a_nul_inside() {
        let mut w = EventWriter::default();
        let check = |j: JsonText<'_>| {
            let bytes = j.with_nul();
            assert_eq!(bytes.last(), Some(&0), "{j:?}");
            assert!(!j.as_str().contains('\0'), "{j:?}");
            assert_eq!(bytes.len(), j.as_str().len() + 1);
            serde_json::from_str::<serde_json::Value>(j.as_str()).expect("JSON");
        };
        for text in awkward_texts() {
            check(w.event(
                "e",
                &serde_json::json!({ text.clone(): [text.clone(), 1.5, null] }),
            ));
            check(w.text_event("e", "k", &text));
            let item = w.text_delta(&text);
            check(item.json());
            let json = item.text_json().to_owned();
            check(w.text_event_json(text_event_head!("e", "k"), &json));
            crate::events::event_data! {
                pub(crate) struct Probe<'a> {
                    pub(crate) text: &'a str,
                }
            }
            check(w.data_event("e", &Probe { text: &text }));
        }
    }
}
