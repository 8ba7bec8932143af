//! The audit sink's PostgreSQL writer against a real server (`scripts/postgres.sh`; skipped,
//! saying why, where PostgreSQL cannot run).
#![cfg(feature = "postgres")]

mod pg_support;

use std::sync::Arc;
use std::time::Duration;

use agentao::audit::postgres::PostgresAuditWriter;
use agentao::audit::{AuditSink, SinkState};

#[test]
fn events_land_as_rows_with_jsonb_payloads_and_bad_data_is_counted_as_dropped() {
    let Some(url) = pg_support::server("pg") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sink = AuditSink::start(PostgresAuditWriter::new(&url).unwrap(), 0, rt.handle());
    let tenant: Arc<str> = Arc::from(format!("tenant-{}", uuid::Uuid::new_v4()));
    let session = uuid::Uuid::new_v4().to_string();
    for (i, ty) in ["tool_lifecycle", "permission_decision", "tool_lifecycle"]
        .iter()
        .enumerate()
    {
        let event = format!(
            r#"{{"event_type":"{ty}","session_id":"{session}","tool_call_id":"call_{i}","tool_name":"read_file"}}"#
        );
        assert!(sink.offer(&tenant, &event));
    }
    sink.flush_blocking(Duration::from_secs(20)).unwrap();
    let st = sink.status();
    assert_eq!(
        (st.state, st.written, st.dropped),
        (SinkState::Healthy, 3, 0)
    );

    let rows = rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        client
            .query(
                "SELECT session_id, event_type, payload->>'tool_call_id', \
                 ts > now() - interval '1 minute' FROM agent_audit WHERE tenant_id = $1 ORDER BY id",
                &[&&*tenant],
            )
            .await
            .unwrap()
    });
    let rows: Vec<(String, String, String, bool)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        rows,
        [
            (
                session.clone(),
                "tool_lifecycle".into(),
                "call_0".into(),
                true
            ),
            (
                session.clone(),
                "permission_decision".into(),
                "call_1".into(),
                true
            ),
            (
                session.clone(),
                "tool_lifecycle".into(),
                "call_2".into(),
                true
            ),
        ]
    );

    // Not JSON: PostgreSQL refuses the batch; it is dropped and counted, and the sink goes on.
    assert!(sink.offer(&tenant, "{not json"));
    sink.flush_blocking(Duration::from_secs(20)).unwrap();
    let st = sink.status();
    assert_eq!((st.written, st.dropped), (3, 1));
    assert!(st.last_error.unwrap().contains("refused"));
    assert!(sink.offer(&tenant, r#"{"event_type":"x","session_id":"s"}"#));
    sink.flush_blocking(Duration::from_secs(20)).unwrap();
    assert_eq!(sink.status().written, 4);
}

#[test]
fn a_database_that_is_down_is_retried_and_reported_and_turns_never_wait() {
    // Nothing listens there: every write fails and is retried.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let writer =
        PostgresAuditWriter::new("postgres://agentao@127.0.0.1:9/agentao?connect_timeout=1")
            .unwrap();
    let sink = AuditSink::start(writer, 16, rt.handle());
    let tenant: Arc<str> = Arc::from("t");
    // One event first, and the writer seen failing with it: from then on it retries that batch
    // and takes nothing from the queue, so what the queue holds is all that can be accepted.
    // (Offered all at once, how many the writer's first batch swallows depends on how the two
    // threads interleave: a loaded machine once let it take 74.)
    assert!(sink.offer(&tenant, "{}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sink.status().failed_writes == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no failed write reported"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = std::time::Instant::now();
    let accepted = (0..200).filter(|_| sink.offer(&tenant, "{}")).count();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "offers waited: {:?}",
        t.elapsed()
    );
    assert!(accepted <= 16, "{accepted}");
    assert!(sink.flush_blocking(Duration::from_millis(300)).is_err());
    let st = sink.status();
    assert_eq!(st.state, SinkState::Retrying);
    assert_eq!(st.dropped, 200 - accepted as u64);
    assert_eq!(st.written, 0);
    assert!(st.last_error.is_some());
}
