//! Command line and config file: what every session's agent is built from.

use std::path::PathBuf;

use agentao::permissions::Mode;
use serde_json::{json, Value};

pub const USAGE: &str = "\
agentao-acp: the agentao agent as an ACP (Agent Client Protocol) server on stdio.

Usage: agentao-acp [OPTIONS]

An ACP client (an editor such as Zed, or any program using an ACP SDK) starts this program and
speaks JSON-RPC 2.0 over its stdin/stdout, one message per line. Logs go to stderr.

Options:
  --config FILE        A JSON agent config (the library's format, docs/config.md) without
                       `working_directory`: each session works in the `cwd` its client sends.
  --provider NAME      `openai` (any OpenAI-compatible server, Chat Completions), `anthropic`
                       (Messages API), `openai-responses` (Responses API) or `scripted` (offline
                       test double)
  --model NAME         The model (else $OPENAI_MODEL; anthropic: $ANTHROPIC_MODEL)
  --base-url URL       The server's base URL (else $OPENAI_BASE_URL; anthropic:
                       $ANTHROPIC_BASE_URL, default https://api.anthropic.com)
  --api-key-env VAR    Read the API key from this environment variable (default: $OPENAI_API_KEY;
                       anthropic: $ANTHROPIC_API_KEY; keys are never taken from the command line)
  --script FILE        The scripted provider's script (JSON; implies --provider scripted)
  --mode MODE          Initial permission mode of new sessions: read-only, workspace-write
                       (default), full-access or plan
  --max-iterations N   LLM calls per prompt before the turn stops (default 100)
  --sessions-dir DIR   Where session histories are kept for session/load
                       (default: $XDG_STATE_HOME/agentao-acp/sessions or
                       ~/.local/state/agentao-acp/sessions)
  --no-persist         Keep no history files (session/load is then not offered)
  --store URL          Keep sessions in a session store instead of history files:
                       sqlite:PATH (one database file) or postgres://... (a build with the
                       `postgres` feature). Every turn is committed; session/load and
                       session/list read the store, so several server processes share sessions
  --max-sessions N     Live sessions at once (default 256); past it session/new and
                       session/load are refused until the client frees one with session/close
  --max-prompt-bytes N A prompt's text at most (default 1048576); a longer one is refused
  --max-history-bytes N  A session's history at most, in memory and saved (default 8388608);
                       past it the session's prompts are refused: start a new session
  --allow-broad-cwd    Accept a filesystem root, the home directory or a directory above it
                       as a session's cwd (refused by default: the whole of it becomes the
                       workspace the agent may edit)
  --help               This text
  --version            The version

Flags override the config file. Example (Zed, settings.json):
  \"agent_servers\": {\"agentao\": {\"command\": \"agentao-acp\",
      \"args\": [\"--model\", \"gpt-4o-mini\", \"--base-url\", \"https://api.example/v1\"],
      \"env\": {\"OPENAI_API_KEY\": \"...\"}}}
";

/// The server's settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// The agent config without `working_directory`.
    pub template: Value,
    pub mode: Mode,
    pub sessions_dir: Option<PathBuf>,
    /// Live sessions at once: each holds an agent (about 100 KB before any history).
    pub max_sessions: usize,
    /// A prompt's text at most, in bytes.
    pub max_prompt_bytes: usize,
    /// A session's history at most, in bytes of its JSON (in memory and in its file).
    pub max_history_bytes: usize,
    /// Whether a root, the home directory or one above it may be a session's cwd.
    pub allow_broad_cwd: bool,
    /// `--store`: the session store every session commits to (then `sessions_dir` is `None`).
    pub store: Option<String>,
}

/// The tenant the server's sessions are recorded under in a store, unless the config names one.
pub const STORE_TENANT: &str = "agentao-acp";

/// The default of `--max-sessions`.
pub const DEFAULT_MAX_SESSIONS: usize = 256;
/// The default of `--max-prompt-bytes`: far above anything typed, well below what a session
/// can keep many of.
pub const DEFAULT_MAX_PROMPT_BYTES: usize = 1024 * 1024;
/// The default of `--max-history-bytes`.
pub const DEFAULT_MAX_HISTORY_BYTES: usize = 8 * 1024 * 1024;

fn positive(flag: &str, v: &str) -> Result<usize, String> {
    v.parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{flag}: not a positive integer: '{v}'"))
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    Serve(Options),
    Help,
    Version,
}

fn read_json(path: &str, what: &str) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{what} '{path}': {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{what} '{path}': {e}"))
}

fn default_sessions_dir() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(state.join("agentao-acp").join("sessions"))
}

/// Parses the arguments (without the program name).
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let mut args = args.into_iter();
    let mut config: Option<Value> = None;
    let mut provider: Option<String> = None;
    let mut model = None;
    let mut base_url = None;
    let mut key_env = None;
    let mut script = None;
    let mut mode: Option<Mode> = None;
    let mut max_iterations: Option<u32> = None;
    let mut sessions_dir = default_sessions_dir();
    let mut max_sessions = DEFAULT_MAX_SESSIONS;
    let mut max_prompt_bytes = DEFAULT_MAX_PROMPT_BYTES;
    let mut max_history_bytes = DEFAULT_MAX_HISTORY_BYTES;
    let mut allow_broad_cwd = false;
    let mut store: Option<String> = None;
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = || -> Result<String, String> {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--version" | "-V" => return Ok(Command::Version),
            "--config" => config = Some(read_json(&value()?, "config file")?),
            "--provider" => provider = Some(value()?),
            "--model" => model = Some(value()?),
            "--base-url" => base_url = Some(value()?),
            "--api-key-env" => key_env = Some(value()?),
            "--script" => script = Some(read_json(&value()?, "script file")?),
            "--mode" => {
                let v = value()?;
                mode = Some(Mode::parse(&v).ok_or_else(|| {
                    format!("--mode: unknown mode '{v}' (read-only, workspace-write, full-access, plan)")
                })?);
            }
            "--max-iterations" => {
                let v = value()?;
                max_iterations =
                    Some(v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        format!("--max-iterations: not a positive integer: '{v}'")
                    })?);
            }
            "--max-sessions" => {
                let v = value()?;
                max_sessions = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("--max-sessions: not a positive integer: '{v}'"))?;
            }
            "--max-prompt-bytes" => max_prompt_bytes = positive(&flag, &value()?)?,
            "--max-history-bytes" => max_history_bytes = positive(&flag, &value()?)?,
            "--allow-broad-cwd" => allow_broad_cwd = true,
            "--sessions-dir" => sessions_dir = Some(PathBuf::from(value()?)),
            "--no-persist" => sessions_dir = None,
            "--store" => store = Some(value()?),
            other => return Err(format!("unknown argument '{other}' (see --help)")),
        }
    }
    let mut template = config.unwrap_or_else(|| json!({}));
    let Some(obj) = template.as_object_mut() else {
        return Err("config file: must be a JSON object".into());
    };
    if let Some(url) = &store {
        // The store replaces the history files.
        sessions_dir = None;
        let section = obj.entry("session").or_insert_with(|| json!({}));
        let Some(section) = section.as_object_mut() else {
            return Err("config field `session`: must be an object".into());
        };
        section.insert("store".into(), json!(url));
        section
            .entry("tenant")
            .or_insert_with(|| json!(STORE_TENANT));
    }
    if obj.remove("working_directory").is_some() {
        eprintln!("agentao-acp: config `working_directory` ignored: each session uses its cwd");
    }
    let llm = obj.entry("llm").or_insert_with(|| json!({}));
    if !llm.is_object() {
        return Err("config field `llm`: must be an object".into());
    }
    if script.is_some() && provider.is_none() {
        provider = Some("scripted".into());
    }
    if let Some(p) = provider {
        llm["provider"] = json!(p);
    }
    if let Some(s) = script {
        llm["script"] = s;
    }
    if let Some(m) = model {
        if llm["provider"] == "scripted" {
            if let Some(s) = llm.get_mut("script").and_then(Value::as_object_mut) {
                s.insert("model".into(), json!(m));
            }
        } else {
            llm["model"] = json!(m);
        }
    }
    if let Some(u) = base_url {
        llm["base_url"] = json!(u);
    }
    if let Some(var) = key_env {
        let key = std::env::var(&var)
            .map_err(|_| format!("--api-key-env: environment variable {var} is not set"))?;
        llm["api_key"] = json!(key);
    }
    if let Some(n) = max_iterations {
        obj.insert("max_iterations".into(), json!(n));
    }
    let mode = mode
        .or_else(|| {
            obj.get("permissions")
                .and_then(|p| p.get("mode"))
                .and_then(Value::as_str)
                .and_then(Mode::parse)
        })
        .unwrap_or(Mode::WorkspaceWrite);
    // The ACP modes are permission modes, so every session has an engine. Plan mode cannot be
    // configured (the library refuses it), so it is switched to after construction.
    let config_mode = if mode == Mode::Plan {
        Mode::WorkspaceWrite
    } else {
        mode
    };
    match obj.get_mut("permissions") {
        Some(Value::Object(p)) => {
            p.insert("mode".into(), json!(config_mode.as_str()));
        }
        _ => {
            obj.insert("permissions".into(), json!({"mode": config_mode.as_str()}));
        }
    }
    Ok(Command::Serve(Options {
        template,
        mode,
        sessions_dir,
        max_sessions,
        max_prompt_bytes,
        max_history_bytes,
        allow_broad_cwd,
        store,
    }))
}
