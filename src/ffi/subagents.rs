//! Sub-agent definitions added through the C API (spec §6.1).

use std::ffi::c_char;

use super::agent::{agent_ref, agentao_agent};
use super::{agentao_error, agentao_status, guard, str_arg};

/// Adds a sub-agent definition to `agent`, between turns: the model is offered its
/// `agent_<name>` tool (`-` becomes `_`) from the next turn on. `definition_json` (borrowed,
/// copied) is one object: `{"name": str, "description"?: str, "instructions"?: str,
/// "tools"?: [str] | "a, b", "max_turns"?: int >= 1 (default 15), "model"?: str,
/// "temperature"?: number}` (docs/subagents.md). A definition with the same name is replaced.
///
/// Ownership: nothing is kept from the caller's memory.
///
/// Errors: `AGENTAO_STATUS_NULL_ARGUMENT` (NULL agent or json), `_INVALID_UTF8`,
/// `_INVALID_JSON` (the text does not parse), `_INVALID_ARGUMENT` (an unknown key, a wrong
/// type, a name that does not make a tool name of letters, digits, `-` and `_`, `max_turns` 0,
/// a tool name another tool already has), `_TURN_IN_PROGRESS` (a turn is running).
///
/// Threads: any thread; not inside a callback of this agent's running turn (that turn is in
/// progress).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_add_subagent(
    agent: *mut agentao_agent,
    definition_json: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let agent = agent_ref(agent)?;
        agent.add_subagent(str_arg(definition_json, "definition_json")?)?;
        Ok(())
    })
}
