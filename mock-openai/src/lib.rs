//! A loopback mock of the OpenAI chat-completions streaming wire, and of the Anthropic
//! Messages (`/v1/messages`) and OpenAI Responses (`/v1/responses`) wires from the same
//! scripts (`wires.rs`).
//!
//! [`MockServer`] binds `127.0.0.1:0` and serves `POST /v1/chat/completions` from an agentao
//! script (the vocabulary of `tests/conformance/transcripts`, parsed by
//! [`agentao::llm::script::Script::from_value`]): each request consumes the next scripted response
//! and gets it as a real `text/event-stream`, one `data:` chunk per [`ScriptEvent`], then
//! `data: [DONE]`. The script's faults become real wire faults: an HTTP error status with an
//! OpenAI error body, a TCP close in the middle of a chunked body, a raw malformed line, silence,
//! or an error object inside the 200 stream.
//!
//! The server runs on its own thread with its own tokio runtime, so sync tests, async tests and
//! other processes (through the `mock-openai` binary) can all use it. Dropping it stops it.
//!
//! Wire options (the script's top-level `"wire"` key, or [`MockBuilder::wire`]) reproduce the
//! framing quirks of real servers: CRLF line ends, `: keep-alive` comments, no `[DONE]`,
//! `data:` without a space, a usage chunk whose `choices` is `null` or absent, and the chunked
//! body's end written some time after `[DONE]`.
//!
//! For benchmarks, [`MockServer::start_prerendered`] answers every request with the same bytes
//! and [`MockServer::server_busy_nanos`] tells how long the server worked, so it can be subtracted.
//! The same figures are served as `GET /v1/_stats` (`{"busy_nanos": N, "requests": N}`) for
//! clients in another process (the `mock-openai` binary run by `bench/`).
//!
//! [`MockBuilder::start_session`] starts a model with a context window instead of a script
//! (see [`SessionModel`]): it refuses prompts over its window as real servers do, can refuse
//! images as a text-only model does, and echoes summaries.
//!
//! [`ScriptEvent`]: agentao::llm::script::ScriptEvent

mod faults;
mod http;
mod render;
mod server;
mod session;
mod wires;

pub use faults::Hostile;
pub use render::{render_sse, render_sse_all, UsageChoices, WireOptions};
pub use server::{MockBuilder, MockServer};
pub use session::{OverflowStyle, SessionModel, SessionStats};
pub use wires::{render_wire_sse, render_wire_sse_all, Wire};
