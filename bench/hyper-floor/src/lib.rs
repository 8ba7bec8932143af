//! The hyper floor of `bench/bench.c`: what a minimal real HTTP client (hyper 1.x,
//! `client::conn::http1` over a tokio `TcpStream`, one `current_thread` runtime, no pool) spends
//! on the library's own requests against the same mock, so the library's figures can be read
//! against a realistic floor as well as the raw-socket one.
//!
//! The binary runs as a persistent child of the bench, one command a line on stdin and one
//! answer a line on stdout (see `main.rs`), so its process start is never measured.

pub mod client;
pub mod command;
pub mod requests;
pub mod sse_lines;
pub mod sse_text;
