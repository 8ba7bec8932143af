//! Wire faults: the hostile servers of the fault matrix, in-stream errors and stalls.

use std::io;
use std::time::Duration;

use agentao::llm::script::{Fault, ScriptResponse};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::http::write_chunk;
use crate::render::Ctx;
use crate::server::Busy;

/// A hostile server for the fault matrix (`docs/reliability.md`): every chat request gets the
/// same misbehaving answer, which goes on until the client hangs up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// An endless SSE stream of text deltas of `chunk` bytes, one every `interval_ms` (0: as
    /// fast as the socket takes them). With a small chunk and an interval, a slowloris.
    EndlessText { chunk: usize, interval_ms: u64 },
    /// One `data:` line that never ends (no newline), written as fast as the socket takes it.
    GiantLine,
    /// A 200 `application/json` body that never ends (chunked), inside one string value.
    GiantJson,
    /// Deltas without content (`{"delta":{}}`) and `: keep-alive` comments every
    /// `interval_ms`, forever: a server that looks alive and makes no progress.
    EmptyDeltas { interval_ms: u64 },
}

pub(crate) async fn serve_hostile(
    stream: &mut TcpStream,
    h: Hostile,
    busy: &mut Busy<'_>,
) -> io::Result<()> {
    let content_type = if h == Hostile::GiantJson {
        "application/json"
    } else {
        "text/event-stream"
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    let filler = vec![b'x'; 64 * 1024];
    match h {
        Hostile::EndlessText { chunk, interval_ms } => {
            let text = "x".repeat(chunk.max(1));
            let event = format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n"
            );
            // Batch small events so a fast stream is not one syscall per delta.
            let per_write = if interval_ms == 0 {
                (64 * 1024 / event.len()).max(1)
            } else {
                1
            };
            let batch = event.repeat(per_write);
            loop {
                write_chunk(stream, batch.as_bytes()).await?;
                if interval_ms > 0 {
                    busy.sleep(Duration::from_millis(interval_ms)).await;
                }
            }
        }
        Hostile::GiantLine => {
            write_chunk(
                stream,
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"",
            )
            .await?;
            loop {
                write_chunk(stream, &filler).await?;
            }
        }
        Hostile::GiantJson => {
            write_chunk(stream, b"{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"").await?;
            loop {
                write_chunk(stream, &filler).await?;
            }
        }
        Hostile::EmptyDeltas { interval_ms } => loop {
            write_chunk(
                stream,
                b": keep-alive\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"}}]}\n\n",
            )
            .await?;
            busy.sleep(Duration::from_millis(interval_ms.max(1))).await;
        },
    }
}

pub(crate) async fn write_in_stream_error(
    stream: &mut TcpStream,
    resp: &ScriptResponse,
    ctx: &Ctx,
) -> io::Result<()> {
    let Some(Fault::InStreamError {
        message,
        code,
        error_type,
        ..
    }) = &resp.fault
    else {
        return Ok(());
    };
    let err = json!({"error": {
        "message": message,
        "type": error_type.clone().map_or(Value::Null, Value::String),
        "param": null,
        "code": code.clone().unwrap_or(Value::Null),
    }});
    let mut out = Vec::new();
    ctx.data(&mut out, err.to_string().as_bytes());
    write_chunk(stream, &out).await
}

/// Silence for `d` (or `: keep-alive` comments only, when the wire sends them).
pub(crate) async fn stall(
    stream: &mut TcpStream,
    ctx: &Ctx,
    d: Duration,
    busy: &mut Busy<'_>,
) -> io::Result<()> {
    if !ctx.wire.keepalive_comments {
        busy.sleep(d).await;
        return Ok(());
    }
    let end = tokio::time::Instant::now().checked_add(d);
    let every = Duration::from_millis(ctx.wire.keepalive_interval_ms.max(1));
    let mut out = Vec::new();
    ctx.comment(&mut out);
    loop {
        let now = tokio::time::Instant::now();
        let step = match end {
            Some(end) if end <= now => return Ok(()),
            Some(end) => every.min(end - now),
            None => every,
        };
        busy.sleep(step).await;
        write_chunk(stream, &out).await?;
    }
}
