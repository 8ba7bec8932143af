//! The HTTP/1.1 side: reading a request (head, length or chunked body) and writing simple
//! answers and chunks.

use std::io;

use bytes::{Buf, Bytes, BytesMut};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::server::Busy;

/// Requests larger than this (head or body) are refused.
const MAX_REQUEST: usize = 64 * 1024 * 1024;
const MAX_HEAD: usize = 64 * 1024;

pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) body: Bytes,
    pub(crate) close: bool,
}

/// Reads one request; `Ok(None)` when the client closed the connection between requests.
pub(crate) async fn read_request(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    busy: &mut Busy<'_>,
) -> io::Result<Option<Request>> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_owned());
    // The head.
    let (head_len, method, path, content_length, chunked, close, expect_continue) = loop {
        if !buf.is_empty() {
            busy.start();
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(buf).map_err(|e| bad(&e.to_string()))? {
                httparse::Status::Complete(n) => {
                    let mut content_length = 0usize;
                    let mut chunked = false;
                    let mut close = req.version == Some(0);
                    let mut expect_continue = false;
                    for h in req.headers.iter() {
                        let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
                        if h.name.eq_ignore_ascii_case("content-length") {
                            content_length =
                                v.trim().parse().map_err(|_| bad("bad content-length"))?;
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = v.contains("chunked");
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            if v.contains("close") {
                                close = true;
                            } else if v.contains("keep-alive") {
                                close = false;
                            }
                        } else if h.name.eq_ignore_ascii_case("expect") {
                            expect_continue = v.contains("100-continue");
                        }
                    }
                    if content_length > MAX_REQUEST {
                        return Err(bad("request body too large"));
                    }
                    break (
                        n,
                        req.method.unwrap_or("").to_owned(),
                        req.path.unwrap_or("").to_owned(),
                        content_length,
                        chunked,
                        close,
                        expect_continue,
                    );
                }
                httparse::Status::Partial if buf.len() > MAX_HEAD => {
                    return Err(bad("request head too large"))
                }
                httparse::Status::Partial => {}
            }
        }
        busy.stop();
        if stream.read_buf(buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(io::Error::from(io::ErrorKind::UnexpectedEof))
            };
        }
    };
    buf.advance(head_len);
    if expect_continue {
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
    }
    // The body.
    let body = if chunked {
        read_chunked(stream, buf, busy).await?
    } else {
        while buf.len() < content_length {
            busy.stop();
            if stream.read_buf(buf).await? == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            busy.start();
        }
        buf.split_to(content_length).freeze()
    };
    busy.start();
    Ok(Some(Request {
        method,
        path,
        body,
        close,
    }))
}

async fn read_chunked(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    busy: &mut Busy<'_>,
) -> io::Result<Bytes> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_owned());
    let mut body = BytesMut::new();
    loop {
        // Size line.
        let (skip, size) = loop {
            match httparse::parse_chunk_size(buf).map_err(|_| bad("bad chunk size"))? {
                httparse::Status::Complete((n, size)) => break (n, size as usize),
                httparse::Status::Partial => {
                    busy.stop();
                    if stream.read_buf(buf).await? == 0 {
                        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                    }
                    busy.start();
                }
            }
        };
        if body.len() + size > MAX_REQUEST {
            return Err(bad("request body too large"));
        }
        buf.advance(skip);
        if size == 0 {
            // Trailers (ignored) end with an empty line.
            loop {
                if let Some(p) = buf.windows(2).position(|w| w == b"\r\n") {
                    let empty = p == 0;
                    buf.advance(p + 2);
                    if empty {
                        return Ok(body.freeze());
                    }
                    continue;
                }
                busy.stop();
                if stream.read_buf(buf).await? == 0 {
                    return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                }
                busy.start();
            }
        }
        while buf.len() < size + 2 {
            busy.stop();
            if stream.read_buf(buf).await? == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            busy.start();
        }
        body.extend_from_slice(&buf[..size]);
        buf.advance(size + 2);
    }
}

pub(crate) async fn write_simple(
    stream: &mut TcpStream,
    status: u16,
    reason: &str,
    body: &str,
    close: bool,
) -> io::Result<()> {
    let msg = json!({"error": {"message": body, "type": "invalid_request_error", "param": null, "code": null}})
        .to_string();
    write_json(stream, status, reason, &msg, close).await
}

/// Writes a complete `application/json` answer, head and body in one write.
pub(crate) async fn write_json(
    stream: &mut TcpStream,
    status: u16,
    reason: &str,
    body: &str,
    close: bool,
) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n",
        body.len(),
        if close { "connection: close\r\n" } else { "" }
    );
    stream.write_all(format!("{head}{body}").as_bytes()).await
}

/// A scripted HTTP error: `body` (JSON) under `status`, with the fault's own headers
/// (`retry-after`, …), the connection closed after it when `close`.
pub(crate) async fn write_error(
    stream: &mut TcpStream,
    status: u16,
    headers: &std::collections::BTreeMap<String, String>,
    body: &str,
    close: bool,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        reason_phrase(status),
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if close {
        head.push_str("connection: close\r\n");
    }
    head.push_str("\r\n");
    head.push_str(body);
    stream.write_all(head.as_bytes()).await
}

/// Writes `payload` as one HTTP/1.1 chunk.
pub(crate) async fn write_chunk(stream: &mut TcpStream, payload: &[u8]) -> io::Result<()> {
    if payload.is_empty() {
        return Ok(());
    }
    let mut out = Vec::with_capacity(payload.len() + 12);
    out.extend_from_slice(format!("{:x}\r\n", payload.len()).as_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
    stream.write_all(&out).await
}

pub(crate) fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        425 => "Too Early",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Site Overloaded",
        _ => "Error",
    }
}
