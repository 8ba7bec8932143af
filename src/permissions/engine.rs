//! The permission engine: a mode, its preset rules, user rules, run-scope rules, the hardline
//! floor, and the cached snapshot (spec §3.1, §3.4, §3.5).
//!
//! Evaluation order of [`PermissionEngine::decide_detail`]:
//! 1. the hardline floor (`run_shell_command` only, unless disabled);
//! 2. run-scope deny rules (`add_run_rules(deny=…)`);
//! 3. the rule lists, first match wins:
//!    - `workspace-write`, `read-only`: user rules, then the preset;
//!    - `plan`: the preset, then user rules;
//!    - `full-access`: the first matching user rule if it is a **deny** (deviation from the
//!      reference, see docs/deviations.md), otherwise the allow-everything preset.
//!
//! The engine starts no process: where git's repository lies (a read-only git command) is a
//! [`Probe`] its caller answers (see `probe`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Map, Value};

use super::config::PermissionsConfig;
use super::presets::{preset_rules, READ_ONLY_SHELL};
use super::probe::{Probe, ProbeAnswer, Probed, Probing};
use super::rules::{Action, CallCtx, Rule};
use super::{hardline, path_policy, shell_reads, ActivePermissions, Mode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineAction {
    Allow,
    Deny,
    Ask,
}

#[derive(Debug, Clone)]
pub struct EngineMatch {
    pub action: EngineAction,
    /// The matched rule as it stands in the rules; `None` for the hardline floor.
    pub rule: Option<Value>,
    pub reason: String,
}

/// The source label of the `web_fetch_domains` rules.
const WEB_DOMAINS_SOURCE: &str = "web_fetch_domains";

/// A permissions file larger than this is refused (real ones are a few KiB).
const MAX_RULES_FILE: u64 = 4 << 20;
/// Top-level keys of a permissions file (closed set).
const FILE_KEYS: &[&str] = &["rules", "shell"];

#[derive(Debug)]
pub struct PermissionEngine {
    mode: Mode,
    workspace: PathBuf,
    presets: Vec<Rule>,
    /// File rules, inline config rules, host-injected rules, then run-scope allow rules.
    user_rules: Vec<Rule>,
    /// Run-scope deny rules with their source name.
    run_deny: Vec<(Rule, String)>,
    /// `user:<path>` and `injected:<name>` labels, in order, deduplicated.
    sources: Vec<String>,
    hardline: bool,
    /// `web_fetch_domains`: an allow rule for the listed hosts, then `web_fetch` → ask;
    /// evaluated just before the preset (see `decide_detail`).
    web_domains: Vec<Rule>,
    /// `tools.allow_reads_outside_workspace`: when false, an auto-allowed read-only shell
    /// command with an operand outside the workspace is asked instead.
    outside_reads: bool,
    cache: Mutex<Option<ActivePermissions>>,
    /// What hosts added after construction, in order: a resumed session replays it onto the
    /// engine its config builds.
    added: Vec<AddedRules>,
}

/// Rules or a source label added to an engine after its config built it (host-injected rules,
/// run-scope rules, remembered approvals), as a session document keeps them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AddedRules {
    /// [`PermissionEngine::add_rules`].
    Rules { rules: Value, source: String },
    /// [`PermissionEngine::add_run_rules`].
    Run {
        allow: Value,
        deny: Value,
        source: String,
    },
    /// [`PermissionEngine::add_loaded_source`] on its own.
    Source { label: String },
}

impl Clone for PermissionEngine {
    fn clone(&self) -> Self {
        PermissionEngine {
            mode: self.mode,
            workspace: self.workspace.clone(),
            presets: self.presets.clone(),
            user_rules: self.user_rules.clone(),
            run_deny: self.run_deny.clone(),
            sources: self.sources.clone(),
            hardline: self.hardline,
            web_domains: self.web_domains.clone(),
            outside_reads: self.outside_reads,
            cache: Mutex::new(None),
            added: self.added.clone(),
        }
    }
}

/// Parses a JSON list of rules; errors carry `rules[i]: …`.
fn parse_rule_list(v: &Value, what: &str) -> Result<Vec<Rule>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("{what}: must be a list of rule objects"))?;
    items
        .iter()
        .enumerate()
        .map(|(i, r)| Rule::parse(r).map_err(|e| format!("{what}[{i}]: {e}")))
        .collect()
}

impl PermissionEngine {
    /// An engine in `mode` with no user rules, the floor on, paths resolved against
    /// `workspace`.
    pub fn new(mode: Mode, workspace: &Path) -> Self {
        PermissionEngine {
            mode,
            workspace: workspace.to_path_buf(),
            presets: preset_rules(mode),
            user_rules: Vec::new(),
            run_deny: Vec::new(),
            sources: Vec::new(),
            hardline: true,
            web_domains: Vec::new(),
            outside_reads: false,
            cache: Mutex::new(None),
            added: Vec::new(),
        }
    }

    /// Builds the engine the config's `permissions` section asks for; `Ok(None)` when the
    /// config has none (the reference's default: no engine, `default:no-engine`). The section
    /// is validated when the config is parsed; what is left is reading `rules_file` (a relative
    /// path is resolved against the workspace), whose errors name the file and the rule index,
    /// e.g. `permissions file '/x/permissions.json': rules[2]: unknown key `foo``.
    pub fn from_config(
        permissions: Option<&PermissionsConfig>,
        workspace: &Path,
    ) -> Result<Option<PermissionEngine>, String> {
        let Some(p) = permissions else {
            return Ok(None);
        };
        let mut engine = PermissionEngine::new(p.mode.unwrap_or(Mode::WorkspaceWrite), workspace);
        engine.hardline = p.hardline.unwrap_or(true);
        if let Some(f) = &p.rules_file {
            engine.load_file(&workspace.join(f))?;
        }
        if let Some(rules) = &p.rules {
            engine.user_rules.extend(rules.iter().cloned());
            engine.note_source("injected:config");
        }
        if let Some(hosts) = &p.web_fetch_domains {
            engine.set_web_fetch_domains(hosts)?;
        }
        Ok(Some(engine))
    }

    /// Loads a user permissions file (UTF-8, BOM accepted; keys `rules` and `shell`), appends
    /// its rules and records `user:<absolute path>`.
    pub(crate) fn load_file(&mut self, path: &Path) -> Result<(), String> {
        let shown = path.display().to_string();
        let err = |m: String| format!("permissions file '{shown}': {m}");
        // Only a regular file, read with a bound: a FIFO would block agent creation forever and
        // a device such as /dev/zero would never end.
        let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read: {e}")))?;
        if !meta.is_file() {
            return Err(err("not a regular file".into()));
        }
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_RULES_FILE + 1).read_to_end(&mut bytes))
            .map_err(|e| err(format!("cannot read: {e}")))?;
        if bytes.len() as u64 > MAX_RULES_FILE {
            return Err(err(format!("larger than {MAX_RULES_FILE} bytes")));
        }
        let text = String::from_utf8(bytes).map_err(|_| err("not valid UTF-8".into()))?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let v: Value = serde_json::from_str(text).map_err(|e| err(format!("invalid JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| err("must be a JSON object".into()))?;
        for k in obj.keys() {
            if !FILE_KEYS.contains(&k.as_str()) {
                return Err(err(format!("unknown key `{k}` (allowed: rules, shell)")));
            }
        }
        if let Some(shell) = obj.get("shell") {
            if !shell.is_object() && !shell.is_null() {
                return Err(err("`shell` must be an object".into()));
            }
        }
        let rules = match obj.get("rules") {
            None | Some(Value::Null) => Vec::new(),
            Some(r) => parse_rule_list(r, "rules").map_err(err)?,
        };
        self.user_rules.extend(rules);
        let abs = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir()
                .map(|d| d.join(path))
                .unwrap_or_else(|_| path.to_path_buf())
        };
        self.note_source(&format!("user:{}", abs.display()));
        Ok(())
    }

    /// Restricts `web_fetch` to a host allow-list (config `permissions.web_fetch_domains`,
    /// host names as validated by the config; `.example.com` also matches subdomains): a fetch
    /// to a listed host is allowed, any other fetch is asked. The two rules are evaluated after
    /// the user rules and before the preset (in `plan` and `full-access`, before the preset,
    /// which those modes evaluate first), and appear there in the snapshot.
    pub(crate) fn set_web_fetch_domains(&mut self, hosts: &[String]) -> Result<(), String> {
        let allow = Rule::parse(&serde_json::json!({
            "tool": "web_fetch", "domain": {"allowlist": hosts}, "action": "allow"
        }))?;
        let ask = Rule::parse(&serde_json::json!({"tool": "web_fetch", "action": "ask"}))?;
        self.web_domains = vec![allow, ask];
        self.note_source(&format!("injected:{WEB_DOMAINS_SOURCE}"));
        self.invalidate();
        Ok(())
    }

    /// Mirrors `tools.allow_reads_outside_workspace` (default false): when reads outside the
    /// workspace are refused, a read-only shell command the preset would allow is asked when
    /// one of its path operands resolves outside (see `shell_reads`).
    pub(crate) fn set_outside_reads_allowed(&mut self, allowed: bool) {
        self.outside_reads = allowed;
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Switches the mode (and its preset) and returns the previous one. Invalidates the
    /// snapshot cache. (The agent-level switch also sets the runner's read-only flag and emits
    /// the mode-change events; that is the caller's job.)
    pub fn set_mode(&mut self, mode: Mode) -> Mode {
        let prev = std::mem::replace(&mut self.mode, mode);
        if prev != mode {
            self.presets = preset_rules(mode);
        }
        self.invalidate();
        prev
    }

    /// Whether the hardline floor is on (config `hardline`, default true).
    pub(crate) fn hardline_enabled(&self) -> bool {
        self.hardline
    }

    /// Appends a source label exactly as given (hosts use `injected:<name>`). Empty and
    /// duplicate labels are ignored (returns false); a new label invalidates the snapshot
    /// cache. It does not add rules.
    pub fn add_loaded_source(&mut self, label: &str) -> bool {
        let added = self.note_source(label);
        if added {
            self.added.push(AddedRules::Source {
                label: label.to_owned(),
            });
        }
        added
    }

    fn note_source(&mut self, label: &str) -> bool {
        if label.is_empty() || self.sources.iter().any(|s| s == label) {
            return false;
        }
        self.sources.push(label.to_owned());
        self.invalidate();
        true
    }

    /// Host-injected rules (a JSON list in the permissions.json rule format), appended to the
    /// user rules, labelled `injected:<name>` (a `source_label` already starting with
    /// `injected:` is used as is). All-or-nothing: on error nothing is added. Errors read
    /// `rules[i]: …`.
    pub fn add_rules(&mut self, rules: &Value, source_label: &str) -> Result<(), String> {
        let parsed = parse_rule_list(rules, "rules")?;
        self.user_rules.extend(parsed);
        let label = if source_label.starts_with("injected:") {
            source_label.to_owned()
        } else {
            format!("injected:{source_label}")
        };
        self.note_source(&label);
        self.added.push(AddedRules::Rules {
            rules: rules.clone(),
            source: source_label.to_owned(),
        });
        self.invalidate();
        Ok(())
    }

    /// Run-scope rules: `deny` rules go to the tier checked right after the floor (reason
    /// `injected:<source>:<tool>`), `allow` rules are appended to the user rules (reason
    /// `user-rule:<tool>`); records `injected:<source>` and invalidates the cache. Both
    /// arguments are JSON lists (`null` = empty). All-or-nothing. Errors read
    /// `allow[i]: …` / `deny[i]: …`.
    pub fn add_run_rules(
        &mut self,
        allow: &Value,
        deny: &Value,
        source: &str,
    ) -> Result<(), String> {
        let list = |v: &Value, what: &str| -> Result<Vec<Rule>, String> {
            if v.is_null() {
                Ok(Vec::new())
            } else {
                parse_rule_list(v, what)
            }
        };
        let record = AddedRules::Run {
            allow: allow.clone(),
            deny: deny.clone(),
            source: source.to_owned(),
        };
        let allow = list(allow, "allow")?;
        let deny = list(deny, "deny")?;
        let source = if source.is_empty() {
            "run-spec"
        } else {
            source
        };
        self.run_deny
            .extend(deny.into_iter().map(|r| (r, source.to_owned())));
        self.user_rules.extend(allow);
        self.note_source(&format!("injected:{source}"));
        self.added.push(record);
        self.invalidate();
        Ok(())
    }

    /// What hosts added since the config built the engine, in order.
    pub fn added(&self) -> &[AddedRules] {
        &self.added
    }

    /// Adds again what [`PermissionEngine::added`] gave (a resumed session's rules).
    pub fn replay(&mut self, added: &AddedRules) -> Result<(), String> {
        match added {
            AddedRules::Rules { rules, source } => self.add_rules(rules, source),
            AddedRules::Run {
                allow,
                deny,
                source,
            } => self.add_run_rules(allow, deny, source),
            AddedRules::Source { label } => {
                self.add_loaded_source(label);
                Ok(())
            }
        }
    }

    fn invalidate(&self) {
        if let Ok(mut c) = self.cache.lock() {
            *c = None;
        }
    }

    /// The engine's verdict for one call (steps 2a–2c of the pipeline), or `None` when no
    /// rule matched. A preset allow of a read-only shell command becomes an ask when the
    /// command reads outside the workspace or runs in the background, while reads outside are
    /// refused. Nothing is run: for a git command of that set, where git's repository lies is
    /// [`Probe::GitRepository`], answered in `probed` or asked for.
    pub fn decide_detail(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        probed: &Probed,
    ) -> Probing<Option<EngineMatch>> {
        let Some(found) = self.rule_detail(tool, args) else {
            return Probing::Decided(None);
        };
        if found.action != EngineAction::Allow || tool != "run_shell_command" || self.outside_reads
        {
            return Probing::Decided(Some(found));
        }
        let by_read_only_set = found
            .rule
            .as_ref()
            .and_then(|r| r.get("args")?.get("command")?.as_str())
            == Some(READ_ONLY_SHELL);
        if !by_read_only_set || !found.reason.starts_with("mode-preset:") {
            return Probing::Decided(Some(found));
        }
        // The set is allowed as "reads inside the workspace, then ends"; a background run is
        // a detached process nothing tracks, which outlives the turn and the host.
        if args.get("is_background") == Some(&Value::Bool(true)) {
            return Probing::Decided(Some(EngineMatch {
                action: EngineAction::Ask,
                rule: found.rule,
                reason: "background-process".to_owned(),
            }));
        }
        let command = args
            .get("command")
            .map(crate::pycompat::python_str)
            .unwrap_or_default();
        let wd = args
            .get("working_directory")
            .map(crate::pycompat::python_str)
            .unwrap_or_else(|| ".".to_owned());
        let outside = match path_policy::contain_directory(&self.workspace, &wd) {
            Ok(cwd) => match shell_reads::outside_operand(&command, &cwd, &self.workspace) {
                Some(path) => Some(path),
                None => match self.git_repository_probe(&command, cwd) {
                    None => None,
                    Some(probe) => match probed.answer(&probe) {
                        None => return Probing::NeedsProbe(probe),
                        Some(ProbeAnswer::GitRepositoryInside) => None,
                        Some(ProbeAnswer::GitRepositoryOutside(path)) => Some(path.clone()),
                    },
                },
            },
            Err(_) => Some(wd),
        };
        Probing::Decided(Some(match outside {
            Some(path) => EngineMatch {
                action: EngineAction::Ask,
                rule: found.rule,
                reason: format!("outside-workspace-read:{path}"),
            },
            None => found,
        }))
    }

    /// For a git command of the read-only set: the probe of where git's repository lies (a
    /// `commondir`, gitfile, `core.worktree`, alternates, or a repository above the workspace
    /// would lead it outside). Its answer costs one `git rev-parse`, which the caller runs;
    /// the launch looks again (see `git_launch`).
    fn git_repository_probe(&self, command: &str, cwd: PathBuf) -> Option<Probe> {
        if command.split([' ', '\t']).find(|w| !w.is_empty()) != Some("git") {
            return None;
        }
        Some(Probe::GitRepository {
            cwd,
            workspace: self.workspace.clone(),
        })
    }

    fn rule_detail(&self, tool: &str, args: &Map<String, Value>) -> Option<EngineMatch> {
        if self.hardline && tool == "run_shell_command" {
            let cmd = args
                .get("command")
                .map(crate::pycompat::python_str)
                .unwrap_or_default();
            if let Some(desc) = hardline::check(&cmd) {
                return Some(EngineMatch {
                    action: EngineAction::Deny,
                    rule: None,
                    reason: format!("hardline:{desc}"),
                });
            }
        }
        let call = CallCtx::new(
            tool,
            args,
            (tool == "run_shell_command").then_some("posix"),
            &self.workspace,
        );
        for (rule, source) in &self.run_deny {
            if rule.matches(&call) {
                return Some(found(
                    rule,
                    format!("injected:{source}:{}", rule.tool_field),
                ));
            }
        }
        let user = |r: &Rule| found(r, format!("user-rule:{}", r.tool_field));
        let preset = |r: &Rule| found(r, format!("mode-preset:{}", r.tool_field));
        let web = || {
            self.web_domains
                .iter()
                .find(|r| r.matches(&call))
                .map(|r| found(r, format!("injected:{WEB_DOMAINS_SOURCE}:{}", r.tool_field)))
        };
        match self.mode {
            Mode::FullAccess => {
                if let Some(r) = self.user_rules.iter().find(|r| r.matches(&call)) {
                    if r.action == Action::Deny {
                        return Some(user(r));
                    }
                }
                web().or_else(|| self.presets.iter().find(|r| r.matches(&call)).map(preset))
            }
            Mode::Plan => web()
                .or_else(|| self.presets.iter().find(|r| r.matches(&call)).map(preset))
                .or_else(|| self.user_rules.iter().find(|r| r.matches(&call)).map(user)),
            Mode::ReadOnly | Mode::WorkspaceWrite => self
                .user_rules
                .iter()
                .find(|r| r.matches(&call))
                .map(user)
                .or_else(web)
                .or_else(|| self.presets.iter().find(|r| r.matches(&call)).map(preset)),
        }
    }

    /// The `ActivePermissions` snapshot: mode, rules in evaluation order (run-scope denies,
    /// then user and preset rules in the mode's order), and source labels (`preset:<mode>`,
    /// then file and injected labels). Cached until `set_mode`, a new `add_loaded_source`
    /// label, `add_rules` or `add_run_rules`.
    pub fn active_permissions(&self) -> ActivePermissions {
        if let Ok(c) = self.cache.lock() {
            if let Some(s) = c.as_ref() {
                return s.clone();
            }
        }
        let mut rules: Vec<Value> = self.run_deny.iter().map(|(r, _)| r.raw.clone()).collect();
        let user = self.user_rules.iter().map(|r| r.raw.clone());
        let web = self.web_domains.iter().map(|r| r.raw.clone());
        let preset = self.presets.iter().map(|r| r.raw.clone());
        match self.mode {
            Mode::Plan => {
                rules.extend(web);
                rules.extend(preset);
                rules.extend(user);
            }
            _ => {
                rules.extend(user);
                rules.extend(web);
                rules.extend(preset);
            }
        }
        let mut loaded_sources = vec![format!("preset:{}", self.mode.as_str())];
        loaded_sources.extend(self.sources.iter().cloned());
        let snap = ActivePermissions {
            mode: self.mode.as_str().to_owned(),
            rules,
            loaded_sources,
        };
        if let Ok(mut c) = self.cache.lock() {
            *c = Some(snap.clone());
        }
        snap
    }
}

fn found(rule: &Rule, reason: String) -> EngineMatch {
    EngineMatch {
        action: match rule.action {
            Action::Allow => EngineAction::Allow,
            Action::Deny => EngineAction::Deny,
            Action::Ask => EngineAction::Ask,
        },
        rule: Some(rule.raw.clone()),
        reason,
    }
}
