//! The audit sink's PostgreSQL writer: `agent_audit(tenant_id, session_id, ts, event_type,
//! payload jsonb)`, one multi-row `INSERT ... SELECT FROM unnest(...)` per batch (one round trip
//! and one transaction, whatever the batch's size).

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;
use tokio_postgres::{Client, NoTls, Statement};

use super::{AuditRecord, BatchWriter, WriteError};

/// One write (connecting included) may take this long before it is retried.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The payload is `jsonb`: audit rows are queried by their fields (`payload->>'tool_name'`),
/// unlike session documents, which are only ever read whole.
const SCHEMA: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(7161012393456275713);
CREATE TABLE IF NOT EXISTS agent_audit (
    id         bigserial PRIMARY KEY,
    tenant_id  text NOT NULL,
    session_id text NOT NULL,
    ts         timestamptz NOT NULL,
    event_type text NOT NULL,
    payload    jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_audit_by_session ON agent_audit (tenant_id, session_id, ts);
COMMIT;
";

const INSERT: &str = "
INSERT INTO agent_audit (tenant_id, session_id, ts, event_type, payload)
SELECT t, s, timestamptz 'epoch' + u * interval '1 microsecond', e, p::jsonb
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[]) AS x(t, s, u, e, p)";

/// The fields of a host event the table keeps in columns.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    event_type: String,
    #[serde(default)]
    session_id: Option<String>,
}

pub struct PostgresAuditWriter {
    config: tokio_postgres::Config,
    conn: Option<(Client, Statement)>,
}

impl PostgresAuditWriter {
    /// Reads the URL; connects on the first batch (and again after a lost connection).
    pub fn new(url: &str) -> Result<Self, String> {
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|e| format!("bad PostgreSQL URL: {e}"))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(WRITE_TIMEOUT);
        }
        config.application_name("agentao-audit");
        Ok(Self { config, conn: None })
    }

    async fn connection(&mut self) -> Result<&(Client, Statement), WriteError> {
        if self.conn.as_ref().is_some_and(|(c, _)| c.is_closed()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let (client, connection) = self.config.connect(NoTls).await.map_err(retry)?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            client.batch_execute(SCHEMA).await.map_err(retry)?;
            let insert = client.prepare(INSERT).await.map_err(retry)?;
            self.conn = Some((client, insert));
        }
        Ok(self.conn.as_ref().expect("connected above"))
    }

    async fn write_batch(&mut self, batch: &[AuditRecord]) -> Result<(), WriteError> {
        let n = batch.len();
        let (mut tenants, mut sessions, mut ts, mut types, mut payloads) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for r in batch {
            // Our own events always parse; a foreign one still gets its row, with empty columns,
            // and PostgreSQL decides whether its payload is JSON.
            let head = serde_json::from_str::<Head>(&r.payload).unwrap_or(Head {
                event_type: String::new(),
                session_id: None,
            });
            tenants.push(&*r.tenant_id);
            sessions.push(head.session_id.unwrap_or_default());
            ts.push(r.ts_micros);
            types.push(head.event_type);
            payloads.push(r.payload.as_str());
        }
        let (client, insert) = self.connection().await?;
        client
            .execute(insert, &[&tenants, &sessions, &ts, &types, &payloads])
            .await
            .map_err(classify)?;
        Ok(())
    }
}

impl BatchWriter for PostgresAuditWriter {
    fn write<'a>(
        &'a mut self,
        batch: &'a [AuditRecord],
    ) -> Pin<Box<dyn Future<Output = Result<(), WriteError>> + Send + 'a>> {
        Box::pin(async move {
            let result = match tokio::time::timeout(WRITE_TIMEOUT, self.write_batch(batch)).await {
                Ok(r) => r,
                Err(_) => Err(WriteError::Retry("PostgreSQL: the write timed out".into())),
            };
            if matches!(result, Err(WriteError::Retry(_))) {
                // A fresh connection for the retry, not one behind a stuck statement.
                self.conn = None;
            }
            result
        })
    }
}

fn retry(e: tokio_postgres::Error) -> WriteError {
    WriteError::Retry(format!("PostgreSQL: {e}"))
}

/// Data exceptions (class 22: bad JSON, a NUL in text) and integrity violations (23) are the
/// batch's fault: retried, they would fail forever.
fn classify(e: tokio_postgres::Error) -> WriteError {
    match e.code().map(|c| c.code()) {
        Some(code) if code.starts_with("22") || code.starts_with("23") => {
            WriteError::Reject(format!("PostgreSQL refused the batch: {e}"))
        }
        _ => retry(e),
    }
}
