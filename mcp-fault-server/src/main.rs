//! An MCP stdio server that misbehaves on purpose, for the agent's fault tests.
//!
//! `mcp-fault-server [--slow-start MS] [--tools N] [--log FILE] [--resources 1]`
//!
//! Tools: `echo` (returns `text`), `crash` (the process exits mid-call), `hang` (never answers;
//! a cancellation notification is written to the log as `cancelled <request id>`), `big`
//! (`bytes` of text, default 10 MB), `fail` (an `isError` result), `spawn_child` (starts a
//! grandchild `sleep`; returns `<own pid> <grandchild pid>`, for the process-group test),
//! `progress` (`steps` progress notifications written back to back, the result right after the
//! last one: the client must not lose the ones that arrive with the result), and with
//! `ping_flood` (`count` `ping` requests to the client written straight to stdout while the
//! server's one thread blocks on them, so nothing reads the client's replies; then the
//! result), and with `--tools N` the listing has N tools `t0`...`t<N-1>` besides. `--resources 1` declares the
//! `resources` capability (with no resources), so the client offers its resource tools.
//!
//! For the naming, size and environment tests: `--names a,b` lists tools with exactly those
//! names besides (each answers `<label>:<name>`, `--label L`, default `fault`);
//! `--pages P --schema-bytes N` splits the listing over P pages, each with one more tool `p<i>`
//! whose `inputSchema` carries N bytes; `--env-log FILE` writes the server's environment to
//! FILE (`KEY=VALUE` lines) before it starts; `--require FILE` exits at once, failing to
//! start, while FILE does not exist.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};

#[derive(Clone)]
struct Fault {
    extra_tools: usize,
    log: Option<Arc<str>>,
    resources: bool,
    names: Vec<String>,
    label: Arc<str>,
    pages: usize,
    schema_bytes: usize,
}

fn schema(props: Value) -> Arc<Map<String, Value>> {
    match json!({"type": "object", "properties": props}) {
        Value::Object(m) => Arc::new(m),
        _ => Arc::default(),
    }
}

impl Fault {
    fn log(&self, line: &str) {
        if let Some(path) = &self.log {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&**path)
            {
                let _ = writeln!(f, "{line}");
            }
        }
    }
}

impl Fault {
    /// Page `i` of a paginated listing: one tool with a large schema, and the next cursor.
    fn schema_page(&self, i: usize) -> ListToolsResult {
        let tool = Tool::new(
            format!("p{i}"),
            "A tool with a large schema",
            schema(
                json!({"blob": {"type": "string", "description": "s".repeat(self.schema_bytes)}}),
            ),
        );
        let mut page = ListToolsResult::with_all_items(vec![tool]);
        page.next_cursor = (i + 1 < self.pages).then(|| (i + 1).to_string());
        page
    }
}

impl ServerHandler for Fault {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder().enable_tools();
        ServerConfig::new(if self.resources {
            caps.enable_resources().build()
        } else {
            caps.build()
        })
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let page: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        if page > 0 {
            return Ok(self.schema_page(page));
        }
        let mut tools = vec![
            Tool::new(
                "echo",
                "Echo text",
                schema(json!({"text": {"type": "string"}})),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
            Tool::new("crash", "Exit mid-call", schema(json!({}))),
            Tool::new("hang", "Never answer", schema(json!({}))),
            Tool::new(
                "big",
                "A large result",
                schema(json!({"bytes": {"type": "integer"}})),
            ),
            Tool::new("fail", "An isError result", schema(json!({}))),
            Tool::new(
                "progress",
                "Progress notifications, then the result at once",
                schema(json!({"steps": {"type": "integer"}})),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
            Tool::new(
                "ping_flood",
                "Ping requests the server does not read the replies of",
                schema(json!({"count": {"type": "integer"}})),
            ),
            Tool::new("spawn_child", "Start a grandchild", schema(json!({})))
                .with_annotations(ToolAnnotations::new().read_only(true).destructive(true)),
        ];
        for i in 0..self.extra_tools {
            tools.push(Tool::new(
                format!("t{i}"),
                "A generated tool",
                schema(json!({})),
            ));
        }
        for name in &self.names {
            tools.push(Tool::new(name.clone(), "A named tool", schema(json!({}))));
        }
        if self.pages > 0 {
            let mut first = self.schema_page(0);
            tools.append(&mut first.tools);
            first.tools = tools;
            return Ok(first);
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = |s: String| Ok(CallToolResult::success(vec![ContentBlock::text(s)]).into());
        match &*request.name {
            "echo" => text(
                args.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            ),
            "crash" => std::process::exit(3),
            "hang" => {
                self.log(&format!("started {}", context.id_string()));
                context.ct.cancelled().await;
                self.log(&format!("cancelled {}", context.id_string()));
                text("cancelled".into())
            }
            "big" => {
                let n = args
                    .get("bytes")
                    .and_then(Value::as_u64)
                    .unwrap_or(10 << 20) as usize;
                text("x".repeat(n))
            }
            "progress" => {
                let steps = args.get("steps").and_then(Value::as_u64).unwrap_or(4);
                if let Some(token) = context.meta.get_progress_token() {
                    for i in 1..=steps {
                        // Each send resolves once written, so the result follows the last on
                        // the wire.
                        let note = ProgressNotificationParam::new(token.clone(), i as f64)
                            .with_total(steps as f64);
                        if context.peer.notify_progress(note).await.is_err() {
                            break;
                        }
                    }
                }
                text(format!("{steps} steps"))
            }
            "ping_flood" => {
                let count = args.get("count").and_then(Value::as_u64).unwrap_or(10_000);
                // Blocking writes on the runtime's only thread: rmcp's stdin reader cannot run
                // until they are done, so the client's replies pile up in the pipe. rmcp wrote
                // and flushed everything before this handler ran, so no line interleaves.
                let mut out = std::io::stdout().lock();
                for i in 0..count {
                    let ping = json!({"jsonrpc": "2.0", "id": 1_000_000 + i, "method": "ping"});
                    if writeln!(out, "{ping}").is_err() {
                        break;
                    }
                }
                let _ = out.flush();
                text(format!("{count} pings sent"))
            }
            "fail" => {
                Ok(CallToolResult::error(vec![ContentBlock::text("it failed on purpose")]).into())
            }
            "spawn_child" => {
                let child = std::process::Command::new("sleep").arg("300").spawn();
                match child {
                    Ok(c) => text(format!("{} {}", std::process::id(), c.id())),
                    Err(e) => text(format!("spawn failed: {e}")),
                }
            }
            name if self.names.iter().any(|n| n == name) => text(format!("{}:{name}", self.label)),
            _ if request.name.starts_with('t') => text(format!("{} ran", request.name)),
            other => Err(ErrorData::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }
}

trait IdString {
    fn id_string(&self) -> String;
}

impl IdString for RequestContext<RoleServer> {
    fn id_string(&self) -> String {
        serde_json::to_string(&self.id).unwrap_or_default()
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut slow_start = 0u64;
    let mut fault = Fault {
        extra_tools: 0,
        log: None,
        resources: false,
        names: Vec::new(),
        label: "fault".into(),
        pages: 0,
        schema_bytes: 0,
    };
    let mut env_log = None;
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_default();
        match a.as_str() {
            "--slow-start" => slow_start = v.parse().unwrap_or(0),
            "--tools" => fault.extra_tools = v.parse().unwrap_or(0),
            "--log" => fault.log = Some(v.into()),
            "--resources" => fault.resources = v == "1",
            "--names" => fault.names = v.split(',').map(str::to_owned).collect(),
            "--label" => fault.label = v.into(),
            "--pages" => fault.pages = v.parse().unwrap_or(0),
            "--schema-bytes" => fault.schema_bytes = v.parse().unwrap_or(0),
            "--env-log" => env_log = Some(v),
            "--require" => {
                if !std::path::Path::new(&v).exists() {
                    eprintln!("mcp-fault-server: {v} does not exist");
                    std::process::exit(1);
                }
            }
            _ => {
                eprintln!("mcp-fault-server: unknown argument {a}");
                std::process::exit(2);
            }
        }
    }
    if let Some(path) = env_log {
        let vars: String = std::env::vars()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        let _ = std::fs::write(path, vars);
    }
    eprintln!("mcp-fault-server: starting");
    fault.log(&format!("pid {}", std::process::id()));
    tokio::time::sleep(Duration::from_millis(slow_start)).await;
    let Ok(service) = fault.serve(rmcp::transport::stdio()).await else {
        std::process::exit(1);
    };
    let _ = service.waiting().await;
}
