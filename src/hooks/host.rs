//! Hooks a host answers in-process (the C capability `agentao_hooks`): asked at the same
//! points as command hooks, with the same input, answered with the same JSON output a command
//! hook prints, so one precedence table covers both (docs/hooks.md).
//!
//! The host answers through a [`Reply`], inside its callback or later from any thread; the
//! point waits for it cancellably and at most the config's `reply_timeout_ms`. A host that
//! fails the request, drops it, answers what is not the protocol, or does not answer in time
//! is a failed hook: at `PreToolUse` the call is denied, elsewhere it is reported and ignored.

use std::sync::Arc;
use std::time::Duration;

use super::event::HookEvent;
use super::protocol::{parse_stdout, HookResult};
use crate::cancel::CancelToken;
use crate::events::transport::{ask_blocking, Answer, Reply, ReplyKind, Unanswered};

/// What a host hook is told about one point.
#[derive(Debug, Clone)]
pub struct HookRequest {
    pub event: HookEvent,
    /// The tool, at a tool point.
    pub tool_name: Option<String>,
    /// The call's id, at a tool point.
    pub call_id: Option<String>,
    /// The input a command hook reads on stdin (Claude Code's format).
    pub input_json: String,
}

/// A host's hooks. `on_hook` is called on a blocking thread; it answers `reply` with an
/// [`Answer::Hook`] (or fails it) now or later from any thread.
pub trait HostHooks: Send + Sync {
    fn on_hook(&self, request: HookRequest, reply: Reply);
}

/// Asks `host` and waits for its answer (see the module's note on failures).
pub(crate) async fn ask(
    host: &Arc<dyn HostHooks>,
    request: HookRequest,
    cancel: &CancelToken,
    timeout: Option<Duration>,
) -> HookResult {
    let failed = |why: &str| HookResult::Failed(format!("the host's hook failed: {why}"));
    let h = host.clone();
    let answer = match ask_blocking(
        ReplyKind::Hook,
        move |reply| h.on_hook(request, reply),
        cancel,
        timeout,
    )
    .await
    {
        Ok(a) => a,
        Err(Unanswered::Cancelled) => return failed("cancelled"),
        Err(Unanswered::TimedOut(t)) => {
            return failed(&format!("no answer within {} ms", t.as_millis()))
        }
    };
    match answer {
        Ok(Answer::Hook(output)) => match parse_stdout(&output) {
            Ok(reply) => HookResult::Replied(reply),
            Err(e) => failed(&format!("its output: {e}")),
        },
        Ok(Answer::Fail(m)) => failed(&m),
        Ok(_) => failed("it answered with something other than hook output"),
        Err(_) => failed("it dropped the request"),
    }
}
