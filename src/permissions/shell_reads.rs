//! Path operands of the read-only shell set.
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
//!   value after `=` (`--file=/etc/shadow`), and a short option every tail after its first
//!   letter (`-f/etc/shadow`, `-fsettings` where `settings` is a link leading out);
//! - `~` and `~/…` expand to `$HOME`; `~user` is treated as outside;
//! - a candidate is joined to the working directory and resolved through every symlink that
//!   exists (as `read_file` does); it must stay under the workspace;
//! - a program that follows symlinks below its operands (`grep -R`, `ls -L`, `du -L`,
//!   `diff -r`) is asked when a link below a directory operand (or the working directory)
//!   resolves outside; the walk follows inside links, and more than `WALK_BOUND` entries
//!   are asked rather than walked;
//! - `echo` and `pwd` read nothing and are not checked;
//! - `git config` is launched with `--no-includes` (see `git_launch`): an `include.path` or
//!   `includeIf` names a file the operand check never sees, so a word that could turn includes
//!   back on (`--includes`, or a prefix of it such as `--inc`) is asked;
//! - what a program reads on its own (its configuration, `/proc` for `ps`, `PATH` for `which`,
//!   the files named inside a file) is not an operand and not checked here; where git's
//!   repository lies is checked by the engine through `git_launch::repository_outside`.

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
    let mut existing_dirs: Vec<PathBuf> = Vec::new();
    for word in &words {
        for candidate in candidates(word) {
            if candidate.is_empty() {
                continue;
            }
            let resolved = absolute(candidate, cwd).map(|path| path_policy::resolve(&path));
            match resolved {
                Some(path) if path.starts_with(workspace) => {
                    if path.is_dir() {
                        existing_dirs.push(path);
                    }
                }
                _ => return Some(candidate.to_owned()),
            }
        }
    }
    let roots = match follows_links(program, &words) {
        Follow::No => return None,
        Follow::Operands => existing_dirs,
        Follow::OperandsAndCwd => {
            existing_dirs.push(path_policy::resolve(cwd));
            existing_dirs
        }
    };
    outside_link(&roots, workspace)
}

/// Whether a command of the set follows symlinks it meets below its operands, and where it
/// may start walking.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Follow {
    /// It reads only what its operands name (already resolved through their links).
    No,
    /// It walks its directory operands (`diff -r` needs two operands).
    Operands,
    /// It walks its directory operands, or the working directory when it has none (`grep -R
    /// PATTERN`, `ls -LR`, `du -L`): the working directory is walked too, since telling a
    /// pattern or an option's value from an operand would need each program's grammar.
    OperandsAndCwd,
}

/// `grep -R`/`--dereference-recursive` follows every link while recursing (`-r` only those on
/// the command line); `ls -L`/`--dereference` and `du -L`/`--dereference` stat or descend
/// through every link; GNU `diff -r` follows links unless told otherwise. The other programs
/// of the set read only their operands, and git stores links as links.
fn follows_links(program: &str, words: &[&str]) -> Follow {
    let short = |flag: char| {
        words
            .iter()
            .any(|w| w.starts_with('-') && !w.starts_with("--") && w.contains(flag))
    };
    // getopt_long takes any unambiguous prefix of a long option.
    let long = |full: &str| {
        words.iter().any(|w| {
            w.strip_prefix("--")
                .map(|n| n.split_once('=').map_or(n, |(n, _)| n))
                .is_some_and(|n| n.len() >= 3 && full.starts_with(n))
        })
    };
    match program {
        "grep" if short('R') || long("dereference-recursive") => Follow::OperandsAndCwd,
        "ls" | "du" if short('L') || long("dereference") => Follow::OperandsAndCwd,
        "diff" if short('r') || long("recursive") => Follow::Operands,
        _ => Follow::No,
    }
}

/// How many directory entries the link walk looks at before it gives up and asks.
const WALK_BOUND: usize = 10_000;

/// The first symlink below `roots` (followed as the program would, through links that stay
/// inside) that resolves outside `workspace`; or a note that the walk exceeded its bound.
fn outside_link(roots: &[PathBuf], workspace: &Path) -> Option<String> {
    let mut seen: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    let mut stack: Vec<PathBuf> = roots.to_vec();
    let mut entries = 0usize;
    while let Some(dir) = stack.pop() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        // An unreadable directory is unreadable to the program too.
        let Ok(listing) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in listing.flatten() {
            entries += 1;
            if entries > WALK_BOUND {
                return Some(format!(
                    "{} (more than {WALK_BOUND} entries to check for symlinks)",
                    dir.display()
                ));
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_symlink() {
                let target = path_policy::resolve(&path);
                if !target.starts_with(workspace) {
                    return Some(path.display().to_string());
                }
                if target.is_dir() {
                    stack.push(target);
                }
            } else if kind.is_dir() {
                stack.push(path);
            }
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

/// The paths a word may name: the word itself; an option's value after `=`; and for a short
/// option every tail after its first letter (`-fsettings`, `-rnfsettings`: which letters take
/// a value differs by program, so each tail is checked — a false prompt when a tail happens to
/// name an outside link, never a false allow).
fn candidates(word: &str) -> Vec<&str> {
    if !word.starts_with('-') {
        return vec![literal_head(word)];
    }
    if let Some((_, value)) = word.split_once('=') {
        return vec![literal_head(value)];
    }
    if word.starts_with("--") {
        return Vec::new();
    }
    word.char_indices()
        .skip(2)
        .map(|(i, _)| literal_head(&word[i..]))
        .collect()
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
        std::os::unix::fs::symlink("/etc", ws.join("etc")).unwrap();
        std::fs::create_dir(ws.join("d")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", ws.join("d/pw")).unwrap();
        assert_eq!(out("grep -fetc/passwd x").as_deref(), Some("etc/passwd"));
        assert_eq!(out("grep -rnfetc x").as_deref(), Some("etc"));
        assert_eq!(out("grep -r root d"), None);
        assert!(out("grep -R root d").is_some());
        assert!(out("grep --dereference-rec root").is_some());
        assert!(out("ls -LR").is_some());
        assert!(out("du -L d").is_some());
        assert!(out("diff -r d d").is_some());
        assert_eq!(out("ls -R d"), None);
    }
}
