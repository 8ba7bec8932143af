//! Permission rules (spec §3.4): validation of the `permissions.json` rule format and matching
//! of one rule against one tool call.
//!
//! Patterns are written in Python `re` syntax (that is what the reference's users write). They
//! are translated to the `regex` crate (linear-time): `$` keeps Python's meaning (end, or
//! before a final newline), `\Z` becomes `\z`, `\s` includes `\x1c`–`\x1f` as Python's does, a
//! `{` that is not a quantifier is literal. Look-around and back-references have no
//! linear-time equivalent: a user pattern using them is refused when the rule is loaded. Any
//! other pattern that does not compile falls back to string equality, as in the reference.

use std::cell::OnceCell;
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

use super::path_policy;
use crate::pycompat::python_str;

/// What a rule does when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Allow,
    Deny,
    Ask,
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub(crate) enum Pattern {
    /// `"*"` as a tool pattern.
    Any,
    Regex(regex::Regex),
    /// The pattern did not compile: string equality.
    Literal(String),
    /// A preset matcher implemented natively (its pattern text needs look-around).
    Native(fn(&str) -> bool),
}

impl Pattern {
    fn search(&self, value: &str) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Regex(r) => r.is_match(value),
            Pattern::Literal(s) => s == value,
            Pattern::Native(f) => f(value),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct DomainSpec {
    allowlist: Vec<String>,
    blocklist: Vec<String>,
    url_arg: String,
}

/// One validated rule. `raw` is the rule exactly as given (reported in events and snapshots).
#[derive(Debug, Clone)]
pub struct Rule {
    pub(crate) raw: Value,
    pub(crate) tool_field: String,
    tool: Pattern,
    pub(crate) action: Action,
    args: Vec<(String, Pattern)>,
    domain: Option<DomainSpec>,
    dialect: Option<String>,
}

/// The context a rule is matched in.
pub struct CallCtx<'a> {
    pub tool: &'a str,
    pub args: &'a Map<String, Value>,
    /// `Some("posix")` for shell calls; `None` for every other tool.
    pub dialect: Option<&'a str>,
    pub workspace: &'a Path,
    /// [`real_forms`] of `file_path`, resolved once for all the rules a call is matched with
    /// (each resolution walks the path on disk).
    real_path: OnceCell<(String, Option<String>)>,
}

impl<'a> CallCtx<'a> {
    pub fn new(
        tool: &'a str,
        args: &'a Map<String, Value>,
        dialect: Option<&'a str>,
        workspace: &'a Path,
    ) -> Self {
        CallCtx {
            tool,
            args,
            dialect,
            workspace,
            real_path: OnceCell::new(),
        }
    }
}

const RULE_KEYS: &[&str] = &["tool", "action", "args", "domain", "dialect"];
const DOMAIN_KEYS: &[&str] = &["allowlist", "blocklist", "url_arg"];
const DIALECTS: &[&str] = &["posix", "cmd", "powershell", "*"];
const PATH_TOOLS: &[&str] = &["read_file", "write_file", "replace"];

impl Rule {
    /// Validates one rule object (closed key set). Errors name the offending key.
    pub fn parse(v: &Value) -> Result<Rule, String> {
        let obj = v
            .as_object()
            .ok_or_else(|| "must be an object".to_owned())?;
        for k in obj.keys() {
            if !RULE_KEYS.contains(&k.as_str()) {
                return Err(format!("unknown key `{k}`"));
            }
        }
        let tool_field = match obj.get("tool") {
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err("`tool` must be a string".into()),
            None => return Err("missing required key `tool`".into()),
        };
        let action = match obj.get("action") {
            Some(Value::String(s)) => match s.to_lowercase().as_str() {
                "allow" => Action::Allow,
                "deny" => Action::Deny,
                "ask" => Action::Ask,
                _ => return Err(format!("`action` must be allow, deny or ask (got '{s}')")),
            },
            Some(_) => return Err("`action` must be a string".into()),
            None => return Err("missing required key `action`".into()),
        };
        let tool = if tool_field == "*" {
            Pattern::Any
        } else {
            compile_user(&tool_field, true).map_err(|e| format!("`tool`: {e}"))?
        };
        let mut args = Vec::new();
        match obj.get("args") {
            None => {}
            Some(Value::Object(m)) => {
                for (k, p) in m {
                    let Value::String(p) = p else {
                        return Err(format!("`args.{k}` must be a string (a regex)"));
                    };
                    let pat = compile_user(p, false).map_err(|e| format!("`args.{k}`: {e}"))?;
                    args.push((k.clone(), pat));
                }
            }
            Some(_) => return Err("`args` must be an object of regex strings".into()),
        }
        let domain = match obj.get("domain") {
            None => None,
            Some(Value::Object(m)) => {
                for k in m.keys() {
                    if !DOMAIN_KEYS.contains(&k.as_str()) {
                        return Err(format!("unknown key `domain.{k}`"));
                    }
                }
                let list = |key: &str| -> Result<Vec<String>, String> {
                    match m.get(key) {
                        None => Ok(Vec::new()),
                        Some(Value::Array(items)) => items
                            .iter()
                            .map(|i| {
                                i.as_str().map(str::to_lowercase).ok_or_else(|| {
                                    format!("`domain.{key}` must be a list of strings")
                                })
                            })
                            .collect(),
                        Some(_) => Err(format!("`domain.{key}` must be a list of strings")),
                    }
                };
                let url_arg = match m.get("url_arg") {
                    None => "url".to_owned(),
                    Some(Value::String(s)) => s.clone(),
                    Some(_) => return Err("`domain.url_arg` must be a string".into()),
                };
                Some(DomainSpec {
                    allowlist: list("allowlist")?,
                    blocklist: list("blocklist")?,
                    url_arg,
                })
            }
            Some(_) => return Err("`domain` must be an object".into()),
        };
        let dialect = match obj.get("dialect") {
            None => None,
            Some(Value::String(s)) if DIALECTS.contains(&s.as_str()) => Some(s.clone()),
            Some(_) => return Err("`dialect` must be one of posix, cmd, powershell, *".into()),
        };
        Ok(Rule {
            raw: v.clone(),
            tool_field,
            tool,
            action,
            args,
            domain,
            dialect,
        })
    }

    /// A preset rule: `raw` is what snapshots and events show; `args` carry native or
    /// pre-translated matchers.
    pub(crate) fn preset(
        raw: Value,
        args: Vec<(&str, Pattern)>,
        domain: Option<(Vec<&str>, Vec<&str>)>,
    ) -> Rule {
        let tool_field = raw
            .get("tool")
            .and_then(Value::as_str)
            .unwrap_or("*")
            .to_owned();
        let action = match raw.get("action").and_then(Value::as_str) {
            Some("allow") => Action::Allow,
            Some("deny") => Action::Deny,
            _ => Action::Ask,
        };
        let tool = if tool_field == "*" {
            Pattern::Any
        } else {
            Pattern::Literal(tool_field.clone())
        };
        Rule {
            raw,
            tool_field,
            tool,
            action,
            args: args.into_iter().map(|(k, p)| (k.to_owned(), p)).collect(),
            domain: domain.map(|(a, b)| DomainSpec {
                allowlist: a.into_iter().map(str::to_owned).collect(),
                blocklist: b.into_iter().map(str::to_owned).collect(),
                url_arg: "url".to_owned(),
            }),
            dialect: None,
        }
    }

    /// Whether this rule matches the call.
    pub fn matches(&self, call: &CallCtx<'_>) -> bool {
        let tool_ok = match &self.tool {
            Pattern::Regex(r) => r.is_match(call.tool),
            other => other.search(call.tool),
        };
        if !tool_ok {
            return false;
        }
        if let Some(d) = &self.dialect {
            match call.dialect {
                Some(cd) if d == "*" || d == cd => {}
                _ => return false,
            }
        }
        if let Some(spec) = &self.domain {
            let raw = call
                .args
                .get(&spec.url_arg)
                .map(python_str)
                .unwrap_or_default();
            let Some(host) = extract_host(&raw) else {
                return false;
            };
            return domain_in(&host, &spec.allowlist) || domain_in(&host, &spec.blocklist);
        }
        let path_tries = self.action != Action::Allow && PATH_TOOLS.contains(&call.tool);
        for (key, pat) in &self.args {
            let value = call.args.get(key).map(python_str).unwrap_or_default();
            if pat.search(&value) {
                continue;
            }
            if path_tries && key == "file_path" {
                let (abs, rel) = resolve_forms(&value, call.workspace);
                if pat.search(&abs) || rel.as_deref().is_some_and(|r| pat.search(r)) {
                    continue;
                }
                // The file the write would reach: a checkout's `meta -> .git` or
                // `settings.txt -> .env` must not spell its way past an ask or deny rule.
                let (real_abs, real_rel) = call
                    .real_path
                    .get_or_init(|| real_forms(&value, call.workspace));
                if *real_abs != abs
                    && (pat.search(real_abs) || real_rel.as_deref().is_some_and(|r| pat.search(r)))
                {
                    continue;
                }
            }
            return false;
        }
        true
    }
}

fn domain_in(host: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| {
        if let Some(bare) = p.strip_prefix('.') {
            host == bare || host.ends_with(p.as_str())
        } else {
            host == p
        }
    })
}

/// The host name of a URL as Python's `urlparse(url).hostname` gives it (`https://` assumed
/// without a scheme): lowercased, without port or userinfo. `None` when there is none.
pub(crate) fn extract_host(url: &str) -> Option<String> {
    if url.is_empty() {
        return None;
    }
    let owned;
    let url = if url.contains("://") {
        url
    } else {
        owned = format!("https://{url}");
        &owned
    };
    // Python strips these before parsing.
    let url: String = url
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|&c| c != '\t' && c != '\r' && c != '\n')
        .collect();
    let rest = match url.find(':') {
        Some(i)
            if i > 0
                && url[..i].starts_with(|c: char| c.is_ascii_alphabetic())
                && url[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            &url[i + 1..]
        }
        _ => url.as_str(),
    };
    let netloc_full = rest.strip_prefix("//")?;
    let end = netloc_full
        .find(['/', '?', '#'])
        .unwrap_or(netloc_full.len());
    let netloc = &netloc_full[..end];
    let hostport = match netloc.rfind('@') {
        Some(i) => &netloc[i + 1..],
        None => netloc,
    };
    let host = if let Some(inner) = hostport.strip_prefix('[') {
        inner.split(']').next().unwrap_or("")
    } else {
        if netloc.contains('[') != netloc.contains(']') {
            return None; // Python: "Invalid IPv6 URL"
        }
        hostport.split(':').next().unwrap_or("")
    };
    if host.is_empty() {
        None
    } else {
        Some(host.to_lowercase())
    }
}

/// The resolved absolute path (lexical) and, when inside the workspace, the POSIX path
/// relative to it.
pub(crate) fn resolve_forms(raw: &str, workspace: &Path) -> (String, Option<String>) {
    let joined: PathBuf = if Path::new(raw).is_absolute() {
        PathBuf::from(raw)
    } else {
        workspace.join(raw)
    };
    let abs = lexical_normalize(&joined);
    let root = lexical_normalize(workspace);
    let rel = abs.strip_prefix(&root).ok().map(|r| {
        let s = r
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        if s.is_empty() {
            ".".to_owned()
        } else {
            s
        }
    });
    (abs.to_string_lossy().into_owned(), rel)
}

/// [`resolve_forms`] of the path with every existing symlink followed (the workspace's own
/// links included), relative to the resolved workspace.
fn real_forms(raw: &str, workspace: &Path) -> (String, Option<String>) {
    if raw.contains('\0') {
        return resolve_forms(raw, workspace);
    }
    let real = path_policy::resolve(&path_policy::join_to_root(workspace, raw));
    let root = path_policy::resolve(workspace);
    resolve_forms(&real.to_string_lossy(), &root)
}

fn lexical_normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("/");
                }
                if out.as_os_str().is_empty() {
                    out.push("/");
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Python `re` → `regex` translation
// ---------------------------------------------------------------------------------------------

/// Python features with no linear-time equivalent.
fn uses_lookaround_or_backref(p: &str) -> bool {
    let b = p.as_bytes();
    let mut i = 0;
    let mut in_class = false;
    while i < b.len() {
        match b[i] {
            b'\\' => {
                if !in_class && i + 1 < b.len() && (b'1'..=b'9').contains(&b[i + 1]) {
                    return true;
                }
                i += 2;
                continue;
            }
            b'[' if !in_class => in_class = true,
            b']' if in_class => in_class = false,
            b'(' if !in_class => {
                let rest = &p[i..];
                if rest.starts_with("(?=")
                    || rest.starts_with("(?!")
                    || rest.starts_with("(?<=")
                    || rest.starts_with("(?<!")
                    || rest.starts_with("(?P=")
                {
                    return true;
                }
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// Translates a Python pattern into `regex` syntax (see the module docs).
pub(crate) fn translate(p: &str) -> String {
    let chars: Vec<char> = p.chars().collect();
    let n = chars.len();
    let mut out = String::with_capacity(p.len() + 16);
    let mut i = 0;
    let mut in_class = false;
    let mut class_start = 0;
    while i < n {
        let c = chars[i];
        if c == '\\' && i + 1 < n {
            let d = chars[i + 1];
            match (in_class, d) {
                (false, 'Z') => out.push_str(r"\z"),
                (false, 's') => out.push_str(r"[\s\x1c-\x1f]"),
                (false, 'S') => out.push_str(r"[^\s\x1c-\x1f]"),
                (true, 's') => out.push_str(r"\s\x1c-\x1f"),
                _ => {
                    out.push('\\');
                    out.push(d);
                }
            }
            i += 2;
            continue;
        }
        if in_class {
            match c {
                ']' if i > class_start => {
                    in_class = false;
                    out.push(']');
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                '-' if i + 1 < n && chars[i + 1] == '-' => out.push_str(r"\-"),
                _ => out.push(c),
            }
            i += 1;
            continue;
        }
        match c {
            '[' => {
                in_class = true;
                out.push('[');
                i += 1;
                if i < n && chars[i] == '^' {
                    out.push('^');
                    i += 1;
                }
                class_start = i;
                if i < n && chars[i] == ']' {
                    out.push_str(r"\]");
                    i += 1;
                }
                continue;
            }
            '$' => out.push_str(r"(?:\n?\z)"),
            '{' => {
                // A quantifier {m}, {m,}, {m,n} or {,n}; anything else is literal.
                let mut j = i + 1;
                let mut lo = String::new();
                while j < n && chars[j].is_ascii_digit() {
                    lo.push(chars[j]);
                    j += 1;
                }
                let mut hi: Option<String> = None;
                if j < n && chars[j] == ',' {
                    let mut h = String::new();
                    j += 1;
                    while j < n && chars[j].is_ascii_digit() {
                        h.push(chars[j]);
                        j += 1;
                    }
                    hi = Some(h);
                }
                let valid = j < n && chars[j] == '}' && !(lo.is_empty() && hi.is_none());
                if valid && i > 0 {
                    let lo = if lo.is_empty() { "0".to_owned() } else { lo };
                    match hi {
                        None => out.push_str(&format!("{{{lo}}}")),
                        Some(h) => out.push_str(&format!("{{{lo},{h}}}")),
                    }
                    i = j + 1;
                    continue;
                }
                out.push_str(r"\{");
            }
            '}' => out.push_str(r"\}"),
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

fn build(src: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(src)
        .size_limit(16 * (1 << 20))
        .build()
}

/// Compiles a user pattern: `fullmatch` for tools, `search` for args.
pub(crate) fn compile_user(p: &str, full: bool) -> Result<Pattern, String> {
    if uses_lookaround_or_backref(p) {
        return Err(format!(
            "pattern '{p}' uses look-around or a back-reference, which this runtime does not support"
        ));
    }
    let t = translate(p);
    let src = if full { format!(r"\A(?:{t})\z") } else { t };
    Ok(match build(&src) {
        Ok(r) => Pattern::Regex(r),
        Err(_) => Pattern::Literal(p.to_owned()),
    })
}

/// Compiles a preset pattern (known to translate).
pub(crate) fn compile_preset(p: &str) -> Pattern {
    match build(&translate(p)) {
        Ok(r) => Pattern::Regex(r),
        Err(_) => Pattern::Literal(p.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        assert_eq!(
            extract_host("https://API.GitHub.com:443/x").as_deref(),
            Some("api.github.com")
        );
        assert_eq!(extract_host("github.com/x").as_deref(), Some("github.com"));
        assert_eq!(extract_host("http://u:p@h:1/").as_deref(), Some("h"));
        assert_eq!(extract_host("http://[::1]:8080/").as_deref(), Some("::1"));
        assert_eq!(extract_host(""), None);
    }

    #[test]
    fn translation() {
        let p = compile_user("^git ", false).unwrap();
        assert!(p.search("git push"));
        let p = compile_user("a$", false).unwrap();
        assert!(p.search("xa\n"));
        assert!(!p.search("xa\nb"));
        let p = compile_user("x{", false).unwrap();
        assert!(p.search("x{"));
        assert!(compile_user("(?=x)", false).is_err());
        // does not compile anywhere: string equality
        let p = compile_user("(", false).unwrap();
        assert!(p.search("("));
    }
}
