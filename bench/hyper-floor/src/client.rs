//! The hyper client: one HTTP/1.1 connection (`client::conn::http1`, no pool) sending the request
//! bodies with the head `bench.c`'s raw client writes, and reading each response to its end.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::sse_lines::DataLineCounter;
use crate::sse_text::DeltaTextDecoder;

/// One keep-alive connection; the task driving it stops when this is dropped.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Where a response's body goes besides the line count: kept whole only when the caller checks
/// its text.
pub enum Keep<'a> {
    Nothing,
    Body(&'a mut Vec<u8>),
}

impl Connection {
    /// Connects and hands the connection to a task of the current runtime.
    pub async fn open(addr: SocketAddr) -> Result<Connection, String> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        stream
            .set_nodelay(true)
            .map_err(|e| format!("nodelay: {e}"))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let driver = tokio::spawn(async move {
            // Its error, if any, reaches the pending request as its own error.
            let _ = conn.await;
        });
        Ok(Connection { sender, driver })
    }

    /// Sends one body and reads the whole response, adding its `data:` lines to `counter`.
    pub async fn exchange(
        &mut self,
        body: Bytes,
        counter: &mut DataLineCounter,
        mut keep: Keep<'_>,
    ) -> Result<(), String> {
        let mut body = self.send(body).await?;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("body: {e}"))?;
            if let Some(data) = frame.data_ref() {
                counter.feed(data);
                if let Keep::Body(kept) = &mut keep {
                    kept.extend_from_slice(data);
                }
            }
        }
        Ok(())
    }

    /// Sends one body and decodes the text of the response's deltas into `decoder`.
    pub async fn exchange_text(
        &mut self,
        body: Bytes,
        decoder: &mut DeltaTextDecoder,
    ) -> Result<(), String> {
        let mut body = self.send(body).await?;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("body: {e}"))?;
            if let Some(data) = frame.data_ref() {
                decoder.feed(data)?;
            }
        }
        Ok(())
    }

    /// Sends one body with the raw client's head; the response's body is the caller's to read.
    async fn send(&mut self, body: Bytes) -> Result<Incoming, String> {
        let request = Request::post("/v1/chat/completions")
            .header("host", "127.0.0.1")
            .header("authorization", "Bearer sk-bench")
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(Full::new(body))
            .map_err(|e| format!("request: {e}"))?;
        self.sender
            .ready()
            .await
            .map_err(|e| format!("connection: {e}"))?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| format!("send: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("status {}", response.status()));
        }
        Ok(response.into_body())
    }
}
