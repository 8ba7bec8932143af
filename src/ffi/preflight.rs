//! The permission preflight: what the planner would decide for a call, without running it.

use std::ffi::c_char;

use super::agent::{agentao_agent, with_agent_then_out};
use super::{agentao_error, agentao_status, out_string, str_arg, Fail};

/// Answers "what would happen if the model called `tool_name` with `args_json` now?" from the
/// same pipeline the turn uses (read-only gate, hardline floor, run-scope, preset and user
/// rules in the mode's order, the confirmation fallback), without running anything or
/// emitting any event. Both strings are borrowed.
///
/// On success `*json_out` (release with `agentao_string_free`) is
/// `{"outcome": "allow"|"deny"|"prompt", "reason": str, "matched_rule": object|null,
/// "source": "read-only-gate"|"hardline"|"run-rule"|"preset"|"user-rule"|"fallback",
/// "mode": str, "hardline"?: str}`. `hardline` (present only then) is the floor's description
/// when it refuses the command: while planning (`outcome` `deny`), or, for an agent without
/// a permission engine, when the command is launched after the prompt.
///
/// The tools it knows are those the next turn would offer: the built-in and host tools, the
/// tools of the MCP servers connected now (a server connects during a turn; the preflight
/// never starts one), and the sub-agents' `agent_<name>` and background tools.
///
/// Errors: `AGENTAO_STATUS_NULL_ARGUMENT`, `_INVALID_UTF8`, `_INVALID_JSON` (args do not
/// parse), `_INVALID_ARGUMENT` (args not a JSON object, or no tool by that name). Threads:
/// any thread, also inside callbacks and while a turn runs (it then sees the current mode and
/// rules).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_preflight(
    agent: *const agentao_agent,
    tool_name: *const c_char,
    args_json: *const c_char,
    json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_agent_then_out(agent, json_out, "json_out", err_out, |agent, out| {
        let name = str_arg(tool_name, "tool_name")?;
        let args = str_arg(args_json, "args_json")?;
        let answer = agent.preflight(name, args)?;
        let json = serde_json::to_string(&answer)
            .map_err(|e| Fail(agentao_status::Internal, e.to_string()))?;
        out.write(|| out_string(&json));
        Ok(())
    })
}
