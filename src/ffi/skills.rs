//! The agent's skills, as the host reads them (docs/skills.md).

use std::ffi::c_char;

use super::agent::{agentao_agent, with_agent_then_out};
use super::{agentao_error, agentao_status, out_string};

/// Writes the agent's skills report to `*json_out` (release with `agentao_string_free`):
/// `{"enabled": bool, "skills": [{"name", "description", "origin": "user"|"workspace"|
/// "repository"|"configured"|"inline", "path": str|null}], "skipped": [{"path": str|null,
/// "name": str|null, "kind": "too_large"|"not_utf8"|"front_matter"|"name"|"outside_location"|
/// "unreadable"|"over_limit"|"shadowed", "reason": str}], "prompt_chars"?: int}`. `skipped`
/// lists every `SKILL.md` (or location) discovery left out and why; `prompt_chars` is the size
/// of the catalogue's block in the system prompt. Without a `skills` section (or with
/// `"enabled": false`) it is `{"enabled": false, "skills": [], "skipped": []}` and nothing is
/// read.
///
/// The first call (or turn) finds the skills, reading the skill directories through the
/// agent's file system (a host's, when one is installed); later calls report what was found
/// until another file system is installed.
///
/// Ownership: `*json_out` is the caller's. Threads: any thread; the first call blocks for the
/// reads. Errors: `AGENTAO_STATUS_NULL_ARGUMENT` (agent or `json_out`).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_skills(
    agent: *const agentao_agent,
    json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_agent_then_out(agent, json_out, "json_out", err_out, |agent, out| {
        out.write(|| out_string(&agent.skills_json()));
        Ok(())
    })
}
