//! The hardline floor (spec §3.7, POSIX table): shell commands refused in every mode.
//!
//! This is a behavioural port of the reference scanner, written as hand-made matchers over
//! precomputed per-position tables instead of backtracking regular expressions, so that the
//! whole judgement is linear in the size of the command (each inspected text costs O(n)).
//!
//! Pipeline for one command (breadth-first over at most [`MAX_TEXTS`] texts):
//! 1. a text that is exactly `$(echo ARGS)` queues the normalised ARGS;
//! 2. here-doc bodies are masked (unless the opener line feeds a shell);
//! 3. the quote / substitution context of every position is computed;
//! 4. the table's patterns run, in table order, over the shell-word-normalised view (quotes
//!    and escapes removed); a match counts only when its start is at real shell context;
//! 5. bodies run by a nested shell are queued: `sh -c '…'`, `bash <<< '…'`, `echo … | sh`,
//!    `source <(echo …)` and `$(echo …)` at command position.
//!
//! Pattern semantics (the reference's regexes, all case-insensitive, Python `re` flavour):
//! a command pattern is anchored at a *command position*: the start of the text or a separator
//! (`; & | \` newline CR ( ) { !` or `$(`), then optional `NAME=VALUE` assignments, optional
//! wrapper words (`sudo env command builtin exec eval nohup setsid nice ionice taskset chrt time
//! coproc busybox then do else elif`, each with flags), an optional `sh|bash|… [-flags] -c`
//! interpreter prefix, an optional binary path (`/bin/`, `/usr/local/sbin/`, … or a path with a
//! glob character), then the command itself.

use std::collections::VecDeque;

mod canon;
mod heredoc;
mod index;
mod lex;
mod nested;
mod patterns;

use heredoc::mask_heredocs;
use lex::{normalize, Contexts};
use nested::{cmdsub_echo_as_body, extract_bodies};
use patterns::match_table;

/// At most this many texts (the command and nested bodies) are inspected, breadth-first.
pub const MAX_TEXTS: usize = 16;

const NONE: usize = usize::MAX;

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ash", "ksh", "csh", "tcsh", "busybox",
];

const fn bit(b: u32) -> u32 {
    1 << b
}

/// At most this many extra texts come from the canonical rewrites (`canon`).
pub(crate) const MAX_CANON_TEXTS: usize = 32;

/// The verdict for a command whose nested texts outnumber what the floor inspects.
pub const TOO_COMPLEX: &str = "command too complex for the safety floor to inspect";

/// The floor's verdict for a POSIX shell command: `Some(description)` when refused.
///
/// A command with more nested texts than the floor inspects is refused as [`TOO_COMPLEX`]
/// (ours, beyond the reference, which lets the uninspected rest through): padding a command
/// with harmless nested shells must not hide a dangerous one behind the budget.
pub fn check(command: &str) -> Option<&'static str> {
    let command = without_trailing_blanks(command);
    if command.is_empty() {
        return None;
    }
    // (text, produced by a canonical rewrite): a rewritten text is not rewritten again.
    let mut queue: VecDeque<(Vec<char>, bool)> = VecDeque::new();
    queue.push_back((command.chars().collect(), false));
    let mut pushed = 1usize;
    let mut inspected = 0usize;
    let mut canon_pushed = 0usize;
    let mut canon_chars = 0usize;
    // A rewrite is about as long as its source, and nested bodies at one depth are disjoint:
    // this covers a few levels of nesting whole and keeps the judgement linear with a small
    // constant.
    let canon_chars_budget = 4 * command.len() + 4096;
    let mut uninspected = false;
    while let Some((text, rewritten)) = queue.pop_front() {
        if inspected >= MAX_TEXTS + MAX_CANON_TEXTS {
            uninspected = true;
            break;
        }
        inspected += 1;
        let mut bodies: Vec<Vec<char>> = Vec::new();
        if let Some(args) = cmdsub_echo_as_body(&text) {
            bodies.push(normalize(&args).0);
        }
        let masked = mask_heredocs(&text);
        let ctx = Contexts::compute(&masked);
        if let Some(desc) = match_table(&masked, &ctx) {
            return Some(desc);
        }
        extract_bodies(&masked, &ctx, &mut bodies);
        for b in bodies {
            if pushed >= MAX_TEXTS {
                uninspected = true;
                break;
            }
            pushed += 1;
            queue.push_back((b, false));
        }
        // Our own floor beyond the reference's: canonical spellings, with their own
        // count budget.
        if !rewritten {
            let canon = canon::canonicalize(&masked);
            if canon.fork_bomb {
                return Some("fork bomb");
            }
            if canon.device_redirect {
                return Some("redirect output to raw block device");
            }
            let texts = canon
                .canonical
                .map(|t| (t, true))
                .into_iter()
                .chain(canon.texts.into_iter().map(|t| (t, false)));
            for (t, is_canonical) in texts {
                if canon_pushed >= MAX_CANON_TEXTS || canon_chars + t.len() > canon_chars_budget {
                    uninspected = true;
                    break;
                }
                canon_pushed += 1;
                canon_chars += t.len();
                queue.push_back((t, is_canonical));
            }
        }
    }
    uninspected.then_some(TOO_COMPLEX)
}

/// `command` without the blanks after its last word. They never change what a shell runs:
/// outside quotes they separate nothing, and inside a quote left open the command is a syntax
/// error that runs nothing. Judged with them, an open quote took them into its last word, so a
/// model could turn a refused operand (`~'`) into another (`~'` and a newline) by appending a
/// newline. A backslash before them is kept with them: it escapes the first one.
fn without_trailing_blanks(command: &str) -> &str {
    let trimmed = command.trim_end_matches([' ', '\t', '\n', '\r']);
    if trimmed.ends_with('\\') {
        command
    } else {
        trimmed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basics() {
        assert_eq!(
            check("rm -rf /"),
            Some("recursive delete of root / system directory / home")
        );
        assert_eq!(check("echo 'reboot required'"), None);
        assert_eq!(check("sh -c 'echo ok; reboot'"), Some("reboot"));
        assert_eq!(
            check("echo \"$(rm -rf /)\""),
            Some("recursive delete of root / system directory / home")
        );
        assert_eq!(check(""), None);
    }
}
