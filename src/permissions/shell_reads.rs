//! Path operands of the read-only shell set (issue 9, finding 3).
//!
//! The presets auto-allow a narrow set of read-only commands (`cat`, `grep`, `git diff`, …).
//! When reads outside the workspace are refused (the default), such a command must not read
//! outside it either, so the engine asks instead of allowing when one of its operands resolves
//! outside. The rule, and its limits:
//!
//! - the command text of the set has no quotes, escapes, `$`, globs or braces (the preset's
//!   pattern refuses them), so its words are exactly what the shell passes on, except `~`;
//! - every word after the program is a path candidate (a grep pattern such as `/api/` is
//!   therefore asked too: a false prompt, never a false allow); an option word contributes its
//!   value after `=` (`--file=/etc/shadow`) or its attached tail starting with `/`, `~` or `..`
//!   (`-f/etc/shadow`);
//! - `~` and `~/…` expand to `$HOME`; `~user` is treated as outside;
//! - a candidate is joined to the working directory and resolved through every symlink that
//!   exists (as `read_file` does); it must stay under the workspace;
//! - `echo` and `pwd` read nothing and are not checked;
//! - `git config` is launched with `--no-includes` (see `git_launch`): an `include.path` or
//!   `includeIf` names a file the operand check never sees, so a word that could turn includes
//!   back on (`--includes`, or a prefix of it such as `--inc`) is asked;
//! - what a program reads on its own (its configuration, `/proc` for `ps`, `PATH` for `which`,
//!   the repository git finds above the working directory) is not an operand and not checked.

use std::path::{Path, PathBuf};

use super::path_policy;

/// The first word of `command` (a command of the read-only shell set), run in `cwd`, that
/// names a path outside `workspace`.
pub(crate) fn outside_operand(command: &str, cwd: &Path, workspace: &Path) -> Option<String> {
    let mut words = command.split([' ', '\t']).filter(|w| !w.is_empty());
    let program = words.next()?;
    if matches!(program, "echo" | "pwd") {
        return None;
    }
    let words: Vec<&str> = words.collect();
    if program == "git" && words.first() == Some(&"config") {
        if let Some(word) = words.iter().find(|w| reenables_includes(w)) {
            return Some((*word).to_owned());
        }
    }
    for word in words {
        let Some(candidate) = candidate(word) else {
            continue;
        };
        if candidate.is_empty() {
            continue;
        }
        let outside = match absolute(candidate, cwd) {
            Some(path) => !path_policy::resolve(&path).starts_with(workspace),
            None => true,
        };
        if outside {
            return Some(candidate.to_owned());
        }
    }
    None
}

/// Whether `word` may turn `git config`'s includes back on after the launch's
/// `--no-includes` (parse-options takes any unambiguous prefix: `--inc`).
fn reenables_includes(word: &str) -> bool {
    let Some(name) = word.strip_prefix("--") else {
        return false;
    };
    let name = name.split_once('=').map_or(name, |(n, _)| n);
    (name.len() >= 2 && "includes".starts_with(name)) || name.starts_with("no-no")
}

/// The path a word may name.
fn candidate(word: &str) -> Option<&str> {
    if !word.starts_with('-') {
        return Some(literal_head(word));
    }
    if let Some((_, value)) = word.split_once('=') {
        return Some(literal_head(value));
    }
    let at = word
        .char_indices()
        .skip(1)
        .find(|(i, c)| matches!(c, '/' | '~') || word[*i..].starts_with(".."))
        .map(|(i, _)| i)?;
    Some(literal_head(&word[at..]))
}

/// The part before the first glob character (none reach here through the preset; a glob
/// expands below its literal head).
fn literal_head(word: &str) -> &str {
    match word.find(['*', '?', '[', '{']) {
        Some(i) => &word[..i],
        None => word,
    }
}

/// `~` expanded and joined to `cwd`; `None` for `~user` (another user's home).
fn absolute(raw: &str, cwd: &Path) -> Option<PathBuf> {
    if let Some(rest) = raw.strip_prefix('~') {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let home = std::env::var_os("HOME")?;
        return Some(PathBuf::from(home).join(rest.trim_start_matches('/')));
    }
    Some(cwd.join(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_and_option_values() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let out = |c: &str| outside_operand(c, &ws, &ws);
        assert_eq!(out("cat /etc/shadow").as_deref(), Some("/etc/shadow"));
        assert_eq!(out("grep -f/etc/shadow x").as_deref(), Some("/etc/shadow"));
        assert_eq!(out("grep --file=/etc/x y").as_deref(), Some("/etc/x"));
        assert_eq!(out("cat ~root/.bashrc").as_deref(), Some("~root/.bashrc"));
        assert_eq!(out("ls ..").as_deref(), Some(".."));
        assert_eq!(out("ls -la"), None);
        assert_eq!(out("cat a/../b"), None);
        assert_eq!(out("grep -rn foo ."), None);
        assert_eq!(out("echo /etc/shadow"), None);
        assert_eq!(out("git diff --stat"), None);
        assert_eq!(
            out("git config --get-regexp --inc --file x .").as_deref(),
            Some("--inc")
        );
        assert_eq!(out("git config --get-regexp --file x ."), None);
    }
}
