//! The adapter that makes one server tool a [`Tool`]: the reference's `McpTool`
//! (`agentao/mcp/tool.py`), with its trust rules.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::client::{CallError, Connection, ToolDef};
use super::render::render_tool_result;
use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolServices};

pub(crate) struct McpTool {
    fqn: String,
    description: String,
    parameters: Value,
    def: ToolDef,
    conn: Arc<Connection>,
    /// Whether resource links may point at `read_mcp_resource` (it is registered for this
    /// server).
    read_hint: bool,
}

impl McpTool {
    /// `fqn`: the name [`super::naming::assign`] gave it.
    pub(crate) fn new(conn: Arc<Connection>, def: ToolDef, fqn: String, read_hint: bool) -> Self {
        let server = &conn.server;
        let description = format!(
            "[MCP:{server}] {}",
            def.description
                .clone()
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| format!("MCP tool from {server}"))
        );
        let mut parameters = match &def.input_schema {
            Value::Object(o) => Value::Object(o.clone()),
            _ => serde_json::json!({"type": "object", "properties": {}}),
        };
        if parameters.get("type").is_none() {
            parameters["type"] = Value::from("object");
        }
        McpTool {
            fqn,
            description,
            parameters,
            def,
            conn,
            read_hint,
        }
    }

    fn trusted(&self) -> bool {
        self.conn.config.trust
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.fqn
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    /// Never from an untrusted server's annotations; a trusted server's `destructiveHint`
    /// overrides its `readOnlyHint`.
    fn origin(&self) -> crate::tools::ToolOrigin {
        crate::tools::ToolOrigin::Mcp
    }

    fn is_read_only(&self) -> bool {
        self.trusted()
            && self.def.read_only_hint == Some(true)
            && self.def.destructive_hint != Some(true)
    }

    /// Untrusted: always. Trusted: only when the server flagged the tool destructive.
    fn requires_confirmation(&self) -> bool {
        !self.trusted() || self.def.destructive_hint == Some(true)
    }

    /// An MCP call is a request and its answer: awaited on the turn's task, with no blocking
    /// thread between the turn and rmcp's service task.
    fn runs_on_task(&self, _services: &ToolServices) -> bool {
        true
    }

    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        self.conn.runtime().block_on(self.call(args, ctx))
    }

    fn execute_async<'a>(
        &'a self,
        args: &'a Map<String, Value>,
        ctx: &'a ToolContext<'a>,
    ) -> ToolFuture<'a> {
        Box::pin(self.call(args, ctx))
    }
}

impl McpTool {
    async fn call(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let conn = &self.conn;
        let outcome = conn
            .call_tool(&self.def.name, args, ctx.cancel, ctx.output)
            .await;
        match outcome {
            Ok(result) => {
                let hint = self.read_hint.then_some(conn.server.as_str());
                let save_dir = Some(&ctx.services.tool_outputs);
                match render_tool_result(result, save_dir, hint) {
                    (text, false) => Ok(text),
                    (text, true) => Err(ToolError::new("McpToolError", text)),
                }
            }
            Err(CallError::Cancelled) => {
                Ok(format!("[Operation Cancelled] {}", ctx.cancel.reason()))
            }
            Err(CallError::Failed(text)) => Ok(text),
        }
    }
}
