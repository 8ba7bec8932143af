//! The host's MCP registry vtable (the reference's `MCPRegistry`, spec §5.3) and the MCP
//! status call.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

use crate::ffi::agent::{agent_ref, agentao_agent, with_agent_then_out};
use crate::ffi::host::{adopt_opt, host_capability};
use crate::ffi::host_data::HostData;
use crate::ffi::{agentao_error, agentao_status, guard, in_callback, out_string};
use crate::mcp::McpRegistry;

/// Where an agent's MCP servers come from besides its config's `mcp_servers` (which are
/// merged over the registry's servers by name). Copied by `agentao_agent_set_mcp_registry`;
/// any slot after `userdata_free` may be NULL.
///
/// Threads: `list_servers` and `release_servers` run on a library thread where blocking is
/// fine, before each turn and when the registry is set; never two at once for one agent.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct agentao_mcp_registry {
    /// `sizeof(agentao_mcp_registry)`; a smaller value means the slots past it are NULL.
    pub(crate) struct_size: u32,
    pub(crate) userdata: *mut c_void,
    /// Called exactly once with `userdata` when the library lets go of the registry (the agent
    /// is freed, or another registry replaces it), or before `agentao_agent_set_mcp_registry`
    /// returns when it fails.
    pub userdata_free: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// The servers as a JSON object `{"<name>": {<server config>}, ...}` (the keys of
    /// `mcp_servers`, see docs/config.md), or NULL for none. The string stays the host's: the
    /// library copies it, then passes it to
    /// `release_servers`. Invalid UTF-8 or JSON leaves the registry's servers as they were and
    /// is reported as `registry_error` in `agentao_agent_mcp_status`. NULL slot: no servers.
    pub list_servers: Option<unsafe extern "C" fn(userdata: *mut c_void) -> *const c_char>,
    /// Optional: called once with each non-NULL string `list_servers` returned, after the
    /// library copied it, so the host can free it.
    pub(crate) release_servers:
        Option<unsafe extern "C" fn(userdata: *mut c_void, servers_json: *const c_char)>,
}

host_capability!(agentao_mcp_registry, minimum: userdata_free, required: []);

struct FfiRegistry {
    data: HostData,
    list: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
    release: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
}

impl McpRegistry for FfiRegistry {
    fn list_servers(&self) -> Result<Option<String>, String> {
        let Some(list) = self.list else {
            return Ok(None);
        };
        // SAFETY: the host's callback with its own userdata.
        let p = in_callback(|| unsafe { list(self.data.ptr()) });
        if p.is_null() {
            return Ok(None);
        }
        // SAFETY: a NUL-terminated string the host keeps valid until `release_servers`.
        let copied = unsafe { CStr::from_ptr(p) }
            .to_str()
            .map(str::to_owned)
            .map_err(|e| format!("list_servers returned invalid UTF-8: {e}"));
        if let Some(release) = self.release {
            // SAFETY: hands back the host's own string, once.
            in_callback(|| unsafe { release(self.data.ptr(), p) });
        }
        copied.map(Some)
    }
}

/// Sets the agent's MCP registry (`registry` is copied), or removes it when `registry` is
/// NULL. The registry's servers connect in the background now and are part of the next turn;
/// each turn asks `list_servers` again. A previous registry's `userdata_free` runs once no
/// turn uses it. Errors: `_NULL_ARGUMENT` (agent), `_INVALID_ARGUMENT` (a `struct_size`
/// smaller than the first three members: no slot is read or called).
///
/// Ownership: the library owns `registry->userdata` from the call on, and on every failure
/// `userdata_free` has run before this returns (earlier versions did not call it for a bad
/// `struct_size`; docs/c-api.md, "Host capabilities").
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_set_mcp_registry(
    agent: *mut agentao_agent,
    registry: *const agentao_mcp_registry,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        // Owned from here: every failure below releases the userdata.
        let copied = adopt_opt(registry)?.map(|(data, v)| FfiRegistry {
            data,
            list: v.list_servers,
            release: v.release_servers,
        });
        let agent = agent_ref(agent)?;
        agent.set_mcp_registry(copied.map(|r| Arc::new(r) as Arc<dyn McpRegistry>));
        Ok(())
    })
}

/// Writes the agent's MCP servers' status to `*json_out` (release with
/// `agentao_string_free`): `{"servers": [{"name", "status": "connecting"|"connected"|"error",
/// "transport": "stdio"|"http", "protocol", "tools", "resources", "resources_enabled",
/// "trusted", "error", "stderr": [last lines], "renamed_tools": {listed name: offered name},
/// "refused_tools": [{"tool", "reason"}]}], "registry_error"?}`; `tools` counts the tools
/// offered. The config's servers are listed (`connecting`) from `agentao_agent_new` on; a
/// server that failed to start stays `error` while it is retried in the background. Never waits
/// for a connection in progress. Any thread. Errors: `_NULL_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_mcp_status(
    agent: *const agentao_agent,
    json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_agent_then_out(agent, json_out, "json_out", err_out, |agent, out| {
        out.write(|| out_string(&agent.mcp_status_json()));
        Ok(())
    })
}
