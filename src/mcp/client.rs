//! One live connection to an MCP server, on `rmcp`'s client: connect (stdio child in its own
//! process group, or Streamable HTTP), the bounded `tools/list` walk, tool calls with progress
//! and cancellation, and resource requests.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientConfig, ClientRequest, Implementation, PaginatedRequestParams, ReadResourceRequestParams,
    ServerResult,
};
use rmcp::service::{Peer, RequestHandle, RunningService, ServiceError};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;
use tokio::sync::oneshot;

use super::config::{ServerConfig, TransportConfig};
use super::direct_call::{DirectCall, DirectCalls, Written};
use super::limits::{ByteCount, ToolListLimits, Tripwire, UnansweredRequests};
use super::progress::{ProgressRoutes, ProgressTap, Route};
use super::stdio::StdioTransport;
use crate::cancel::CancelToken;

/// Bounds on the `tools/list` walk, the reference's (the list's own bounds are the config's
/// [`ToolListLimits`]): a paginating server is an untrusted peer driving a loop, so each bound
/// fails the server rather than truncating its catalogue.
pub(crate) const MAX_TOOL_PAGES: usize = 100;
pub(crate) const MAX_CURSOR_BYTES: usize = 64 * 1024;
/// What is kept of a stdio server's stderr (for the status JSON and failure messages).
const STDERR_TAIL_LINES: usize = 40;
const STDERR_LINE_CHARS: usize = 400;

/// Blocks SIGPIPE on the calling thread. For the runtime's threads: they write to stdio
/// servers' stdin, and a write to one that died raises SIGPIPE, whose default action kills a C
/// host (Rust programs ignore it; C programs do not). Blocked, the write fails with EPIPE and
/// the connection reports the server gone.
pub(crate) fn block_sigpipe() {
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGPIPE);
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_BLOCK,
        Some(&set),
        None,
    );
}

/// One tool as the server described it.
#[derive(Debug, Clone)]
pub(crate) struct ToolDef {
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) input_schema: Value,
    pub(crate) read_only_hint: Option<bool>,
    pub(crate) destructive_hint: Option<bool>,
}

/// Why a call produced no result.
#[derive(Debug)]
pub enum CallError {
    /// The turn was cancelled; the server was sent `notifications/cancelled`.
    Cancelled,
    /// The model-facing text (the reference's `MCP ... error: ...` strings).
    Failed(String),
}

/// The client side handler: identifies us. Progress notifications are routed by the
/// transport ([`ProgressTap`]), not here.
#[derive(Clone)]
struct Handler;

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            Default::default(),
            Implementation::new("agentao", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// The last lines a stdio server wrote to stderr.
#[derive(Default)]
pub struct StderrTail(Mutex<VecDeque<String>>);

impl StderrTail {
    fn push(&self, line: &str) {
        if let Ok(mut q) = self.0.lock() {
            if q.len() == STDERR_TAIL_LINES {
                q.pop_front();
            }
            q.push_back(line.chars().take(STDERR_LINE_CHARS).collect());
        }
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// A stdio server's process group: killed whole when the connection goes.
struct ProcessGroup(nix::unistd::Pid);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // The leader is only reaped after this (by the child handle's own cleanup), so the
        // group id cannot have been reused yet.
        let _ = nix::sys::signal::killpg(self.0, nix::sys::signal::Signal::SIGKILL);
    }
}

/// A connected server.
pub struct Connection {
    pub(crate) server: String,
    pub(crate) config: ServerConfig,
    pub(crate) tools: Vec<ToolDef>,
    /// The server declared the `resources` capability.
    pub(crate) resources: bool,
    pub(crate) protocol: Option<String>,
    pub(crate) stderr: Arc<StderrTail>,
    peer: Peer<RoleClient>,
    /// Tool calls written by the calling task: stdio servers whose protocol has the
    /// `initialize` handshake (a later one wants rmcp's per-request `_meta`).
    direct: Option<DirectCalls>,
    service: Mutex<Option<RunningService<RoleClient, Handler>>>,
    progress: ProgressRoutes,
    /// Tripped when the server breaks a limit: the connection is closed.
    tripwire: Tripwire,
    dead: AtomicBool,
    handle: tokio::runtime::Handle,
    // Declared last: dropped after the service, by `Drop` below.
    group: Option<ProcessGroup>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The agent may be freed on a host thread: the child's cleanup spawns a task, which
        // needs the runtime's context.
        let _ctx = self.handle.enter();
        drop(self.group.take());
        if let Ok(mut s) = self.service.lock() {
            drop(s.take());
        }
    }
}

fn tls_config() -> Result<rustls::ClientConfig, String> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

fn http_client(
    headers: &std::collections::BTreeMap<String, String>,
    startup: Duration,
) -> Result<reqwest_mcp::Client, String> {
    let mut map = reqwest_mcp::header::HeaderMap::new();
    for (k, v) in headers {
        let name = reqwest_mcp::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| format!("header '{k}': {e}"))?;
        let value = reqwest_mcp::header::HeaderValue::from_str(v)
            .map_err(|e| format!("header '{k}': {e}"))?;
        map.insert(name, value);
    }
    if !map.contains_key(reqwest_mcp::header::USER_AGENT) {
        map.insert(
            reqwest_mcp::header::USER_AGENT,
            reqwest_mcp::header::HeaderValue::from_static(concat!(
                "agentao-mcp/",
                env!("CARGO_PKG_VERSION")
            )),
        );
    }
    reqwest_mcp::Client::builder()
        .tls_backend_preconfigured(tls_config()?)
        .default_headers(map)
        .connect_timeout(startup)
        // A redirect could carry the headers (credentials) to another origin.
        .redirect(reqwest_mcp::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())
}

/// What an untrusted stdio server inherits from the host's environment (its own `env` comes on
/// top): what a program needs to find its interpreter, its home-directory caches, a temporary
/// directory, its locale and time zone, and no more. Anything else the host's environment holds
/// can be a credential (`AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, a proxy URL with a password), and
/// an untrusted server is one the host does not vouch for.
const UNTRUSTED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "LANGUAGE", "TZ",
];

fn inherited_by_untrusted(key: &std::ffi::OsStr) -> bool {
    key.to_str()
        .is_some_and(|k| UNTRUSTED_ENV.contains(&k) || k.starts_with("LC_"))
}

/// The host's environment as a stdio server starts with: minus provider credentials, and for an
/// untrusted server only [`UNTRUSTED_ENV`] and `LC_*`.
fn server_env(trusted: bool) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut vars = crate::tools::shell_exec::build_child_env(true);
    if !trusted {
        vars.retain(|(k, _)| inherited_by_untrusted(k));
    }
    vars
}

fn tool_def(t: rmcp::model::Tool) -> ToolDef {
    let ann = t.annotations.as_ref();
    ToolDef {
        name: t.name.to_string(),
        description: t.description.map(|d| d.to_string()),
        input_schema: Value::Object((*t.input_schema).clone()),
        read_only_hint: ann.and_then(|a| a.read_only_hint),
        destructive_hint: ann.and_then(|a| a.destructive_hint),
    }
}

async fn list_all_tools(
    server: &str,
    peer: &Peer<RoleClient>,
    limits: ToolListLimits,
) -> Result<Vec<ToolDef>, String> {
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut seen = std::collections::HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_TOOL_PAGES {
        let params = cursor
            .take()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = peer
            .list_tools(params)
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        if tools.len() + page.tools.len() > limits.max_tools {
            return Err(format!(
                "MCP server '{server}' exceeded the {}-tool catalog limit",
                limits.max_tools
            ));
        }
        for t in &page.tools {
            let mut size = ByteCount::default();
            // Writing to a counter fails only if the value cannot be written as JSON at all.
            let _ = serde_json::to_writer(&mut size, t);
            bytes = bytes.saturating_add(size.0);
        }
        if bytes > limits.max_bytes {
            return Err(format!(
                "MCP server '{server}' sent a tool list larger than {} (the limit of one \
                 server's tool list, `mcp_limits.max_tool_list_bytes`)",
                limits.bytes_text()
            ));
        }
        tools.extend(page.tools.into_iter().map(tool_def));
        let Some(next) = page.next_cursor else {
            return Ok(tools);
        };
        if next.len() > MAX_CURSOR_BYTES {
            return Err(format!(
                "MCP server '{server}' returned a tools/list pagination cursor larger than \
                 {MAX_CURSOR_BYTES} bytes"
            ));
        }
        if !seen.insert(next.clone()) {
            return Err(format!(
                "MCP server '{server}' returned a repeated tools/list pagination cursor"
            ));
        }
        cursor = Some(next);
    }
    Err(format!(
        "MCP server '{server}' exceeded {MAX_TOOL_PAGES} pages of tools/list"
    ))
}

impl Connection {
    /// Connects and lists the tools, all within the startup timeout. On failure everything
    /// started is torn down (a stdio child with its group) and the message says why.
    pub async fn connect(
        server: &str,
        config: &ServerConfig,
        stderr: Arc<StderrTail>,
    ) -> Result<Connection, String> {
        let handle = tokio::runtime::Handle::current();
        let progress = ProgressRoutes::default();
        let tripwire = Tripwire::default();
        let mut group = None;
        let mut direct = None;
        let startup = config.startup_timeout;
        let attempt = async {
            let service = match &config.transport {
                TransportConfig::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                } => {
                    let mut cmd = tokio::process::Command::new(command);
                    cmd.args(args)
                        .env_clear()
                        .envs(server_env(config.trust))
                        .envs(env)
                        .process_group(0)
                        .kill_on_drop(true);
                    if let Some(cwd) = cwd {
                        cmd.current_dir(cwd);
                    }
                    let (child, err) = StdioTransport::spawn(cmd, tripwire.clone())
                        .map_err(|e| format!("cannot start '{command}': {e}"))?;
                    direct = Some(child.direct_calls());
                    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                        group = Some(ProcessGroup(nix::unistd::Pid::from_raw(pid)));
                    }
                    if let Some(err) = err {
                        let tail = stderr.clone();
                        tokio::spawn(async move {
                            let mut lines = tokio::io::BufReader::new(err).lines();
                            while let Ok(Some(line)) = lines.next_line().await {
                                tail.push(&line);
                            }
                        });
                    }
                    serve_tapped(child, &progress, &tripwire).await?
                }
                TransportConfig::Http { url, headers } => {
                    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                    let client = http_client(headers, startup)?;
                    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                        client,
                        StreamableHttpClientTransportConfig::with_uri(url.as_str()),
                    );
                    serve_tapped(transport, &progress, &tripwire).await?
                }
            };
            let peer = service.peer().clone();
            let tools = list_all_tools(server, &peer, config.list_limits).await?;
            Ok::<_, String>((service, peer, tools))
        };
        let attempt = async {
            tokio::select! {
                biased;
                // First: a breach also fails the attempt, with a message that hides its cause.
                breach = tripwire.wait() => Err(format!("the connection was closed: {breach}")),
                r = attempt => r,
            }
        };
        let outcome = tokio::time::timeout(startup, attempt).await;
        let (service, peer, tools) = match outcome {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return Err(with_stderr(e, &stderr)),
            Err(_) => {
                return Err(with_stderr(
                    format!(
                        "did not start within the startup timeout ({} s)",
                        startup.as_secs_f64()
                    ),
                    &stderr,
                ))
            }
        };
        let info = peer.peer_info();
        let direct = direct.filter(|_| {
            info.as_ref()
                .is_some_and(|i| i.protocol_version.has_initialize())
        });
        Ok(Connection {
            server: server.to_owned(),
            config: config.clone(),
            tools,
            resources: info
                .as_ref()
                .is_some_and(|i| i.capabilities.resources.is_some()),
            protocol: info.as_ref().map(|i| i.protocol_version.to_string()),
            stderr,
            peer,
            direct,
            service: Mutex::new(Some(service)),
            progress,
            tripwire,
            dead: AtomicBool::new(false),
            handle,
            group,
        })
    }

    /// Whether the connection is gone (the transport closed, or a call found it dropped).
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
            || self.tripwire.tripped().is_some()
            || self.peer.is_transport_closed()
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// Calls `tool`; progress lines go to `progress` as they arrive. The result is rmcp's type,
    /// rendered by [`super::render::render_tool_result`].
    pub async fn call_tool(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        cancel: &CancelToken,
        progress: &(dyn Fn(&str) + Sync),
    ) -> Result<CallToolResult, CallError> {
        let answer = match self.write_direct(tool, args)? {
            Some((call, route)) => {
                let call = InFlight::Direct(call);
                self.answer(call, tool, cancel, Some((progress, route)))
                    .await?
            }
            None => {
                let params =
                    CallToolRequestParams::new(tool.to_owned()).with_arguments(args.clone());
                let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
                self.request(request, tool, cancel, Some(progress)).await?
            }
        };
        match answer {
            ServerResult::CallToolResult(r) => Ok(r),
            _ => Err(CallError::Failed(format!(
                "MCP tool error: '{tool}' answered with a result agentao cannot read."
            ))),
        }
    }

    /// `resources/list` (or `resources/templates/list`), one page.
    pub(crate) async fn list_resources(
        &self,
        templates: bool,
        cursor: Option<String>,
        cancel: &CancelToken,
    ) -> Result<Value, CallError> {
        use rmcp::model::RequestOptionalParam;
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let request = if templates {
            ClientRequest::ListResourceTemplatesRequest(RequestOptionalParam::with_param(params))
        } else {
            ClientRequest::ListResourcesRequest(RequestOptionalParam::with_param(params))
        };
        let what = if templates {
            "resources/templates/list"
        } else {
            "resources/list"
        };
        let r = self.request(request, what, cancel, None).await?;
        serde_json::to_value(r).map_err(|e| CallError::Failed(format!("Error: {e}")))
    }

    /// `resources/read`.
    pub(crate) async fn read_resource(
        &self,
        uri: &str,
        cancel: &CancelToken,
    ) -> Result<Value, CallError> {
        let request = ClientRequest::ReadResourceRequest(rmcp::model::Request::new(
            ReadResourceRequestParams::new(uri),
        ));
        let r = self
            .request(request, "resources/read", cancel, None)
            .await?;
        serde_json::to_value(r).map_err(|e| CallError::Failed(format!("Error: {e}")))
    }

    fn closed_error(&self) -> CallError {
        CallError::Failed(format!(
            "MCP connection error for '{}': the connection is closed; the next turn reconnects",
            self.server
        ))
    }

    /// Writes a `tools/call` from this task (`direct_call.rs`), its progress routed; `None`
    /// when the call is to go through rmcp (an HTTP server, a busy pipe).
    fn write_direct(
        &self,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Result<Option<(DirectCall, Route)>, CallError> {
        let Some(direct) = &self.direct else {
            return Ok(None);
        };
        if self.is_dead() {
            return Err(self.closed_error());
        }
        let Some(call) = direct.begin() else {
            self.dead.store(true, Ordering::Release);
            return Err(self.closed_error());
        };
        // Routed before the server can see the request: its first progress may come at once.
        let route = self.progress.route_written(&call.progress_token());
        match direct.write(&call, tool, args) {
            Ok(Written::Sent) => Ok(Some((call, route))),
            Ok(Written::Busy) => Ok(None),
            Err(e) => {
                self.dead.store(true, Ordering::Release);
                let why = self.tripwire.tripped().map(|b| b.to_string());
                Err(CallError::Failed(outcome_unknown(
                    &self.server,
                    tool,
                    &why.unwrap_or_else(|| e.to_string()),
                )))
            }
        }
    }

    /// Sends `request` through rmcp and waits for its answer ([`Connection::answer`]). With
    /// `progress` (tool calls only: the transport routes progress for those alone), the call's
    /// progress lines go there, all of them before this returns.
    async fn request(
        &self,
        request: ClientRequest,
        what: &str,
        cancel: &CancelToken,
        progress: Option<&(dyn Fn(&str) + Sync)>,
    ) -> Result<ServerResult, CallError> {
        if self.is_dead() {
            return Err(self.closed_error());
        }
        let handle = self
            .peer
            .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
            .await
            .map_err(|e| {
                self.dead.store(true, Ordering::Release);
                CallError::Failed(format!("MCP connection error for '{}': {e}", self.server))
            })?;
        let route = progress.map(|p| (p, self.progress.route(&handle.progress_token)));
        self.answer(InFlight::Rmcp(Box::new(handle)), what, cancel, route)
            .await
    }

    /// Waits for `call`'s answer, the turn's cancel or the request timeout; the call's progress
    /// lines go to `route`'s callback, all of them before this returns.
    async fn answer(
        &self,
        mut call: InFlight,
        what: &str,
        cancel: &CancelToken,
        route: Option<(ProgressSink<'_>, Route)>,
    ) -> Result<ServerResult, CallError> {
        let forward = || {
            if let Some((progress, route)) = &route {
                if let Some(lines) = route.slot.take() {
                    progress(&lines);
                }
            }
        };
        let deadline = self
            .config
            .request_timeout
            .map(|t| tokio::time::Instant::now() + t);
        let answer = loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    let reason = cancel.reason().to_owned();
                    call.cancel(&self.peer, reason).await;
                    return Err(CallError::Cancelled);
                }
                _ = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => {
                    call.cancel(&self.peer, "request timeout".into()).await;
                    return Err(CallError::Failed(format!(
                        "MCP tool error: '{what}' on MCP server '{}' did not answer within its \
                         request timeout ({} s)",
                        self.server,
                        self.config.request_timeout.unwrap_or_default().as_secs_f64()
                    )));
                }
                _ = async {
                    match &route {
                        Some((_, r)) => r.slot.pushed().await,
                        None => std::future::pending().await,
                    }
                } => forward(),
                r = call.answer() => break r,
                breach = self.tripwire.wait() => {
                    self.dead.store(true, Ordering::Release);
                    return Err(CallError::Failed(outcome_unknown(
                        &self.server,
                        what,
                        &breach.to_string(),
                    )));
                }
            }
        };
        // What the server wrote before its answer was queued before the answer was read.
        forward();
        match answer {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(rmcp::ServiceError::McpError(e))) => {
                Err(CallError::Failed(format!("MCP tool error: {}", e.message)))
            }
            Ok(Err(e)) => {
                self.dead.store(true, Ordering::Release);
                let why = self.tripwire.tripped().map(|b| b.to_string());
                Err(CallError::Failed(outcome_unknown(
                    &self.server,
                    what,
                    &why.unwrap_or_else(|| e.to_string()),
                )))
            }
            Err(_) => {
                self.dead.store(true, Ordering::Release);
                let why = self.tripwire.tripped().map(|b| b.to_string());
                Err(CallError::Failed(outcome_unknown(
                    &self.server,
                    what,
                    why.as_deref().unwrap_or("the connection closed"),
                )))
            }
        }
    }
}

/// Where a tool call's progress lines go.
type ProgressSink<'a> = &'a (dyn Fn(&str) + Sync);

/// A request sent and not answered yet: through rmcp, or written by the calling task.
enum InFlight {
    // Boxed: the direct variant is the common one, and a tenth of the size.
    Rmcp(Box<RequestHandle<RoleClient>>),
    Direct(DirectCall),
}

impl InFlight {
    /// Where the answer comes (closed if the connection ends first).
    fn answer(&mut self) -> &mut oneshot::Receiver<Result<ServerResult, ServiceError>> {
        match self {
            InFlight::Rmcp(handle) => &mut handle.rx,
            InFlight::Direct(call) => &mut call.answer,
        }
    }

    /// Forgets the request and tells the server (`notifications/cancelled`, through rmcp).
    async fn cancel(self, peer: &Peer<RoleClient>, reason: String) {
        match self {
            InFlight::Rmcp(handle) => {
                let _ = handle.cancel(Some(reason)).await;
            }
            InFlight::Direct(call) => {
                let id = call.id();
                drop(call);
                let param = CancelledNotificationParam::new(Some(id), Some(reason));
                let _ = peer.notify_cancelled(param).await;
            }
        }
    }
}

/// The reference's text for a call whose connection dropped after it was sent.
fn outcome_unknown(server: &str, tool: &str, why: &str) -> String {
    format!(
        "MCP tool error: the connection to MCP server '{server}' closed after the call to \
         '{tool}' was sent ({why}). The result is unknown: the server can have run the call. \
         Check its effect before you call it again. The next turn reconnects."
    )
}

fn with_stderr(msg: String, stderr: &StderrTail) -> String {
    let lines = stderr.lines();
    match lines.last() {
        Some(last) => format!("{msg} (stderr: {last})"),
        None => msg,
    }
}

/// Serves our client over `inner`, its progress notifications routed to the calls in flight and
/// the server's unanswered requests bounded (past the bound, `tripwire` trips).
async fn serve_tapped<T>(
    inner: T,
    progress: &ProgressRoutes,
    tripwire: &Tripwire,
) -> Result<RunningService<RoleClient, Handler>, String>
where
    T: rmcp::transport::Transport<RoleClient> + Send + 'static,
    T::Error: Send + Sync + 'static,
{
    let tap = ProgressTap {
        inner,
        routes: progress.clone(),
        unanswered: UnansweredRequests::default(),
        tripwire: tripwire.clone(),
    };
    Handler
        .serve(tap)
        .await
        .map_err(|e| format!("initialize failed: {e}"))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    #[test]
    fn untrusted_servers_inherit_only_the_allow_list() {
        for k in ["PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"] {
            assert!(super::inherited_by_untrusted(OsStr::new(k)), "{k}");
        }
        for k in [
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "HTTPS_PROXY",
            "SSH_AUTH_SOCK",
            "LD_PRELOAD",
            "PATHX",
            "lc_all",
        ] {
            assert!(!super::inherited_by_untrusted(OsStr::new(k)), "{k}");
        }
    }
}
