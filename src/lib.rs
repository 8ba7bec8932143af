//! libagentao: a governed LLM agent behind a C ABI.
//!
//! The layers, top to bottom (imports only go down; see `docs/architecture.md`):
//!
//! | module | owns |
//! |---|---|
//! | [`ffi`] | every `extern "C"` function, handles, the panic boundary, C strings, status codes |
//! | [`agent`] | one session: config, history, turn lock, last turn, entry points |
//! | [`turn`] | one turn: LLM call, tool-call planning, permission + confirmation, execution, outcome |
//! | [`config`] | the agent config: composes the sections each layer owns |
//! | [`llm`] | chat completions over SSE, the scripted provider, retries |
//! | [`tools`] | the tool trait, registry and built-in tools |
//! | [`permissions`] | modes, rules, the hardline floor, path and URL policy, snapshot |
//! | [`events`] | internal events, the transport, host-event projection and streams |
//! | [`cancel`] | cancellation tokens |
//! | [`config_field`] | how a config section is read: closed objects, errors in the section's words |
//! | [`pycompat`] | the reference's Python spellings (`json.dumps`, `str`, `repr`, `splitlines`) |
//!
//! `unsafe` lives in `ffi` only.

#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod ffi;

pub mod agent;
pub mod turn;

pub mod config;

pub mod llm;
pub mod tools;

pub mod permissions;

pub mod events;

pub mod cancel;
pub mod config_field;
pub mod pycompat;
