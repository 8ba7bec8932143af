use super::*;

/// A writer the test steers: it fails while `fail` holds, blocks while `gate` is closed.
#[derive(Clone)]
struct FakeWriter {
    written: Arc<Mutex<Vec<AuditRecord>>>,
    batches: Arc<AtomicU64>,
    fail: Arc<Mutex<Option<WriteError>>>,
    gate: Arc<tokio::sync::Semaphore>,
}

impl Default for FakeWriter {
    fn default() -> Self {
        FakeWriter {
            written: Arc::default(),
            batches: Arc::default(),
            fail: Arc::default(),
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
        }
    }
}

impl BatchWriter for FakeWriter {
    fn write<'a>(
        &'a mut self,
        batch: &'a [AuditRecord],
    ) -> Pin<Box<dyn Future<Output = Result<(), WriteError>> + Send + 'a>> {
        Box::pin(async move {
            let _permit = self.gate.acquire().await.expect("gate open");
            if let Some(e) = self.fail.lock().unwrap().clone() {
                return Err(e);
            }
            self.batches.fetch_add(1, Ordering::AcqRel);
            self.written.lock().unwrap().extend_from_slice(batch);
            Ok(())
        })
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn events_reach_the_writer_in_order_and_flush_waits_for_them() {
    let rt = runtime();
    let w = FakeWriter::default();
    w.gate.add_permits(1000);
    let sink = AuditSink::start(w.clone(), 0, rt.handle());
    let tenant: Arc<str> = Arc::from("acme");
    for i in 0..300 {
        assert!(sink.offer(&tenant, &format!("{{\"n\":{i}}}")));
    }
    sink.flush_blocking(Duration::from_secs(5)).unwrap();
    let written = w.written.lock().unwrap().clone();
    let order: Vec<String> = written.iter().map(|r| r.payload.clone()).collect();
    let expected: Vec<String> = (0..300).map(|i| format!("{{\"n\":{i}}}")).collect();
    assert_eq!(order, expected);
    assert!(written
        .iter()
        .all(|r| &*r.tenant_id == "acme" && r.ts_micros > 0));
    let st = sink.status();
    assert_eq!(
        (st.state, st.accepted, st.written, st.dropped),
        (SinkState::Healthy, 300, 300, 0)
    );
}

#[test]
fn a_stuck_database_drops_and_counts_but_never_blocks_the_offer() {
    let rt = runtime();
    let w = FakeWriter::default(); // the gate stays shut: every write hangs
    let sink = AuditSink::start(w.clone(), 8, rt.handle());
    let tenant: Arc<str> = Arc::from("t");
    let started = Instant::now();
    let accepted = (0..1000)
        .filter(|i| sink.offer(&tenant, &format!("{i}")))
        .count();
    assert!(started.elapsed() < Duration::from_secs(1), "offers waited");
    // The queue (8) and the one batch the writer holds at most. The batch takes what it finds
    // queued while it fills, which under load can be offers made meanwhile (39 of them once):
    // up to MAX_BATCH, still far from the thousand.
    assert!((8..=8 + MAX_BATCH).contains(&accepted), "{accepted}");
    let st = sink.status();
    assert_eq!(st.dropped, 1000 - accepted as u64);
    assert_eq!(
        sink.flush_blocking(Duration::from_millis(50)),
        Err(FlushTimeout)
    );
    // Released, everything accepted is written; what was dropped stays dropped.
    w.gate.add_permits(1000);
    sink.flush_blocking(Duration::from_secs(5)).unwrap();
    assert_eq!(w.written.lock().unwrap().len(), accepted);
}

#[test]
fn a_failing_write_is_retried_and_reported_then_recovers() {
    let rt = runtime();
    let w = FakeWriter::default();
    w.gate.add_permits(1000);
    *w.fail.lock().unwrap() = Some(WriteError::Retry("connection refused".into()));
    let sink = AuditSink::start(w.clone(), 0, rt.handle());
    let tenant: Arc<str> = Arc::from("t");
    sink.offer(&tenant, "{}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while sink.status().failed_writes < 2 {
        assert!(Instant::now() < deadline, "no retry");
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = sink.status();
    assert_eq!(st.state, SinkState::Retrying);
    assert_eq!(st.last_error.as_deref(), Some("connection refused"));
    *w.fail.lock().unwrap() = None;
    sink.flush_blocking(Duration::from_secs(5)).unwrap();
    let st = sink.status();
    assert_eq!(
        (st.state, st.written, st.dropped),
        (SinkState::Healthy, 1, 0)
    );
}

#[test]
fn a_refused_batch_is_dropped_and_counted_not_retried() {
    let rt = runtime();
    let w = FakeWriter::default();
    w.gate.add_permits(1000);
    *w.fail.lock().unwrap() = Some(WriteError::Reject("invalid json".into()));
    let sink = AuditSink::start(w.clone(), 0, rt.handle());
    let tenant: Arc<str> = Arc::from("t");
    sink.offer(&tenant, "{");
    sink.flush_blocking(Duration::from_secs(5)).unwrap();
    let st = sink.status();
    assert_eq!((st.written, st.dropped, st.failed_writes), (0, 1, 0));
    assert_eq!(st.last_error.as_deref(), Some("invalid json"));
}

#[test]
fn the_writer_ends_when_every_handle_is_gone() {
    let rt = runtime();
    let w = FakeWriter::default();
    w.gate.add_permits(1000);
    let sink = AuditSink::start(w.clone(), 0, rt.handle());
    let watcher = AuditSink {
        tx: mpsc::channel(1).0,
        counters: sink.counters.clone(),
    };
    let observer = sink.observer("t");
    observer("{\"a\":1}");
    drop(observer);
    drop(sink);
    let deadline = Instant::now() + Duration::from_secs(5);
    while watcher.status().state != SinkState::Closed {
        assert!(Instant::now() < deadline, "the writer did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(w.written.lock().unwrap().len(), 1);
}
