//! The context window at the C boundary: the estimate and window, and compaction on demand.

use std::ffi::c_char;

use super::agent::{agentao_agent, with_agent_out};
use super::cancel::agentao_cancel_token;
use super::{agentao_error, agentao_status, opt_str_arg, out_string};
use crate::agent::AgentError;

/// Writes the context figures of the next request to `*usage_json_out`:
/// `{"estimated_tokens", "window", "configured_window", "learned_window" (null until an
/// overflow error states one), "microcompact_above", "compact_above", "compactions",
/// "consecutive_failures", "breaker_open"}`. `estimated_tokens` is the provider's last
/// `prompt_tokens` plus a local estimate of the messages after it (the system prompt and the
/// history; the tools and the volatile tail are counted inside a turn). `window` is the least
/// of `max_context_tokens` and the learned window. Release with `agentao_string_free`. Any
/// thread, during a turn too.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_context_usage(
    agent: *const agentao_agent,
    usage_json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_agent_out(
        agent,
        usage_json_out,
        "usage_json_out",
        err_out,
        |a, out| {
            out.write(|| out_string(&a.context_usage_json()));
            Ok(())
        },
    )
}

/// Compacts the history now: an LLM summary replaces the older messages, the recent ones are
/// kept verbatim (as an automatic full compaction, whose events it emits with trigger
/// `manual` and `reason`, NULL: `manual`). Blocks until it ends. `cancel` (may be NULL) is
/// linked one way to the summarizer's call. `*result_json_out` receives `{"status"
/// ("success", "cancelled", "failed" or "skipped"), "pre_msgs", "post_msgs",
/// "pre_tokens_history", "post_tokens_history", "duration_ms", "detail"}` (release with
/// `agentao_string_free`); a compaction that did not succeed is still `AGENTAO_STATUS_OK`, its
/// status says why. A turn running: `_TURN_IN_PROGRESS` (compaction happens between turns;
/// during a turn it is automatic). From a library callback or thread: `_REENTRANT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_compact(
    agent: *mut agentao_agent,
    reason: *const c_char,
    cancel: *const agentao_cancel_token,
    result_json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_agent_out(
        agent,
        result_json_out,
        "result_json_out",
        err_out,
        |a, out| {
            let reason = opt_str_arg(reason, "reason")?.unwrap_or("manual");
            if reason.len() > 200 {
                return Err(AgentError::InvalidArgument(
                    "`reason` is longer than 200 bytes".into(),
                )
                .into());
            }
            let token = cancel.as_ref().map(|c| c.token.clone());
            let report = a.compact(reason, token)?;
            out.write(|| out_string(&report.to_json()));
            Ok(())
        },
    )
}
