//! The audit sink: host events copied into a database from a bounded queue, off the turn.
//!
//! An agent's host-event observer runs inline in its turn, so the sink's observer only offers
//! the event to a bounded queue and returns: a full queue (the database is slow or gone) drops
//! the event and counts it, and never makes a turn wait. One writer task on the library's
//! runtime drains the queue in batches. A batch the database could not take is retried with
//! backoff (the queue fills meanwhile, and what no longer fits is dropped and counted); a batch
//! the database refuses as bad data is dropped and counted at once, since retrying cannot help.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

#[cfg(feature = "postgres")]
pub mod postgres;

/// The queue's length when the host gives none.
pub const DEFAULT_CAPACITY: usize = 4096;
/// At most this many events per write.
pub const MAX_BATCH: usize = 512;
/// The longest wait between two tries of a batch the database did not take.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Tries of one batch once no handle of the sink is left.
const ABANDON_AFTER: u32 = 5;

/// One host event on its way to the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub tenant_id: Arc<str>,
    /// When the sink received it, microseconds since the Unix epoch.
    pub ts_micros: i64,
    /// The host event's JSON, as the observer got it.
    pub payload: String,
}

/// Why a batch was not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// The database is away or slow: the same batch is tried again.
    Retry(String),
    /// The database refused the batch's data: trying again cannot help, so it is dropped.
    Reject(String),
}

/// Where batches go (PostgreSQL; tests plug their own).
pub trait BatchWriter: Send + 'static {
    fn write<'a>(
        &'a mut self,
        batch: &'a [AuditRecord],
    ) -> Pin<Box<dyn Future<Output = Result<(), WriteError>> + Send + 'a>>;
}

/// How the writer is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkState {
    /// The last write succeeded (or none was needed yet).
    Healthy = 0,
    /// The last write failed; the batch is being retried and new events queue or drop.
    Retrying = 1,
    /// The writer has ended: every agent and the host let go of the sink.
    Closed = 2,
}

/// A snapshot of the sink's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkStatus {
    pub state: SinkState,
    /// Events accepted into the queue.
    pub accepted: u64,
    /// Events written to the database.
    pub written: u64,
    /// Events lost: the queue was full, or the database refused their batch.
    pub dropped: u64,
    /// Writes that failed and were retried.
    pub failed_writes: u64,
    /// The last write error, if any write failed.
    pub last_error: Option<String>,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    written: AtomicU64,
    dropped: AtomicU64,
    /// Of `accepted`, those dropped by the writer (refused batches): `accepted` is settled
    /// when `written + rejected` reaches it.
    rejected: AtomicU64,
    failed_writes: AtomicU64,
    state: AtomicU8,
    last_error: Mutex<Option<String>>,
}

/// The sink: cloneable handles share one queue and one writer.
#[derive(Clone)]
pub struct AuditSink {
    tx: mpsc::Sender<AuditRecord>,
    counters: Arc<Counters>,
}

/// The writer did not catch up in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushTimeout;

impl AuditSink {
    /// Starts the writer on `runtime`; `capacity` 0 means [`DEFAULT_CAPACITY`].
    pub fn start(
        writer: impl BatchWriter,
        capacity: usize,
        runtime: &tokio::runtime::Handle,
    ) -> AuditSink {
        let capacity = if capacity == 0 {
            DEFAULT_CAPACITY
        } else {
            capacity
        };
        let (tx, rx) = mpsc::channel(capacity);
        let counters = Arc::new(Counters::default());
        runtime.spawn(run_writer(writer, rx, counters.clone()));
        AuditSink { tx, counters }
    }

    /// Queues one host event of `tenant_id`; never waits. False when it was dropped.
    pub fn offer(&self, tenant_id: &Arc<str>, event_json: &str) -> bool {
        let record = AuditRecord {
            tenant_id: tenant_id.clone(),
            ts_micros: chrono::Utc::now().timestamp_micros(),
            payload: event_json.to_owned(),
        };
        match self.tx.try_send(record) {
            Ok(()) => {
                self.counters.accepted.fetch_add(1, Ordering::AcqRel);
                true
            }
            Err(_) => {
                self.counters.dropped.fetch_add(1, Ordering::AcqRel);
                false
            }
        }
    }

    /// The host-event observer that offers every event of an agent as `tenant_id`'s.
    pub fn observer(&self, tenant_id: &str) -> crate::events::host::Observer {
        let sink = self.clone();
        let tenant: Arc<str> = Arc::from(tenant_id);
        Arc::new(move |json: &str| {
            sink.offer(&tenant, json);
        })
    }

    pub fn status(&self) -> SinkStatus {
        let c = &self.counters;
        let state = match c.state.load(Ordering::Acquire) {
            1 => SinkState::Retrying,
            2 => SinkState::Closed,
            _ => SinkState::Healthy,
        };
        SinkStatus {
            state,
            accepted: c.accepted.load(Ordering::Acquire),
            written: c.written.load(Ordering::Acquire),
            dropped: c.dropped.load(Ordering::Acquire),
            failed_writes: c.failed_writes.load(Ordering::Acquire),
            last_error: c
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// Blocks the calling thread until every event accepted before the call is written or
    /// dropped, or `timeout` passes. A host calls it after a turn whose events must be in the
    /// table before it goes on (and before it exits).
    pub fn flush_blocking(&self, timeout: Duration) -> Result<(), FlushTimeout> {
        let c = &self.counters;
        let target = c.accepted.load(Ordering::Acquire);
        let deadline = Instant::now() + timeout;
        // Polling: a flush is rare and short, and a condition variable would put a lock on
        // the writer's every batch.
        loop {
            let settled = c.written.load(Ordering::Acquire) + c.rejected.load(Ordering::Acquire);
            if settled >= target {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(FlushTimeout);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn drop_batch(c: &Counters, n: usize, error: String) {
    let n = n as u64;
    c.dropped.fetch_add(n, Ordering::AcqRel);
    c.rejected.fetch_add(n, Ordering::AcqRel);
    *c.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
}

fn set_state(c: &Counters, state: SinkState) {
    c.state.store(state as u8, Ordering::Release);
}

async fn run_writer(
    mut writer: impl BatchWriter,
    mut rx: mpsc::Receiver<AuditRecord>,
    c: Arc<Counters>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let mut backoff = Duration::from_millis(50);
        let mut tries = 0u32;
        loop {
            tries += 1;
            match writer.write(&batch).await {
                Ok(()) => {
                    c.written.fetch_add(batch.len() as u64, Ordering::AcqRel);
                    set_state(&c, SinkState::Healthy);
                    break;
                }
                // Nobody can send or flush any more: a database that stays away gets a few more
                // tries, not a task that outlives every user of the sink.
                Err(WriteError::Retry(m)) if rx.is_closed() && tries >= ABANDON_AFTER => {
                    drop_batch(&c, batch.len(), m);
                    break;
                }
                Err(WriteError::Reject(m)) => {
                    drop_batch(&c, batch.len(), m);
                    break;
                }
                Err(WriteError::Retry(m)) => {
                    c.failed_writes.fetch_add(1, Ordering::AcqRel);
                    *c.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(m);
                    set_state(&c, SinkState::Retrying);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        batch.clear();
    }
    set_state(&c, SinkState::Closed);
}

#[cfg(test)]
mod tests;
