//! The mode presets (spec §3.3), with the reference's exact rule content.
//!
//! The rule objects are reported verbatim (events, snapshots). Two preset patterns use
//! look-around (`READ_ONLY_SHELL`, `CREDENTIAL_PATH`) and one uses a trailing look-ahead
//! (`SHELL_RC_WRITE`); they are matched by equivalent linear-time code here.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::json;

use super::rules::{compile_preset, Pattern, Rule};
use super::Mode;
use crate::pycompat::ignorecase_fold;

pub(crate) const READ_ONLY_SHELL: &str = r#"^(?:git[ \t]+(?:status|log|diff|show|stash[ \t]+list|shortlog|describe|blame|ls-files|ls-tree|rev-parse|config[ \t]+--get[a-z-]*)(?=[ \t]|$)(?![^\n]*--(?:ext|textc|out))|(?:ls|cat|echo|pwd|which|head|tail|wc|diff|grep|du|df|ps)(?=[ \t]|$))[^;&|`$<>()\n\r'\"\\*?\[\]{}]*\Z"#;
pub(crate) const DANGEROUS_SHELL: &str = r"rm\s+-rf|sudo\s|mkfs|dd\s+if=";
pub(crate) const PROTECTED_PATH: &str = r"(?i)(?:^|/)\.(?:git|agentao)(?:/|$)";
pub(crate) const CREDENTIAL_PATH: &str =
    r"(?i)(?:^|[/\\])\.env(?:\.(?!(?:example|sample|template|dist)$)[^/\\]+)?$|\.(?:pem|key)$";
pub(crate) const SHELL_RC_WRITE: &str = r#"(?:>>?\s*(?:~|\$HOME|\$\{HOME\})/\.(?:bashrc|zshrc|profile|bash_profile|zprofile|netrc|pgpass|npmrc|pypirc)(?=\s|[;|&)>'\"<]|$)|\btee\b(?:\s+-\S+)*\s+(?:~|\$HOME|\$\{HOME\})/\.(?:bashrc|zshrc|profile|bash_profile|zprofile|netrc|pgpass|npmrc|pypirc)(?=\s|[;|&)>'\"<]|$)|\b(?:cp|mv)\b(?:\s+-\S+)*\s+\S+\s+(?:~|\$HOME|\$\{HOME\})/\.(?:bashrc|zshrc|profile|bash_profile|zprofile|netrc|pgpass|npmrc|pypirc)(?=\s|[;|&)>'\"<]|$)|\bsed\b(?:\s+\S+)*?\s+-i(?:\.\S+)?(?:\s+\S+)*?\s+(?:~|\$HOME|\$\{HOME\})/\.(?:bashrc|zshrc|profile|bash_profile|zprofile|netrc|pgpass|npmrc|pypirc)(?=\s|[;|&)>'\"<]|$))"#;

const WEB_ALLOW: &[&str] = &[
    ".github.com",
    ".docs.python.org",
    ".wikipedia.org",
    "r.jina.ai",
    ".pypi.org",
    ".readthedocs.io",
];
const WEB_BLOCK: &[&str] = &[
    "localhost",
    "127.0.0.1",
    "0.0.0.0",
    "169.254.169.254",
    ".internal",
    ".local",
    "::1",
];

static READ_ONLY_SHELL_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"\A(git[ \t]+(?:status|log|diff|show|stash[ \t]+list|shortlog|describe|blame|ls-files|ls-tree|rev-parse|config[ \t]+--get[a-z-]*)|(?:ls|cat|echo|pwd|which|head|tail|wc|diff|grep|du|df|ps))(?:[ \t][^;&|`$<>()\n\r'"\\*?\[\]{}]*)?\z"#,
    )
    .ok()
});

/// `READ_ONLY_SHELL`, without look-around: the look-aheads become an optional `[ \t]…` tail,
/// and the git arm's negative look-ahead a substring test on the rest of the command.
pub(crate) fn is_read_only_shell(s: &str) -> bool {
    read_only_shell(s)
}

fn read_only_shell(s: &str) -> bool {
    let Some(re) = READ_ONLY_SHELL_RE.as_ref() else {
        return false;
    };
    let Some(caps) = re.captures(s) else {
        return false;
    };
    let Some(head) = caps.get(1) else {
        return false;
    };
    if head.as_str().starts_with("git") {
        let rest = &s[head.end()..];
        if ["--ext", "--textc", "--out"]
            .iter()
            .any(|x| rest.contains(x))
        {
            return false;
        }
    }
    true
}

fn eq_ci(a: &[char], w: &str) -> bool {
    a.len() == w.len()
        && a.iter()
            .zip(w.chars())
            .all(|(&x, y)| ignorecase_fold(x) == y)
}

/// Python `$` at `end`: the end of the text, or just before a final newline.
fn dollar_at(s: &[char], end: usize) -> bool {
    end == s.len() || (end + 1 == s.len() && s[end] == '\n')
}

/// `CREDENTIAL_PATH`, without the negative look-ahead.
fn credential_path(text: &str) -> bool {
    let s: Vec<char> = text.chars().collect();
    let n = s.len();
    for ext in [".pem", ".key"] {
        for end in [n, n.wrapping_sub(1)] {
            if end <= n && end >= 4 && dollar_at(&s, end) && eq_ci(&s[end - 4..end], ext) {
                return true;
            }
        }
    }
    for i in 0..n {
        if !(i == 0 || s[i - 1] == '/' || s[i - 1] == '\\') {
            continue;
        }
        if i + 4 > n || !eq_ci(&s[i..i + 4], ".env") {
            continue;
        }
        let j = i + 4;
        if dollar_at(&s, j) {
            return true;
        }
        if s[j] != '.' {
            continue;
        }
        let rest = &s[j + 1..];
        if rest.is_empty() || rest.iter().any(|&c| c == '/' || c == '\\') {
            continue;
        }
        let word = if rest.last() == Some(&'\n') {
            &rest[..rest.len() - 1]
        } else {
            rest
        };
        let excluded = ["example", "sample", "template", "dist"]
            .iter()
            .any(|w| eq_ci(rest, w) || eq_ci(word, w));
        if !excluded {
            return true;
        }
    }
    false
}

static SHELL_RC_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let sp = r"[\s\x1c-\x1f]";
    let nsp = r"[^\s\x1c-\x1f]";
    let home = r"(?:~|\$HOME|\$\{HOME\})/\.(?:bashrc|zshrc|profile|bash_profile|zprofile|netrc|pgpass|npmrc|pypirc)";
    let after = r#"(?:[\s\x1c-\x1f;|&)>'"<]|\z)"#;
    let src = format!(
        r"(?:>>?{sp}*{home}{after}|\btee\b(?:{sp}+-{nsp}+)*{sp}+{home}{after}|\b(?:cp|mv)\b(?:{sp}+-{nsp}+)*{sp}+{nsp}+{sp}+{home}{after}|\bsed\b(?:{sp}+{nsp}+)*?{sp}+-i(?:\.{nsp}+)?(?:{sp}+{nsp}+)*?{sp}+{home}{after})"
    );
    Regex::new(&src).ok()
});

fn shell_rc_write(s: &str) -> bool {
    SHELL_RC_RE.as_ref().is_some_and(|r| r.is_match(s))
}

fn plain(tool: &str, action: &str) -> Rule {
    Rule::preset(json!({"tool": tool, "action": action}), vec![], None)
}

fn with_arg(tool: &str, key: &'static str, pattern: &str, p: Pattern, action: &str) -> Rule {
    Rule::preset(
        json!({"tool": tool, "args": {key: pattern}, "action": action}),
        vec![(key, p)],
        None,
    )
}

fn web_rules() -> Vec<Rule> {
    vec![
        Rule::preset(
            json!({"tool": "web_fetch", "domain": {"allowlist": WEB_ALLOW}, "action": "allow"}),
            vec![],
            Some((WEB_ALLOW.to_vec(), vec![])),
        ),
        Rule::preset(
            json!({"tool": "web_fetch", "domain": {"blocklist": WEB_BLOCK}, "action": "deny"}),
            vec![],
            Some((vec![], WEB_BLOCK.to_vec())),
        ),
        plain("web_fetch", "ask"),
        plain("web_search", "ask"),
    ]
}

fn shell_rule(pattern: &str, p: Pattern, action: &str) -> Rule {
    with_arg("run_shell_command", "command", pattern, p, action)
}

/// Read-only shell commands allowed, then dangerous ones denied (workspace-write and plan).
fn shell_read_only_and_dangerous() -> [Rule; 2] {
    [
        shell_rule(READ_ONLY_SHELL, Pattern::Native(read_only_shell), "allow"),
        shell_rule(DANGEROUS_SHELL, compile_preset(DANGEROUS_SHELL), "deny"),
    ]
}

/// The preset rules of `mode`, in evaluation order.
pub(crate) fn preset_rules(mode: Mode) -> Vec<Rule> {
    match mode {
        Mode::ReadOnly => Vec::new(),
        Mode::FullAccess => vec![plain("*", "allow")],
        Mode::WorkspaceWrite => {
            let mut v = Vec::new();
            for tool in ["write_file", "replace"] {
                v.push(with_arg(
                    tool,
                    "file_path",
                    PROTECTED_PATH,
                    compile_preset(PROTECTED_PATH),
                    "ask",
                ));
                v.push(with_arg(
                    tool,
                    "file_path",
                    CREDENTIAL_PATH,
                    Pattern::Native(credential_path),
                    "ask",
                ));
            }
            v.push(plain("write_file", "allow"));
            v.push(plain("replace", "allow"));
            v.extend(shell_read_only_and_dangerous());
            v.push(shell_rule(
                SHELL_RC_WRITE,
                Pattern::Native(shell_rc_write),
                "ask",
            ));
            v.push(plain("run_shell_command", "ask"));
            v.extend(web_rules());
            v
        }
        Mode::Plan => {
            let mut v = vec![plain("plan_save", "allow"), plain("plan_finalize", "allow")];
            for tool in ["write_file", "replace", "save_memory", "todo_write"] {
                v.push(plain(tool, "deny"));
            }
            v.extend(shell_read_only_and_dangerous());
            v.push(plain("run_shell_command", "deny"));
            v.extend(web_rules());
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natives() {
        assert!(read_only_shell("git status"));
        assert!(read_only_shell("ls -la"));
        assert!(!read_only_shell("ls -la | wc"));
        assert!(!read_only_shell("git diff --output=x"));
        assert!(!read_only_shell("ls\n"));
        assert!(credential_path(".env"));
        assert!(credential_path("a/.env.local"));
        assert!(!credential_path(".env.example"));
        assert!(credential_path(".env.example.bak"));
        assert!(credential_path("k.PEM"));
        assert!(!credential_path(".envrc"));
        assert!(shell_rc_write("echo x >> ~/.bashrc"));
        assert!(shell_rc_write("sed -i 's/a/b/' ~/.zshrc"));
        assert!(!shell_rc_write("cat ~/.bashrc"));
    }
}
