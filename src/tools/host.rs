//! Host-supplied tools (spec §2): the validated description of one, the per-call context the
//! host sees, and the [`Tool`] that waits for the host's answer.
//!
//! The host answers through a [`Reply`], synchronously or later from any thread. The calling
//! tool thread waits for that answer next to the turn's cancellation token, and forwards the
//! output chunks the host streams meanwhile, so a chunk or an answer that arrives after the
//! call ended is dropped, never delivered to a finished call.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::output_mailbox::OutputMailbox;
use super::{Tool, ToolContext, ToolError};
use crate::cancel::CancelToken;
use crate::events::transport::{Answer, Reply, ReplyKind};

/// Names no host tool may take (the reference's plan tools).
pub(crate) const RESERVED_NAMES: &[&str] = &["plan_save", "plan_finalize"];

/// What a call that the turn's cancellation interrupted reports (spec §2.4).
pub(crate) const CANCELLED_TEXT: &str = "Tool execution cancelled.";

/// The error type of a call the host failed without naming one (`agentao_reply_fail`, a
/// dropped or wrong-kind reply).
pub(crate) const HOST_FAILURE_TYPE: &str = "HostToolError";

/// Checks a name a host wants to register or remove (spec §2.2); the message names the tool.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a host tool needs a non-empty name".into());
    }
    if name.starts_with("mcp_") {
        return Err(format!(
            "host tool '{name}': names starting with `mcp_` belong to MCP servers"
        ));
    }
    if RESERVED_NAMES.contains(&name) {
        return Err(format!("host tool '{name}': the name is reserved"));
    }
    Ok(())
}

/// Why a host tool's description was refused; the message names the tool.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SpecError {
    /// The parameters schema is not JSON.
    #[error("{0}")]
    Json(String),
    /// The name or the schema breaks a rule.
    #[error("{0}")]
    Invalid(String),
}

/// The validated description of a host tool.
#[derive(Debug, Clone)]
pub(crate) struct HostToolSpec {
    pub(crate) name: String,
    pub(crate) description: String,
    /// Sent verbatim as `function.parameters`.
    pub(crate) parameters: Value,
    pub(crate) read_only: bool,
    pub(crate) requires_confirmation: bool,
    /// A sub-agent gets this tool too (spec §6.3); otherwise its name is left out of theirs.
    pub(crate) copies_to_subagents: bool,
    /// Two calls in one parallel batch may run at once.
    pub(crate) reentrant: bool,
}

impl HostToolSpec {
    /// Validates the name and the parameters schema (a JSON object; its `type`, when given,
    /// is `"object"`; `properties` an object; `required` a list of names). Errors name the
    /// tool.
    pub(crate) fn parse(
        name: &str,
        description: &str,
        parameters_json: &str,
        flags: HostToolFlags,
    ) -> Result<Self, SpecError> {
        check_name(name).map_err(SpecError::Invalid)?;
        let bad = |why: &str| SpecError::Invalid(format!("host tool '{name}': parameters: {why}"));
        let parameters: Value = serde_json::from_str(parameters_json).map_err(|e| {
            SpecError::Json(format!(
                "host tool '{name}': parameters: not valid JSON: {e}"
            ))
        })?;
        let Some(schema) = parameters.as_object() else {
            return Err(bad("must be a JSON Schema object"));
        };
        if schema.get("type").is_some_and(|t| t != "object") {
            return Err(bad("`type` must be \"object\""));
        }
        if schema.get("properties").is_some_and(|p| !p.is_object()) {
            return Err(bad("`properties` must be an object"));
        }
        if let Some(req) = schema.get("required") {
            let ok = req
                .as_array()
                .is_some_and(|r| r.iter().all(Value::is_string));
            if !ok {
                return Err(bad("`required` must be a list of property names"));
            }
        }
        Ok(HostToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
            read_only: flags.read_only,
            requires_confirmation: flags.requires_confirmation,
            copies_to_subagents: flags.copies_to_subagents,
            reentrant: flags.reentrant,
        })
    }
}

/// The boolean members of a host tool's description.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HostToolFlags {
    pub(crate) read_only: bool,
    pub(crate) requires_confirmation: bool,
    pub(crate) copies_to_subagents: bool,
    pub(crate) reentrant: bool,
}

/// One running call as the host sees it: its id, the turn's token, and an output sink that
/// works from any thread until the call ends.
pub(crate) struct HostCall {
    pub(crate) call_id: String,
    pub(crate) cancel: CancelToken,
    /// One slot, bounded: a host streaming inside its callback (where nothing drains it) or
    /// faster than the host reads events cannot grow the process.
    output: Arc<OutputMailbox>,
}

impl HostCall {
    /// Streams a chunk as a `tool_output` event; false once the call has ended (the chunk is
    /// dropped). Past what may wait, output is counted and reported as skipped.
    pub(crate) fn output(&self, chunk: &str) -> bool {
        !chunk.is_empty() && self.output.push(0, chunk)
    }
}

/// Closes a call's output when `execute` returns, however it returns.
struct CloseOnDrop(Arc<OutputMailbox>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Hands what waits in the call's slot to the turn's own output.
fn forward(mailbox: &OutputMailbox, output: &(dyn Fn(&str) + Sync)) {
    if let Some(taken) = mailbox.take(0) {
        for chunk in &taken.chunks {
            output(chunk);
        }
        if let Some(notice) = taken.skipped_notice() {
            output(&notice);
        }
    }
}

/// How a host runs its tool: start the call, answer `reply` once (now or later).
pub(crate) trait HostExecutor: Send + Sync {
    fn start(&self, args_json: &str, call: Arc<HostCall>, reply: Reply);
}

/// A host tool: its description and the host's executor.
pub(crate) struct HostTool {
    spec: HostToolSpec,
    executor: Arc<dyn HostExecutor>,
}

impl HostTool {
    pub(crate) fn new(spec: HostToolSpec, executor: Arc<dyn HostExecutor>) -> Self {
        HostTool { spec, executor }
    }
}

fn outcome(answer: Answer) -> Result<String, ToolError> {
    match answer {
        Answer::ToolResult(text) => Ok(text),
        Answer::ToolError {
            error_type,
            message,
        } => Err(ToolError {
            kind: error_type,
            message,
        }),
        Answer::Fail(message) => Err(ToolError::new(HOST_FAILURE_TYPE, message)),
        _ => Err(ToolError::new(
            HOST_FAILURE_TYPE,
            "the host answered with the wrong kind",
        )),
    }
}

impl Tool for HostTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn description(&self) -> &str {
        &self.spec.description
    }

    fn parameters(&self) -> Value {
        self.spec.parameters.clone()
    }

    fn is_read_only(&self) -> bool {
        self.spec.read_only
    }

    fn requires_confirmation(&self) -> bool {
        self.spec.requires_confirmation
    }

    fn origin(&self) -> crate::tools::ToolOrigin {
        crate::tools::ToolOrigin::Host {
            copies_to_subagents: self.spec.copies_to_subagents,
        }
    }

    fn is_reentrant(&self) -> bool {
        self.spec.reentrant
    }

    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        if ctx.cancel.is_cancelled() {
            return Ok(CANCELLED_TEXT.to_owned());
        }
        let mailbox = Arc::new(OutputMailbox::new(1));
        let _closed_at_end = CloseOnDrop(mailbox.clone());
        let call = Arc::new(HostCall {
            call_id: ctx.call_id.to_owned(),
            cancel: ctx.cancel.clone(),
            output: mailbox.clone(),
        });
        let (reply, mut rx) = Reply::new(ReplyKind::HostTool);
        let args_json = Value::Object(args.clone()).to_string();
        self.executor.start(&args_json, call, reply);
        // A host that answered inside its callback needs no wake-up.
        forward(&mailbox, ctx.output);
        match rx.try_recv() {
            Ok(answer) => return outcome(answer),
            Err(oneshot::error::TryRecvError::Closed) => {
                return Err(ToolError::new(
                    HOST_FAILURE_TYPE,
                    "the host released the call without answering",
                ))
            }
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        let wait = async {
            loop {
                tokio::select! {
                    biased;
                    _ = ctx.cancel.cancelled() => return Ok(CANCELLED_TEXT.to_owned()),
                    () = mailbox.pushed() => forward(&mailbox, ctx.output),
                    answer = &mut rx => {
                        forward(&mailbox, ctx.output);
                        return match answer {
                            Ok(a) => outcome(a),
                            Err(_) => Err(ToolError::new(
                                HOST_FAILURE_TYPE,
                                "the host released the call without answering",
                            )),
                        };
                    }
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle.block_on(wait),
            Err(_) => tokio::runtime::Builder::new_current_thread()
                .build()
                .map_err(|e| ToolError::new("RuntimeError", e.to_string()))?
                .block_on(wait),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("").unwrap_err().contains("non-empty"));
        assert!(check_name("mcp_x").unwrap_err().contains("'mcp_x'"));
        assert!(check_name("plan_save").unwrap_err().contains("reserved"));
        assert!(check_name("lookup").is_ok());
    }

    #[test]
    fn schemas_are_checked() {
        let f = HostToolFlags::default();
        let err = HostToolSpec::parse("t", "d", "{", f).unwrap_err();
        assert!(matches!(err, SpecError::Json(_)));
        assert!(err.to_string().contains("'t'"), "{err}");
        assert!(HostToolSpec::parse("t", "d", "[]", f).is_err());
        assert!(HostToolSpec::parse("t", "d", r#"{"type":"string"}"#, f).is_err());
        assert!(HostToolSpec::parse("t", "d", r#"{"required":[1]}"#, f).is_err());
        let ok = HostToolSpec::parse("t", "d", r#"{"type":"object","properties":{}}"#, f);
        assert!(ok.is_ok());
    }
}
