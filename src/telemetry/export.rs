//! The export pipeline: finished spans offered to a bounded queue without waiting, and one
//! task on the library's runtime that posts them in batches (and the metrics at each interval)
//! over OTLP/HTTP.
//!
//! A turn never waits on the collector: a span that does not fit in the queue is dropped and
//! counted, and a batch the collector refused or did not answer within the timeout is dropped
//! and counted too (retrying would only hold newer spans back behind a collector that is down).
//! Agents with the same settings share one pipeline; the last one freed closes the queue, and
//! the task posts what is left and ends. The host's free of that last agent waits for it
//! ([`ExportClosing`]), up to the exporter's timeout: a host that exits right after the free
//! would otherwise lose the spans not yet posted, every span of a short program.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

use super::config::TelemetryConfig;
use super::metrics::{Instrument, Metrics};
use super::span::SpanRecord;

/// At most this many spans per request.
const MAX_BATCH: usize = 512;

/// How the exporter is doing, counted since the pipeline started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetryStats {
    /// Spans the collector accepted.
    pub exported_spans: u64,
    /// Spans dropped: the queue was full, or their batch failed.
    pub dropped_spans: u64,
    /// Export requests (spans or metrics) that failed.
    pub failed_exports: u64,
    /// The last failure's message, if any.
    pub last_error: Option<String>,
}

#[derive(Default)]
struct Counters {
    exported: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// Set once the exporting task has posted what was left after its queue closed (or was
/// dropped without: the runtime went away).
#[derive(Default)]
struct Finished {
    done: Mutex<bool>,
    changed: Condvar,
}

impl Finished {
    fn set(&self) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.changed.notify_all();
    }

    /// Until the task has finished, at most `timeout`.
    fn wait(&self, timeout: Duration) {
        let done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self
            .changed
            .wait_timeout_while(done, timeout, |done| !*done)
            .unwrap_or_else(|e| e.into_inner());
    }
}

/// Marks the task finished however it ends (posted, or dropped with the runtime).
struct FinishedOnDrop(Arc<Finished>);

impl Drop for FinishedOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// One exporter: its settings, its queue, its metrics.
pub struct Pipeline {
    pub(crate) config: TelemetryConfig,
    tx: mpsc::Sender<SpanRecord>,
    pub(crate) metrics: Arc<Metrics>,
    counters: Arc<Counters>,
    finished: Arc<Finished>,
}

/// What an agent being freed keeps of its pipeline: enough to wait for the task's last posts
/// when it was the pipeline's last user, without keeping the queue open itself.
pub struct ExportClosing {
    pipeline: Weak<Pipeline>,
    finished: Arc<Finished>,
    timeout: Duration,
}

impl ExportClosing {
    /// Once every agent (and sub-agent run) of the pipeline is gone, waits up to the
    /// exporter's timeout for the spans left in the queue to be posted (others still using
    /// the pipeline: nothing to wait for). Not where blocking is refused (`may_block` false:
    /// a callback or a runtime thread, which the task waited for might need).
    pub fn wait_if_last(self, may_block: bool) {
        if may_block && self.pipeline.strong_count() == 0 {
            self.finished.wait(self.timeout);
        }
    }
}

fn pipelines() -> &'static Mutex<Vec<Weak<Pipeline>>> {
    static PIPELINES: OnceLock<Mutex<Vec<Weak<Pipeline>>>> = OnceLock::new();
    PIPELINES.get_or_init(|| Mutex::new(Vec::new()))
}

impl Pipeline {
    /// The pipeline for `config`: a running one with the same settings, or a new one whose
    /// task runs on `runtime`.
    pub(crate) fn for_config(
        config: &TelemetryConfig,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Arc<Pipeline>, String> {
        let mut all = pipelines().lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|p| p.strong_count() > 0);
        if let Some(p) = all
            .iter()
            .filter_map(Weak::upgrade)
            .find(|p| p.config == *config)
        {
            return Ok(p);
        }
        let p = Self::start(config.clone(), runtime)?;
        all.push(Arc::downgrade(&p));
        Ok(p)
    }

    fn start(
        config: TelemetryConfig,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Arc<Pipeline>, String> {
        let mut headers = reqwest::header::HeaderMap::new();
        for (k, v) in &config.headers {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| format!("telemetry header '{k}': {e}"))?;
            let value = reqwest::header::HeaderValue::from_str(v)
                .map_err(|e| format!("telemetry header '{k}': {e}"))?;
            headers.insert(name, value);
        }
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static("application/x-protobuf"),
        );
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .build()
            .map_err(|e| format!("telemetry exporter: {e}"))?;
        let (tx, rx) = mpsc::channel(config.queue_capacity);
        let metrics = Arc::new(Metrics::default());
        let counters = Arc::new(Counters::default());
        let finished = Arc::new(Finished::default());
        let exporter = Exporter {
            _finished: FinishedOnDrop(finished.clone()),
            metrics_refused: false,
            config: config.clone(),
            client,
            metrics: metrics.clone(),
            counters: counters.clone(),
        };
        runtime.spawn(exporter.run(rx));
        Ok(Arc::new(Pipeline {
            config,
            tx,
            metrics,
            counters,
            finished,
        }))
    }

    /// For the free of an agent (see [`ExportClosing`]).
    pub(crate) fn closing(self: &Arc<Self>) -> ExportClosing {
        ExportClosing {
            pipeline: Arc::downgrade(self),
            finished: self.finished.clone(),
            timeout: self.config.timeout,
        }
    }

    /// Queues a finished span; never waits. A full queue drops it and counts the drop.
    pub(crate) fn offer(&self, span: SpanRecord) {
        if self.tx.try_send(span).is_err() {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            self.metrics.record(Instrument::SpansDropped, 1.0, vec![]);
        }
    }

    pub(crate) fn stats(&self) -> TelemetryStats {
        TelemetryStats {
            exported_spans: self.counters.exported.load(Ordering::Relaxed),
            dropped_spans: self.counters.dropped.load(Ordering::Relaxed),
            failed_exports: self.counters.failed.load(Ordering::Relaxed),
            last_error: self
                .counters
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

/// The task's side: drains the queue and posts.
struct Exporter {
    /// Dropped (and so set) when the task ends, after its last posts.
    _finished: FinishedOnDrop,
    /// The metrics URL answered 404 (a backend that takes traces only, such as Jaeger): the
    /// metrics are not posted again.
    metrics_refused: bool,
    config: TelemetryConfig,
    client: reqwest::Client,
    metrics: Arc<Metrics>,
    counters: Arc<Counters>,
}

impl Exporter {
    async fn run(mut self, mut rx: mpsc::Receiver<SpanRecord>) {
        let mut tick = tokio::time::interval(self.config.export_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut batch: Vec<SpanRecord> = Vec::new();
        loop {
            tokio::select! {
                span = rx.recv() => match span {
                    Some(s) => {
                        batch.push(s);
                        if batch.len() >= MAX_BATCH {
                            self.post_spans(&mut batch).await;
                        }
                    }
                    None => break,
                },
                _ = tick.tick() => {
                    self.post_spans(&mut batch).await;
                    self.post_metrics().await;
                }
            }
        }
        // Every agent of this pipeline is gone: what is left goes out once.
        self.post_spans(&mut batch).await;
        self.post_metrics().await;
    }

    fn failed(&self, message: String) {
        self.counters.failed.fetch_add(1, Ordering::Relaxed);
        *self
            .counters
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(message);
    }

    async fn post(&self, url: &str, body: Vec<u8>) -> Result<(), PostError> {
        let response = self
            .client
            .post(url)
            .body(body)
            .send()
            .await
            .map_err(|e| PostError::Failed(format!("POST {url}: {e}")))?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else if status == reqwest::StatusCode::NOT_FOUND {
            Err(PostError::NotFound(format!("POST {url}: HTTP {status}")))
        } else {
            Err(PostError::Failed(format!("POST {url}: HTTP {status}")))
        }
    }

    async fn post_spans(&self, batch: &mut Vec<SpanRecord>) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let body = super::otlp::traces_body(&self.config, batch);
        batch.clear();
        match self.post(&self.config.traces_url, body).await {
            Ok(()) => {
                self.counters.exported.fetch_add(n, Ordering::Relaxed);
            }
            Err(PostError::Failed(e) | PostError::NotFound(e)) => {
                self.counters.dropped.fetch_add(n, Ordering::Relaxed);
                self.metrics
                    .record(Instrument::SpansDropped, n as f64, vec![]);
                self.failed(e);
            }
        }
    }

    async fn post_metrics(&mut self) {
        let Some(url) = &self.config.metrics_url else {
            return;
        };
        if self.metrics_refused {
            return;
        }
        let series = self.metrics.snapshot();
        if series.is_empty() {
            return;
        }
        let body = super::otlp::metrics_body(&self.config, self.metrics.start, &series);
        match self.post(url, body).await {
            Ok(()) => {}
            Err(PostError::NotFound(e)) => {
                self.metrics_refused = true;
                self.failed(format!(
                    "{e}: the collector takes no metrics; they are no longer sent"
                ));
            }
            Err(PostError::Failed(e)) => self.failed(e),
        }
    }
}

/// Why a post failed.
enum PostError {
    /// HTTP 404: nothing takes this signal there.
    NotFound(String),
    /// Anything else: the collector is down, slow or refused the body.
    Failed(String),
}
