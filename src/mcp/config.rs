//! `mcp_servers`: one typed [`ServerConfig`] per server, with the reference's keys and rules
//! (`agentao/mcp/config.py`): the transport is `type` (alias-folded) or inferred from `command`
//! / `url`; `$VAR` and `${VAR}` expand in `env`, `args` and `headers`; `timeout` is seconds as
//! a number (startup) or `{startup, request}`; an unusable timeout falls back to the default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::limits::ToolListLimits;

/// The reference's default bound on connecting and listing a server's tools.
pub(crate) const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How the agent reaches one server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TransportConfig {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP (the default for a `url` server).
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// One server, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub(crate) transport: TransportConfig,
    /// Bounds spawning (or the first request), `initialize` and the whole `tools/list` walk.
    pub(crate) startup_timeout: Duration,
    /// Bounds each tool call and resource request; `None`: unbounded, as in the reference.
    pub(crate) request_timeout: Option<Duration>,
    /// Trusted servers' annotations are honoured (spec §8.1); untrusted tools always confirm.
    pub(crate) trust: bool,
    /// `false` hides the server from the generic resource tools.
    pub(crate) resources: bool,
    /// The agent's `mcp_limits`, the same for every server.
    pub(crate) list_limits: ToolListLimits,
}

impl ServerConfig {
    /// `stdio` / `http`, as the status JSON reports it.
    pub(crate) fn transport_name(&self) -> &'static str {
        match self.transport {
            TransportConfig::Stdio { .. } => "stdio",
            TransportConfig::Http { .. } => "http",
        }
    }
}

/// Where `$VAR` values come from (a trait so tests need not touch the process environment).
pub trait VarSource {
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessVars;

impl VarSource for ProcessVars {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

/// Replaces `$VAR` and `${VAR}`; an unset variable becomes `""` and its name goes to `missing`
/// (with `empty_is_missing`, a variable set to `""` too).
pub(crate) fn expand_vars(
    value: &str,
    vars: &dyn VarSource,
    missing: &mut Vec<String>,
    empty_is_missing: bool,
) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) if end > 0 => (&braced[..end], end + 2),
                _ => ("", 0),
            }
        } else {
            let len = after
                .char_indices()
                .find(|&(j, c)| {
                    !(c == '_' || c.is_ascii_alphabetic() || (j > 0 && c.is_ascii_digit()))
                })
                .map_or(after.len(), |(j, _)| j);
            (&after[..len], len)
        };
        if consumed == 0 {
            out.push('$');
            rest = after;
            continue;
        }
        let found = vars.var(name);
        if found.is_none() || (empty_is_missing && found.as_deref() == Some("")) {
            missing.push(name.to_owned());
        }
        out.push_str(found.as_deref().unwrap_or(""));
        rest = &after[consumed..];
    }
    out.push_str(rest);
    out
}

fn err(server: &str, key: &str, why: impl std::fmt::Display) -> String {
    if key.is_empty() {
        format!("MCP server '{server}': {why}")
    } else {
        format!("MCP server '{server}': `{key}` {why}")
    }
}

fn string_map(
    server: &str,
    key: &str,
    v: Option<&Value>,
) -> Result<BTreeMap<String, String>, String> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(BTreeMap::new());
    };
    let obj = v
        .as_object()
        .ok_or_else(|| err(server, key, "must be an object of strings"))?;
    obj.iter()
        .map(|(k, v)| match v.as_str() {
            Some(s) => Ok((k.clone(), s.to_owned())),
            None => Err(err(server, &format!("{key}.{k}"), "must be a string")),
        })
        .collect()
}

fn positive_secs(v: &Value) -> Option<Duration> {
    // JSON booleans are not numbers here, unlike Python's `True == 1`.
    let f = v.as_f64()?;
    (f > 0.0 && f.is_finite() && f <= 1e9).then(|| Duration::from_secs_f64(f))
}

/// `(startup, request)` from `timeout`; never fails (the reference logs and falls back).
pub(crate) fn resolve_timeouts(raw: Option<&Value>) -> (Duration, Option<Duration>) {
    match raw {
        None | Some(Value::Null) => (DEFAULT_STARTUP_TIMEOUT, None),
        Some(Value::Object(o)) => (
            o.get("startup")
                .and_then(positive_secs)
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT),
            o.get("request").and_then(positive_secs),
        ),
        Some(v) => (positive_secs(v).unwrap_or(DEFAULT_STARTUP_TIMEOUT), None),
    }
}

const KNOWN_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "oauth",
    "timeout",
    "trust",
    "resources",
    "skills",
];

/// Validates one server's JSON. `workspace` resolves a relative `cwd`.
pub fn parse_server(
    name: &str,
    v: &Value,
    workspace: &Path,
    vars: &dyn VarSource,
) -> Result<ServerConfig, String> {
    if name.is_empty() {
        return Err("MCP server names must not be empty".into());
    }
    let o: &Map<String, Value> = v
        .as_object()
        .ok_or_else(|| err(name, "", "must be an object"))?;
    if let Some(k) = o.keys().find(|k| !KNOWN_KEYS.contains(&k.as_str())) {
        return Err(err(
            name,
            k,
            format!("is not a known key (known: {})", KNOWN_KEYS.join(", ")),
        ));
    }
    let str_key = |key: &str| -> Result<Option<String>, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(err(name, key, "must be a string")),
        }
    };
    let bool_key = |key: &str, default: bool| -> Result<bool, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(err(name, key, "must be a boolean")),
        }
    };
    let command = str_key("command")?.filter(|s| !s.is_empty());
    let url = str_key("url")?.filter(|s| !s.is_empty());
    let transport = match str_key("type")? {
        Some(t) => match t.trim().to_ascii_lowercase().as_str() {
            "stdio" => "stdio",
            "http" | "streamable-http" | "streamable_http" | "streamablehttp" => "http",
            "sse" => "sse",
            _ => {
                return Err(err(
                    name,
                    "type",
                    format!(
                        "'{t}' is not a known transport (stdio, http, sse; aliases: \
                         streamable-http / streamable_http -> http)"
                    ),
                ))
            }
        },
        None if command.is_some() => "stdio",
        None if url.is_some() => "http",
        None => {
            return Err(err(
                name,
                "",
                "no transport configured (set `command` or `url`)",
            ))
        }
    };
    if bool_key("skills", false)? {
        return Err(err(
            name,
            "skills",
            "true is not supported (MCP Skills are not implemented)",
        ));
    }
    match o.get("oauth") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(_) => {
            return Err(err(
                name,
                "oauth",
                "is not supported: OAuth logins are not implemented (set an `Authorization` \
                 header, or `\"oauth\": false`)",
            ))
        }
    }
    let mut missing = Vec::new();
    let transport = match transport {
        "stdio" => {
            let command = command
                .ok_or_else(|| err(name, "", "transport 'stdio' requires a 'command' field"))?;
            let args = match o.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|x| {
                        x.as_str()
                            .map(|s| expand_vars(s, vars, &mut missing, false))
                            .ok_or_else(|| err(name, "args", "must be a list of strings"))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(err(name, "args", "must be a list of strings")),
            };
            let env = string_map(name, "env", o.get("env"))?
                .into_iter()
                .map(|(k, v)| {
                    let v = expand_vars(&v, vars, &mut missing, false);
                    (k, v)
                })
                .collect();
            let cwd = str_key("cwd")?.map(|c| crate::tools::resolve_path(workspace, &c));
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            }
        }
        "sse" => {
            return Err(err(
                name,
                "type",
                "'sse' (the legacy HTTP+SSE transport) is not supported: use Streamable HTTP \
                 (`\"type\": \"http\"`)",
            ))
        }
        _ => {
            let url =
                url.ok_or_else(|| err(name, "", "transport 'http' requires a 'url' field"))?;
            let mut unset = Vec::new();
            let headers = string_map(name, "headers", o.get("headers"))?
                .into_iter()
                .map(|(k, v)| {
                    let v = expand_vars(&v, vars, &mut unset, true);
                    (k, v)
                })
                .collect();
            if !unset.is_empty() {
                unset.sort();
                unset.dedup();
                // An empty credential would go out as `Bearer ` and fail as a plain 401.
                return Err(err(
                    name,
                    "headers",
                    format!(
                        "uses environment variable(s) {} that are not set or empty",
                        unset.join(", ")
                    ),
                ));
            }
            TransportConfig::Http { url, headers }
        }
    };
    let (startup_timeout, request_timeout) = resolve_timeouts(o.get("timeout"));
    Ok(ServerConfig {
        transport,
        startup_timeout,
        request_timeout,
        trust: bool_key("trust", false)?,
        resources: bool_key("resources", true)?,
        list_limits: ToolListLimits::default(),
    })
}

/// Which `mcp.json` files the agent reads (none unless the config names them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ConfigFiles {
    pub(crate) workspace: bool,
    pub(crate) home: bool,
}

impl ConfigFiles {
    /// `mcp_config_files`: a list of `"workspace"` and `"home"`.
    pub(crate) fn parse(v: Option<&Value>) -> Result<Self, String> {
        let mut out = ConfigFiles::default();
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(out);
        };
        let bad = || {
            "config field `mcp_config_files`: must be a list of \"workspace\" and \"home\""
                .to_owned()
        };
        for item in v.as_array().ok_or_else(bad)? {
            match item.as_str() {
                Some("workspace") => out.workspace = true,
                Some("home") => out.home = true,
                _ => return Err(bad()),
            }
        }
        Ok(out)
    }

    /// The `mcpServers` of the files asked for, home first so the workspace's win by name
    /// (the reference's order). A missing file is no error; an unreadable one is.
    pub(crate) fn read(&self, workspace: &Path) -> Result<Map<String, Value>, String> {
        let mut out = Map::new();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let paths = [
            (self.home, home.map(|h| h.join(".agentao/mcp.json"))),
            (self.workspace, Some(workspace.join(".agentao/mcp.json"))),
        ];
        for (wanted, path) in paths {
            let (true, Some(path)) = (wanted, path) else {
                continue;
            };
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("{}: {e}", path.display())),
            };
            let doc: Value =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            match doc.get("mcpServers") {
                None | Some(Value::Null) => {}
                Some(Value::Object(servers)) => out.extend(servers.clone()),
                Some(_) => {
                    return Err(format!(
                        "{}: `mcpServers` must be an object",
                        path.display()
                    ))
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Vars;
    impl VarSource for Vars {
        fn var(&self, name: &str) -> Option<String> {
            match name {
                "HOME_DIR" => Some("/home/u".into()),
                "EMPTY" => Some(String::new()),
                _ => None,
            }
        }
    }

    #[test]
    fn expands_both_spellings_and_reports_unset() {
        let mut missing = Vec::new();
        let s = expand_vars(
            "$HOME_DIR/x ${HOME_DIR}y $NOPE $ ${ $1",
            &Vars,
            &mut missing,
            false,
        );
        assert_eq!(s, "/home/u/x /home/uy  $ ${ $1");
        assert_eq!(missing, vec!["NOPE"]);
    }

    #[test]
    fn transport_is_inferred_or_alias_folded_and_fails_closed() {
        let ws = Path::new("/w");
        let c = parse_server(
            "a",
            &json!({"command": "x", "args": ["$HOME_DIR"], "cwd": "sub"}),
            ws,
            &Vars,
        )
        .unwrap();
        assert_eq!(
            c.transport,
            TransportConfig::Stdio {
                command: "x".into(),
                args: vec!["/home/u".into()],
                env: BTreeMap::new(),
                cwd: Some(PathBuf::from("/w/sub"))
            }
        );
        let c = parse_server("a", &json!({"url": "http://h/mcp"}), ws, &Vars).unwrap();
        assert_eq!(c.transport_name(), "http");
        let c = parse_server(
            "a",
            &json!({"type": "Streamable-HTTP", "url": "http://h"}),
            ws,
            &Vars,
        )
        .unwrap();
        assert_eq!(c.transport_name(), "http");
        let e = parse_server("a", &json!({"type": "http", "command": "x"}), ws, &Vars).unwrap_err();
        assert!(e.contains("requires a 'url'"), "{e}");
        let e =
            parse_server("a", &json!({"type": "websocket", "url": "x"}), ws, &Vars).unwrap_err();
        assert!(e.contains("not a known transport"), "{e}");
        let e = parse_server("a", &json!({"command": "x", "comand": "y"}), ws, &Vars).unwrap_err();
        assert!(e.contains("`comand` is not a known key"), "{e}");
        let e = parse_server(
            "a",
            &json!({"url": "x", "headers": {"Authorization": "Bearer $EMPTY"}}),
            ws,
            &Vars,
        )
        .unwrap_err();
        assert!(e.contains("EMPTY"), "{e}");
    }

    #[test]
    fn timeouts_follow_the_reference() {
        let d = DEFAULT_STARTUP_TIMEOUT;
        assert_eq!(resolve_timeouts(None), (d, None));
        assert_eq!(
            resolve_timeouts(Some(&json!(5))),
            (Duration::from_secs(5), None)
        );
        assert_eq!(resolve_timeouts(Some(&json!(-1))), (d, None));
        assert_eq!(resolve_timeouts(Some(&json!(true))), (d, None));
        assert_eq!(
            resolve_timeouts(Some(&json!({"request": 2.5}))),
            (d, Some(Duration::from_millis(2500)))
        );
        assert_eq!(
            resolve_timeouts(Some(&json!({"startup": 1, "request": 0}))),
            (Duration::from_secs(1), None)
        );
    }
}
