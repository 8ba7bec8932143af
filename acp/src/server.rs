//! The ACP method dispatcher: one connection, many sessions.
//!
//! Every request except `session/prompt` is answered on the reading thread (they are quick);
//! a prompt runs as an agent turn on the library's runtime and is answered by its completion,
//! after every `session/update` of the turn (they share the outbox's order). Requests to the
//! client (permission, `ask_user`) are answered from the reading thread as their responses
//! arrive, so a turn waiting for one never blocks the reading of others.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentao::agent::{AgentError, TurnOptions};
use agentao::llm::image::ImageInput;
use agentao::turn::{DeltaSink, IncompleteReason, TurnStatus};
use base64::Engine;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use crate::options::Options;
use crate::protocol::*;
use crate::rpc::{
    classify, Incoming, Outbox, Pending, RpcError, INVALID_REQUEST, METHOD_NOT_FOUND,
};
use crate::session::{valid_session_id, Session};

#[path = "stored.rs"]
mod stored;

/// The longest message accepted; a longer line is skipped and answered with a parse error.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// What a saved session's file holds besides its history (`{"cwd": …, "history": …}`).
const SAVED_FRAME_BYTES: usize = 8192;

/// Sessions per `session/list` page.
const LIST_PAGE: usize = 500;

/// The cancellation reason of `session/cancel` (the reference's).
pub const CANCEL_REASON: &str = "acp-session-cancel";

pub struct Server {
    opts: Options,
    out: Outbox,
    pending: Arc<Pending>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    initialized: AtomicBool,
    /// Prompts whose response is not yet queued.
    in_flight: Arc<AtomicUsize>,
}

fn parse<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params)
        .map_err(|e| RpcError::invalid_params(format!("Invalid params: {e}")))
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::internal(e.to_string()))
}

impl Server {
    pub fn new(opts: Options, out: Outbox) -> Server {
        Server {
            opts,
            out,
            pending: Arc::new(Pending::default()),
            sessions: Mutex::new(HashMap::new()),
            initialized: AtomicBool::new(false),
            in_flight: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn outbox(&self) -> &Outbox {
        &self.out
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, RpcError> {
        self.sessions()
            .get(id)
            .cloned()
            .ok_or_else(|| RpcError::invalid_params(format!("Unknown session: {id}")))
    }

    /// Reads messages until the input ends, then shuts down (cancels running prompts and
    /// waits up to `grace` for them to end).
    pub fn run(&self, mut input: impl BufRead, grace: Duration) {
        let mut line = Vec::new();
        loop {
            line.clear();
            match read_line_capped(&mut input, &mut line, MAX_MESSAGE_BYTES) {
                Ok(LineRead::Eof) => break,
                Ok(LineRead::Line) => self.handle_line(&line),
                Ok(LineRead::TooLong) => self.out.fail(
                    &Value::Null,
                    &RpcError::new(
                        crate::rpc::PARSE_ERROR,
                        format!("Parse error: message longer than {MAX_MESSAGE_BYTES} bytes"),
                    ),
                ),
                Err(e) => {
                    eprintln!("agentao-acp: reading stdin: {e}");
                    break;
                }
            }
            if self.out.is_closed() {
                break;
            }
        }
        self.shutdown(grace);
    }

    pub fn handle_line(&self, line: &[u8]) {
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            return;
        }
        match classify(trimmed) {
            Err((id, e)) => self.out.fail(&id, &e),
            Ok(Incoming::Response { id, result }) => {
                if !self.pending.resolve(&id, result) {
                    // JSON-RPC never answers a response; note it and go on.
                    eprintln!("agentao-acp: ignored a response to no request (id {id})");
                }
            }
            Ok(Incoming::Notification { method, params }) => {
                if let Err(e) = self.notification(&method, params) {
                    eprintln!("agentao-acp: notification {method}: {}", e.message);
                    // A notification has no response; an error with a null id is the one way
                    // JSON-RPC has to tell the client its message did nothing.
                    self.out.fail(
                        &Value::Null,
                        &RpcError::new(e.code, format!("{method}: {}", e.message)),
                    );
                }
            }
            Ok(Incoming::Request { id, method, params }) => {
                if method == "session/prompt" {
                    if let Err(e) = self.prompt(id.clone(), params) {
                        self.out.fail(&id, &e);
                    }
                } else {
                    let result = self.request(&method, params);
                    self.out.reply(&id, result);
                }
            }
        }
    }

    fn notification(&self, method: &str, params: Value) -> Result<(), RpcError> {
        match method {
            "session/cancel" => self.cancel(params).map(|_| ()),
            // Unknown notifications are ignored, as JSON-RPC requires.
            _ => Ok(()),
        }
    }

    fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        if method != "initialize" && !self.initialized.load(Ordering::Acquire) {
            return Err(RpcError::new(
                INVALID_REQUEST,
                "initialize must be called first",
            ));
        }
        match method {
            "initialize" => self.initialize(params),
            "session/new" => self.new_session(params),
            "session/load" => self.load_session(params),
            "session/cancel" => self.cancel(params),
            "session/close" => self.close(params),
            "session/list" => self.list(params),
            "session/set_mode" => self.set_mode(params),
            "session/set_model" => self.set_model(params),
            "session/list_models" => self.list_models(params),
            "session/set_config_option" => self.set_config_option(params),
            SET_MODEL_EXT_METHOD => self.ext_set_model(params),
            _ => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            )),
        }
    }

    fn initialize(&self, params: Value) -> Result<Value, RpcError> {
        let _req: InitializeRequest = parse(params)?;
        self.initialized.store(true, Ordering::Release);
        let bools = |pairs: &[(&str, bool)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::Bool(*v)))
                .collect()
        };
        to_value(&InitializeResponse {
            protocol_version: PROTOCOL_VERSION,
            agent_capabilities: AgentCapabilities {
                load_session: self.opts.sessions_dir.is_some() || self.opts.store.is_some(),
                prompt_capabilities: bools(&[
                    ("image", true),
                    ("audio", false),
                    ("embeddedContext", false),
                ]),
                mcp_capabilities: bools(&[("http", false), ("sse", false)]),
                session_capabilities: SessionCapabilities {
                    close: Map::new(),
                    list: Map::new(),
                },
            },
            agent_info: AgentInfo {
                name: "agentao-acp",
                title: "Agentao",
                version: env!("CARGO_PKG_VERSION"),
            },
            auth_methods: Vec::new(),
            meta: InitializeMeta {
                extensions: vec![InitializeExtension {
                    method: ASK_USER_METHOD,
                    description: "The agent asks the user a free-form question; answer {outcome: \"answered\", text} or {outcome: \"cancelled\"}",
                }],
            },
        })
    }

    fn check_cwd(&self, cwd: &str) -> Result<PathBuf, RpcError> {
        let p = Path::new(cwd);
        if !p.is_absolute() {
            return Err(RpcError::invalid_params("cwd must be an absolute path"));
        }
        if !p.is_dir() {
            return Err(RpcError::invalid_params(format!(
                "cwd is not a directory: {cwd}"
            )));
        }
        if !self.opts.allow_broad_cwd {
            if let Some(why) = broad_workspace(p) {
                return Err(RpcError::invalid_params(format!(
                    "cwd {cwd} is {why}: the whole of it would be the workspace the agent may \
                     edit; open a project directory (or start the server with --allow-broad-cwd)"
                )));
            }
        }
        Ok(p.to_path_buf())
    }

    /// Upstream ACP's `additionalDirectories`: checked for shape, not added to the workspace
    /// (the library has one workspace root; files there stay outside it, asked for as such).
    fn check_additional(dirs: &[String]) -> Result<(), RpcError> {
        if let Some(d) = dirs.iter().find(|d| !Path::new(d).is_absolute()) {
            return Err(RpcError::invalid_params(format!(
                "additionalDirectories: not an absolute path: {d}"
            )));
        }
        if !dirs.is_empty() {
            eprintln!(
                "agentao-acp: additionalDirectories are not part of the workspace here: {}",
                dirs.join(", ")
            );
        }
        Ok(())
    }

    fn warn_mcp(servers: &[McpServer]) {
        if !servers.is_empty() {
            let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
            eprintln!(
                "agentao-acp: MCP servers are not supported by this build; ignored: {}",
                names.join(", ")
            );
        }
    }

    fn create(&self, id: String, cwd: PathBuf) -> Result<Arc<Session>, RpcError> {
        Session::create(
            id,
            cwd,
            &self.opts.template,
            self.opts.mode,
            self.out.clone(),
            self.pending.clone(),
        )
    }

    /// Refuses a session that would be one too many; `replacing` names a live one it replaces.
    fn check_room(&self, method: &str, replacing: Option<&str>) -> Result<(), RpcError> {
        let sessions = self.sessions();
        let replaces = replacing.is_some_and(|id| sessions.contains_key(id));
        if replaces || sessions.len() < self.opts.max_sessions {
            Ok(())
        } else {
            Err(self.too_many(method))
        }
    }

    fn too_many(&self, method: &str) -> RpcError {
        RpcError::internal(format!(
            "{method}: too many live sessions ({} is this server's limit, --max-sessions); \
             end one with session/close first",
            self.opts.max_sessions
        ))
    }

    /// Keeps a new session, unless the limit was reached since `check_room`.
    fn keep(&self, method: &str, session: Arc<Session>) -> Result<(), RpcError> {
        let mut sessions = self.sessions();
        if !sessions.contains_key(&session.id) && sessions.len() >= self.opts.max_sessions {
            return Err(self.too_many(method));
        }
        sessions.insert(session.id.clone(), session);
        Ok(())
    }

    fn new_session(&self, params: Value) -> Result<Value, RpcError> {
        let req: SessionNewRequest = parse(params)?;
        let cwd = self.check_cwd(&req.cwd)?;
        Self::check_additional(&req.additional_directories)?;
        // Before the agent is built: a refused session costs nothing.
        self.check_room("session/new", None)?;
        Self::warn_mcp(&req.mcp_servers);
        let session = self.create(uuid::Uuid::new_v4().to_string(), cwd)?;
        let response = SessionNewResponse {
            session_id: session.id.clone(),
            modes: session.modes(),
            config_options: session.config_options(),
        };
        self.keep("session/new", session)?;
        to_value(&response)
    }

    fn load_session(&self, params: Value) -> Result<Value, RpcError> {
        let req: SessionLoadRequest = parse(params)?;
        if self.opts.store.is_some() {
            return self.load_stored(req);
        }
        let Some(dir) = &self.opts.sessions_dir else {
            return Err(RpcError::invalid_params(
                "session/load: this server keeps no session histories (--no-persist)",
            ));
        };
        if !valid_session_id(&req.session_id) {
            return Err(RpcError::invalid_params("session/load: not a session id"));
        }
        let cwd = self.check_cwd(&req.cwd)?;
        Self::check_additional(&req.additional_directories)?;
        self.check_room("session/load", Some(&req.session_id))?;
        Self::warn_mcp(&req.mcp_servers);
        let live = self.sessions().get(&req.session_id).cloned();
        if let Some(old) = live {
            if old.agent().is_busy() {
                return Err(RpcError::new(
                    INVALID_REQUEST,
                    "session/load: that session has a prompt running",
                ));
            }
            // Its last save may still be in flight: save the current history now.
            old.persist(dir)
                .map_err(|e| RpcError::internal(format!("session/load: saving: {e}")))?;
        }
        let path = dir.join(format!("{}.json", req.session_id));
        let missing = || {
            RpcError::invalid_params(format!("session/load: no saved session {}", req.session_id))
        };
        let size = std::fs::metadata(&path).map_err(|_| missing())?.len();
        if size > (self.opts.max_history_bytes + SAVED_FRAME_BYTES) as u64 {
            return Err(RpcError::new(
                INVALID_REQUEST,
                format!(
                    "session/load: the saved session is {size} bytes, over this server's history \
                     limit of {} bytes (--max-history-bytes)",
                    self.opts.max_history_bytes
                ),
            ));
        }
        let text = std::fs::read_to_string(&path).map_err(|_| missing())?;
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| RpcError::internal(format!("session/load: unreadable history: {e}")))?;
        let history = doc
            .get("history")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        let session = self.create(req.session_id.clone(), cwd)?;
        session
            .agent()
            .set_history_json(&history.to_string())
            .map_err(|e| RpcError::internal(format!("session/load: {e}")))?;
        replay(&session, &history);
        let response = SessionLoadResponse {
            config_options: session.config_options(),
        };
        self.keep("session/load", session)?;
        to_value(&response)
    }

    /// Upstream ACP's `session/close`: cancels the session's prompt (it is still answered,
    /// `cancelled`) and forgets the session; its memory goes when that prompt has ended. The
    /// history file stays, so `session/load` can bring it back.
    fn close(&self, params: Value) -> Result<Value, RpcError> {
        let req: SessionIdOnly = parse(params)?;
        let session = self.sessions().remove(&req.session_id).ok_or_else(|| {
            RpcError::invalid_params(format!("Unknown session: {}", req.session_id))
        })?;
        session.agent().cancel_active("session-closed");
        Ok(json!({}))
    }

    /// Upstream ACP's `session/list`: the live sessions and the saved ones, by id, a page at a
    /// time (`cursor` is the last id of the page before).
    fn list(&self, params: Value) -> Result<Value, RpcError> {
        let req: SessionListRequest = parse(params)?;
        let mut known: std::collections::BTreeMap<String, String> = self
            .sessions()
            .values()
            .map(|s| (s.id.clone(), s.cwd.display().to_string()))
            .collect();
        if let Some(dir) = &self.opts.sessions_dir {
            for saved in saved_sessions(dir) {
                known.entry(saved.session_id).or_insert(saved.cwd);
            }
        }
        for stored in self.stored_sessions()? {
            known.entry(stored.session_id).or_insert(stored.cwd);
        }
        let mut sessions = Vec::new();
        let mut next_cursor = None;
        let after = req.cursor.unwrap_or_default();
        for (id, cwd) in known {
            if id <= after
                || req
                    .cwd
                    .as_deref()
                    .is_some_and(|c| Path::new(c) != Path::new(&cwd))
            {
                continue;
            }
            if sessions.len() == LIST_PAGE {
                next_cursor = sessions.last().map(|s: &SessionInfo| s.session_id.clone());
                break;
            }
            sessions.push(SessionInfo {
                session_id: id,
                cwd,
            });
        }
        to_value(&SessionListResponse {
            sessions,
            next_cursor,
        })
    }

    fn cancel(&self, params: Value) -> Result<Value, RpcError> {
        let req: SessionIdOnly = parse(params)?;
        self.session(&req.session_id)?
            .agent()
            .cancel_active(CANCEL_REASON);
        Ok(json!({}))
    }

    fn set_mode(&self, params: Value) -> Result<Value, RpcError> {
        let req: SetModeRequest = parse(params)?;
        if req.mode_id.is_empty() {
            return Err(RpcError::invalid_params("modeId must not be empty"));
        }
        let session = self.session(&req.session_id)?;
        session.set_mode(&req.mode_id)?;
        session
            .transport()
            .update(SessionUpdate::CurrentModeUpdate {
                current_mode_id: &req.mode_id,
            });
        to_value(&SetModeResponse {
            mode_id: req.mode_id,
        })
    }

    fn set_model(&self, params: Value) -> Result<Value, RpcError> {
        let req: SetModelRequest = parse(params)?;
        let positive = |v: Option<i64>, name: &str| -> Result<Option<u64>, RpcError> {
            match v {
                Some(n) if n <= 0 => Err(RpcError::invalid_params(format!(
                    "{name} must be a positive integer"
                ))),
                Some(n) => Ok(Some(n as u64)),
                None => Ok(None),
            }
        };
        let max_tokens = positive(req.max_tokens, "maxTokens")?;
        let context_length = positive(req.context_length, "contextLength")?;
        if req.model.as_deref() == Some("") {
            return Err(RpcError::invalid_params("model must not be empty"));
        }
        if req.model.is_none() && max_tokens.is_none() && context_length.is_none() {
            return Err(RpcError::invalid_params(
                "set one of model, contextLength, maxTokens",
            ));
        }
        let session = self.session(&req.session_id)?;
        session.set_model(req.model.as_deref(), max_tokens, context_length)?;
        to_value(&SetModelResponse {
            model: session.model(),
            context_length: session.context_length(),
            max_tokens: session.max_tokens(),
        })
    }

    fn ext_set_model(&self, params: Value) -> Result<Value, RpcError> {
        let req: ExtSetModelRequest = parse(params)?;
        if req.model.is_empty() {
            return Err(RpcError::invalid_params("model must not be empty"));
        }
        let session = self.session(&req.session_id)?;
        session.set_model(Some(&req.model), None, None)?;
        to_value(&ExtSetModelResponse {
            model: session.model(),
        })
    }

    fn list_models(&self, params: Value) -> Result<Value, RpcError> {
        let req: SessionIdOnly = parse(params)?;
        let session = self.session(&req.session_id)?;
        to_value(&ListModelsResponse {
            models: vec![ModelInfo {
                id: session.model(),
            }],
        })
    }

    fn set_config_option(&self, params: Value) -> Result<Value, RpcError> {
        let req: SetConfigOptionRequest = parse(params)?;
        if let Some(k) = req.other.keys().find(|k| credential_like(k)) {
            return Err(RpcError::invalid_params(format!(
                "session/set_config_option: `{k}` is not taken here; credentials and endpoints \
                 come from the server's configuration only"
            )));
        }
        if req.config_id != "model" {
            return Err(RpcError::invalid_params(format!(
                "unknown configId '{}' (only 'model')",
                req.config_id
            )));
        }
        if req.value.is_empty() {
            return Err(RpcError::invalid_params("value must not be empty"));
        }
        let session = self.session(&req.session_id)?;
        let model = match req.value.split_once('/') {
            Some((provider, model)) => {
                if provider != session.provider() {
                    return Err(RpcError::invalid_params(format!(
                        "provider '{provider}' is not configured (this server runs '{}')",
                        session.provider()
                    )));
                }
                model
            }
            None => req.value.as_str(),
        };
        if model.is_empty() {
            return Err(RpcError::invalid_params("value names no model"));
        }
        session.set_model(Some(model), None, None)?;
        to_value(&SetConfigOptionResponse {
            config_options: session.config_options(),
        })
    }

    fn prompt(&self, id: Value, params: Value) -> Result<(), RpcError> {
        if !self.initialized.load(Ordering::Acquire) {
            return Err(RpcError::new(
                INVALID_REQUEST,
                "initialize must be called first",
            ));
        }
        let req: SessionPromptRequest = parse(params)?;
        let session = self.session(&req.session_id)?;
        let (text, images) = prompt_text(req.prompt)?;
        // Images count as the base64 they are kept as in the history.
        let size = text.len()
            + images
                .iter()
                .map(|i| i.data.len().div_ceil(3) * 4)
                .sum::<usize>();
        if size > self.opts.max_prompt_bytes {
            return Err(RpcError::invalid_params(format!(
                "the prompt is {size} bytes, over this server's limit of {} bytes (--max-prompt-bytes)",
                self.opts.max_prompt_bytes
            )));
        }
        // Checked before the turn, so a session's history (kept in memory and rewritten to its
        // file after every prompt) stops growing at the limit plus one turn's own additions.
        let history = session.agent().history_json().len();
        if history + size > self.opts.max_history_bytes {
            return Err(RpcError::new(
                INVALID_REQUEST,
                format!(
                    "this session's history is {history} bytes; with this prompt ({size} bytes) it \
                     would pass this server's limit of {} bytes (--max-history-bytes): start a \
                     new session",
                    self.opts.max_history_bytes
                ),
            ));
        }
        let out = self.out.clone();
        let dir = self.opts.sessions_dir.clone();
        let keep = session.clone();
        let in_flight = self.in_flight.clone();
        in_flight.fetch_add(1, Ordering::AcqRel);
        let started = session.agent().start_turn(
            text,
            TurnOptions {
                images,
                ..TurnOptions::default()
            },
            DeltaSink::None,
            move |result| {
                let end = prompt_end(result);
                if let Some(text) = &end.notice {
                    keep.transport().notice(text);
                }
                match end.reply {
                    Ok(stop_reason) => out.respond(&id, &PromptResponse { stop_reason }),
                    Err(e) => out.fail(&id, &e),
                }
                // After the response: the save syncs to disk, which can take long on a busy
                // machine, and the client is not kept waiting for it (shutdown still is).
                if let Some(dir) = &dir {
                    if let Err(e) = keep.persist(dir) {
                        eprintln!("agentao-acp: saving session {}: {e}", keep.id);
                    }
                }
                in_flight.fetch_sub(1, Ordering::AcqRel);
            },
        );
        if started.is_err() {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
        match started {
            Ok(_) => Ok(()),
            Err(AgentError::TurnInProgress) => Err(RpcError::new(
                INVALID_REQUEST,
                "a prompt is already running in this session",
            )),
            Err(e) => Err(RpcError::internal(e.to_string())),
        }
    }

    /// Cancels every running prompt, waits up to `grace` for them to end, drops the requests
    /// still waiting for the client, and lets the sessions go (a telemetry exporter's last
    /// posts waited for).
    pub fn shutdown(&self, grace: Duration) {
        let sessions: Vec<Arc<Session>> = self.sessions().values().cloned().collect();
        for s in &sessions {
            s.agent().cancel_active("session-closed");
        }
        self.pending.clear();
        let deadline = Instant::now() + grace;
        // A turn lets go of its agent before its completion has queued the response.
        while self.in_flight.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let exporters: Vec<_> = sessions
            .iter()
            .filter_map(|s| s.agent().telemetry_closing())
            .collect();
        drop(sessions);
        self.sessions().clear();
        // The process exits next: the spans the agents leave go out first (each wait ends at
        // its exporter's timeout).
        for e in exporters {
            e.wait_if_last(true);
        }
    }
}

/// A directory too broad to be a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BroadWorkspace {
    Root,
    Home,
    AboveHome,
}

impl std::fmt::Display for BroadWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BroadWorkspace::Root => "a filesystem root",
            BroadWorkspace::Home => "the home directory",
            BroadWorkspace::AboveHome => "above the home directory",
        })
    }
}

/// Whether `dir` is a filesystem root, the home directory, or a directory above it (resolved,
/// so `/tmp/..` or a link to `/` is seen for what it is).
fn broad_workspace(dir: &Path) -> Option<BroadWorkspace> {
    let dir = std::fs::canonicalize(dir).ok()?;
    if dir.parent().is_none() {
        return Some(BroadWorkspace::Root);
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .and_then(|h| std::fs::canonicalize(h).ok())?;
    if home == dir {
        Some(BroadWorkspace::Home)
    } else if home.starts_with(&dir) {
        Some(BroadWorkspace::AboveHome)
    } else {
        None
    }
}

/// The saved sessions in `dir`, with their cwd: read from the head of each file, where
/// [`Session::persist`] writes it first, so a listing never reads whole histories.
fn saved_sessions(dir: &Path) -> Vec<SessionInfo> {
    use std::io::Read;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if !valid_session_id(id) {
            continue;
        }
        let mut head = Vec::new();
        let read = std::fs::File::open(e.path())
            .and_then(|f| f.take(SAVED_FRAME_BYTES as u64).read_to_end(&mut head));
        if read.is_err() {
            continue;
        }
        if let Some(cwd) = saved_cwd(&head) {
            out.push(SessionInfo {
                session_id: id.to_owned(),
                cwd,
            });
        }
    }
    out
}

/// The `cwd` at the head of a saved session's file.
fn saved_cwd(head: &[u8]) -> Option<String> {
    let rest = head.strip_prefix(b"{\"cwd\":")?;
    let mut de = serde_json::Deserializer::from_slice(rest).into_iter::<String>();
    de.next()?.ok()
}

/// The prompt as the user message: text blocks as they are, resource links as
/// `[Resource: label](uri)`; and its images, decoded and checked (a bad one is `-32602`).
fn prompt_text(blocks: Vec<Value>) -> Result<(String, Vec<ImageInput>), RpcError> {
    let mut parts = Vec::with_capacity(blocks.len());
    let mut images = Vec::new();
    for (i, b) in blocks.into_iter().enumerate() {
        let block: PromptBlock = serde_json::from_value(b)
            .map_err(|e| RpcError::invalid_params(format!("prompt[{i}]: {e}")))?;
        match block {
            PromptBlock::Text { text } => parts.push(text),
            PromptBlock::ResourceLink { uri, name, title } => {
                let label = title.or(name).unwrap_or_else(|| uri.clone());
                parts.push(format!("[Resource: {label}]({uri})"));
            }
            PromptBlock::Image {
                data, mime_type, ..
            } => {
                let data = base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .map_err(|e| {
                        RpcError::invalid_params(format!(
                            "prompt[{i}]: image data is not base64: {e}"
                        ))
                    })?;
                images.push(ImageInput { mime_type, data });
            }
        }
    }
    if parts.is_empty() && images.is_empty() {
        return Err(RpcError::invalid_params("prompt is empty"));
    }
    agentao::llm::image::validate(&images)
        .map_err(|e| RpcError::invalid_params(format!("prompt: {e}")))?;
    Ok((parts.join("\n"), images))
}

/// How a prompt ends on the wire.
struct PromptEnd {
    /// What the turn ended with when it is not a complete answer: the user is told why.
    notice: Option<String>,
    reply: Result<StopReason, RpcError>,
}

fn prompt_end(result: agentao::agent::TurnResult) -> PromptEnd {
    let outcome = match result {
        Ok(o) => o,
        Err((_, Some(o))) if o.status == TurnStatus::Cancelled => o,
        Err((e, _)) => {
            return PromptEnd {
                notice: None,
                reply: Err(RpcError::internal(e.to_string())),
            }
        }
    };
    let stop = match (outcome.status, outcome.incomplete_reason) {
        (TurnStatus::Cancelled, _) => StopReason::Cancelled,
        (TurnStatus::Error, _) => {
            return PromptEnd {
                notice: None,
                reply: Err(RpcError::internal(
                    outcome.error.unwrap_or_else(|| "the turn failed".into()),
                )),
            }
        }
        (TurnStatus::Ok, None) => StopReason::EndTurn,
        // The model server failed (after the retries): a failed request, not a finished turn.
        // ACP clients show an error response as such; the text also stays in the history.
        (TurnStatus::Ok, Some(IncompleteReason::LlmError)) => {
            return PromptEnd {
                reply: Err(RpcError::internal(outcome.text.clone())),
                notice: Some(outcome.text),
            }
        }
        (TurnStatus::Ok, Some(IncompleteReason::MaxIterations)) => StopReason::MaxTurnRequests,
        (TurnStatus::Ok, Some(IncompleteReason::LengthTruncated)) => StopReason::MaxTokens,
        // A doom-loop halt, an empty answer, a hook's stop: the turn did end, and ACP has no
        // closer reason (`refusal` would claim the model refused; clients such as Zed then drop
        // the prompt).
        (
            TurnStatus::Ok,
            Some(
                IncompleteReason::DoomLoop
                | IncompleteReason::NoOutput
                | IncompleteReason::ReasoningOnly
                | IncompleteReason::HookStop,
            ),
        ) => StopReason::EndTurn,
    };
    PromptEnd {
        notice: match stop {
            StopReason::Cancelled => None,
            _ => outcome.incomplete_reason.map(|_| outcome.text),
        },
        reply: Ok(stop),
    }
}

/// Replays a restored history as `session/update` notifications (user and agent messages,
/// tool calls as completed).
fn replay(session: &Session, history: &Value) {
    let Some(messages) = history.as_array() else {
        return;
    };
    let t = session.transport();
    for m in messages {
        let text = m.get("content").and_then(Value::as_str).unwrap_or("");
        match m.get("role").and_then(Value::as_str) {
            Some("user") => {
                let text = strip_reminders(text);
                if !text.is_empty() {
                    t.update(SessionUpdate::UserMessageChunk {
                        content: TextBlock::new(text),
                    });
                }
            }
            Some("assistant") => {
                if !text.is_empty() {
                    t.update(SessionUpdate::AgentMessageChunk {
                        content: TextBlock::new(text),
                    });
                }
                for call in m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let id = call["id"].as_str().unwrap_or_default();
                    let name = call["function"]["name"].as_str().unwrap_or("unknown");
                    let args: serde_json::Map<String, Value> = call["function"]["arguments"]
                        .as_str()
                        .and_then(|a| serde_json::from_str(a).ok())
                        .unwrap_or_default();
                    t.update(SessionUpdate::ToolCall(crate::transport::summary(
                        name,
                        &args,
                        id,
                        ToolCallStatus::Completed,
                        &session.cwd,
                    )));
                }
            }
            _ => {}
        }
    }
}

/// The user's own words: the runtime prefixes `<system-reminder>` blocks to user messages.
fn strip_reminders(mut text: &str) -> &str {
    const CLOSE: &str = "</system-reminder>";
    while text.starts_with("<system-reminder>") {
        match text.find(CLOSE) {
            Some(i) => text = text[i + CLOSE.len()..].trim_start_matches('\n'),
            None => break,
        }
    }
    text
}

pub enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// Reads one `\n`-terminated line into `buf`, never holding more than `max` bytes: a longer
/// line is consumed and reported as `TooLong`.
pub fn read_line_capped(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<LineRead> {
    let mut too_long = false;
    let mut any = false;
    loop {
        let available = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(if !any {
                LineRead::Eof
            } else if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
        any = true;
        let (chunk, done) = match memchr_newline(available) {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let n = chunk.len();
        if !too_long {
            if buf.len() + n > max + 1 {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        input.consume(n);
        if done {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}
