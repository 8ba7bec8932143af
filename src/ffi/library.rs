//! Library-wide calls: version, runtime options, the host-event and ACP schemas.

use std::ffi::{c_char, CStr};

use super::{agentao_error, agentao_status, guard, Fail};

const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("the package version has no NUL"),
    };

const SCHEMA: &CStr = match CStr::from_bytes_with_nul(
    concat!(
        include_str!("../../docs/schema/host.events.v3.schema.json"),
        "\0"
    )
    .as_bytes(),
) {
    Ok(v) => v,
    Err(_) => panic!("the schema has no NUL"),
};

const ACP_SCHEMA: &CStr = match CStr::from_bytes_with_nul(
    concat!(include_str!("../../docs/schema/host.acp.schema.json"), "\0").as_bytes(),
) {
    Ok(v) => v,
    Err(_) => panic!("the ACP schema has no NUL"),
};

/// The library version (`"MAJOR.MINOR.PATCH"`), equal to the `AGENTAO_VERSION` macro of the
/// header it was built with. Static: never freed. Any thread.
#[no_mangle]
pub extern "C" fn agentao_version() -> *const c_char {
    VERSION.as_ptr()
}

/// The version as one number, `MAJOR * 1000000 + MINOR * 1000 + PATCH`, equal to
/// `AGENTAO_VERSION_NUMBER`.
#[no_mangle]
pub extern "C" fn agentao_version_number() -> u32 {
    let parse = |s: &str| s.parse::<u32>().unwrap_or(0);
    parse(env!("CARGO_PKG_VERSION_MAJOR")) * 1_000_000
        + parse(env!("CARGO_PKG_VERSION_MINOR")) * 1_000
        + parse(env!("CARGO_PKG_VERSION_PATCH"))
}

/// The JSON Schema (draft 2020-12) of the host events this library emits: the reference's v3
/// export, byte for byte. Static: never freed. Any thread.
#[no_mangle]
pub extern "C" fn agentao_host_events_schema() -> *const c_char {
    SCHEMA.as_ptr()
}

/// The JSON Schema (draft 2020-12) of the ACP wire payloads (initialize, session new/load/
/// prompt/cancel, session updates, request_permission, the `_agentao.cn/ask_user` extension,
/// set mode/model/config option) that `agentao-acp` speaks to out-of-process hosts: the
/// reference's `export_host_acp_json_schema()`, byte for byte. Static: never freed. Any thread.
#[no_mangle]
pub extern "C" fn agentao_host_acp_schema() -> *const c_char {
    ACP_SCHEMA.as_ptr()
}

/// The exported ACP schema as a Rust string (the same static bytes).
pub fn acp_schema() -> &'static CStr {
    ACP_SCHEMA
}

/// More workers than any machine has cores for; tokio aborts when it cannot spawn them.
const MAX_WORKER_THREADS: u32 = 1024;

/// Sets how many worker threads the library's runtime uses (default: one per core). Only
/// before the first agent is created; later calls fail with `AGENTAO_STATUS_INVALID_ARGUMENT`.
/// `threads` must be at least 1 and at most 1024 (`_INVALID_ARGUMENT` otherwise: a count the
/// machine cannot spawn would abort or hang the first `agentao_agent_new`).
#[no_mangle]
pub unsafe extern "C" fn agentao_runtime_set_worker_threads(
    threads: u32,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        if threads == 0 || threads > MAX_WORKER_THREADS {
            return Err(Fail(
                agentao_status::InvalidArgument,
                format!(
                    "threads must be at least 1 and at most {MAX_WORKER_THREADS} (got {threads})"
                ),
            ));
        }
        if crate::agent::set_worker_threads(threads as usize) {
            Ok(())
        } else {
            Err(Fail(
                agentao_status::InvalidArgument,
                "the runtime is already running (set the worker count before the first agent)"
                    .into(),
            ))
        }
    })
}

/// Panics inside the library on purpose, to prove that the panic boundary holds: returns
/// `AGENTAO_STATUS_PANIC`. Only in builds with the `test-panic` feature.
#[cfg(feature = "test-panic")]
#[no_mangle]
pub unsafe extern "C" fn agentao_test_panic(err_out: *mut *mut agentao_error) -> agentao_status {
    guard(err_out, || panic!("agentao_test_panic was called"))
}
