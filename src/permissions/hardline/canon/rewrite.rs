//! One simple command rewritten: assignments and unknown privilege wrappers dropped, the
//! command word reduced to its name, `rm`'s options spelled out, and the texts a shell would
//! run (`sh -c` bodies, pipe-fed scripts, `eval` arguments) collected for judging.

use super::decode_ansi_c;
use super::tokens::{tokenize, Attached, Feed, Tok};

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ash", "ksh", "csh", "tcsh", "mksh",
];
/// Wrappers the scanner knows (it reads them itself; we only normalise their spelling).
const WRAPPERS: &[&str] = &[
    "sudo", "env", "command", "builtin", "exec", "eval", "nohup", "setsid", "nice", "ionice",
    "taskset", "chrt", "time", "coproc", "busybox", "timeout", "stdbuf", "xargs",
];
/// Privilege wrappers the reference's table does not name.
const PRIV_WRAPPERS: &[&str] = &["doas", "pkexec", "run0"];
/// Options of wrappers that take the next word as their value.
const OPTS_WITH_VALUE: &[&str] = &[
    "-u",
    "-g",
    "-C",
    "-D",
    "-h",
    "-p",
    "-r",
    "-t",
    "-U",
    "-T",
    "-n",
    "-s",
    "-k",
    "--user",
    "--group",
    "--signal",
    "--kill-after",
    "-c",
    "--chdir",
    "-P",
];
const RESERVED: &[&str] = &[
    "{", "!", "if", "then", "do", "else", "elif", "while", "until", "time",
];

/// The name of a command word given as a path: its last component (`/bin//rm` → `rm`).
fn command_name(word: &str) -> &str {
    if !word.contains('/') {
        return word;
    }
    word.rsplit('/').find(|s| !s.is_empty()).unwrap_or(word)
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// `rm`'s long options spelled out from their unambiguous GNU abbreviations.
fn rm_option(word: &str) -> Option<&'static str> {
    let name = word.strip_prefix("--")?;
    if name.is_empty() || name.contains('=') {
        return None;
    }
    for full in ["recursive", "force", "no-preserve-root"] {
        if full.starts_with(name) && (full != "no-preserve-root" || name.len() >= 2) {
            return Some(match full {
                "recursive" => "--recursive",
                "force" => "--force",
                _ => "--no-preserve-root",
            });
        }
    }
    None
}

/// Skips a wrapper's options (and their values) from `k`; returns the next operand index.
fn skip_options(words: &[String], mut k: usize) -> usize {
    while k < words.len() {
        let w = words[k].as_str();
        if w == "--" {
            return k + 1;
        }
        if is_assignment(w) {
            k += 1;
            continue;
        }
        if !w.starts_with('-') || w == "-" {
            // Numeric operands of `nice`, `timeout`, `taskset`, `chrt`.
            if w.starts_with(|c: char| c.is_ascii_digit()) {
                k += 1;
                continue;
            }
            return k;
        }
        k += if OPTS_WITH_VALUE.contains(&w) { 2 } else { 1 };
    }
    // An option that takes a value can be the last word: never past the end.
    k.min(words.len())
}

/// A home directory as a whole (`~`, `~user`, `$HOME`, `${HOME}`, with trailing `/` or `/.`),
/// not a path below it.
fn is_home(word: &str) -> bool {
    let mut w = word;
    loop {
        let t = w.trim_end_matches('/');
        let t = t.strip_suffix("/.").unwrap_or(t);
        if t == w || t.is_empty() {
            break;
        }
        w = t;
    }
    match w.strip_prefix('~') {
        Some(user) => user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')),
        None => w == "$HOME" || w == "${HOME}",
    }
}

/// What `rm`'s arguments ask for.
struct RmFlags {
    recursive: bool,
    force: bool,
    /// An operand is a home directory as a whole.
    home: bool,
}

fn rm_flags(args: &[String]) -> RmFlags {
    let (mut recursive, mut force, mut home) = (false, false, false);
    let mut options = true;
    for a in args {
        if options && a == "--" {
            options = false;
        } else if options && a.starts_with("--") {
            match rm_option(a) {
                Some("--recursive") => recursive = true,
                Some("--force") => force = true,
                _ => {}
            }
        } else if options && a.starts_with('-') && a.len() > 1 {
            recursive |= a.contains(['r', 'R']);
            force |= a.contains('f');
        } else {
            home |= is_home(a);
        }
    }
    RmFlags {
        recursive,
        force,
        home,
    }
}

/// Top-level directories whose recursive delete takes the system with it, beyond the
/// reference's list: the kernel's file systems and where disks are mounted.
const KERNEL_AND_MOUNT_DIRS: &[&str] = &[
    "dev", "proc", "sys", "run", "mnt", "media", "lib32", "lib64", "libx32",
];

/// An absolute `rm` operand respelled as the table reads it, when its `.`, `..` and doubled
/// `/` hide `/` or a top-level directory (`/proc/..`, `/usr/../etc`), or when it is a kernel
/// or mount directory (read as `/`).
fn rm_operand_respelled(word: &str) -> Option<String> {
    if !word.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in word.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let respelled = match parts.as_slice() {
        [] => "/".to_owned(),
        [top] if KERNEL_AND_MOUNT_DIRS.contains(top) => "/".to_owned(),
        [top] => format!("/{top}"),
        _ => return None,
    };
    (respelled != word).then_some(respelled)
}

/// `find`'s actions that run a command on each file, spelled as the table knows them (`-ok`
/// asks on standard input, which `yes |` or a here-string answers: it is `-exec` for the
/// floor).
fn find_exec_spelling(word: &str) -> Option<&'static str> {
    match word {
        "-exec" | "-ok" => Some("-exec"),
        "-execdir" | "-okdir" => Some("-execdir"),
        _ => None,
    }
}

/// One simple command rewritten.
pub(super) struct Rewritten {
    pub(super) words: Vec<String>,
    /// The index of the command word in the input words (after assignments and wrappers).
    pub(super) command: Option<usize>,
}

/// One simple command rewritten; pushes shell bodies and `eval` texts found in it to `texts`.
pub(super) fn rewrite_command(
    words: &[String],
    texts: &mut Vec<Vec<char>>,
    changed: &mut bool,
) -> Rewritten {
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut k = 0;
    let mut eval_seen = false;
    let mut via_xargs = false;
    // Command position: reserved words, assignments, wrappers, then the command.
    while k < words.len() {
        let w = words[k].as_str();
        if RESERVED.contains(&w) {
            out.push(w.to_owned());
            k += 1;
            continue;
        }
        if is_assignment(w) {
            *changed = true;
            k += 1;
            continue;
        }
        let name = command_name(w);
        if PRIV_WRAPPERS.contains(&name) {
            *changed = true;
            k = skip_options(words, k + 1);
            continue;
        }
        if WRAPPERS.contains(&name) {
            *changed |= name != w;
            via_xargs |= name == "xargs";
            out.push(name.to_owned());
            let next = skip_options(words, k + 1);
            // Only the first `eval`: the text holds the ones after it, and each would copy the
            // rest again (quadratic in `eval eval eval …`).
            if name == "eval" && !eval_seen {
                eval_seen = true;
                // `eval` joins its arguments with spaces and runs the result as a command (it
                // takes no options: a word that looks like an assignment is script text).
                let from = k + 1 + usize::from(words.get(k + 1).is_some_and(|w| w == "--"));
                if from < words.len() {
                    texts.push(words[from..].join(" ").chars().collect());
                }
            }
            out.extend(
                words[k + 1..next]
                    .iter()
                    .filter(|x| !is_assignment(x))
                    .cloned(),
            );
            k = next;
            continue;
        }
        break;
    }
    let Some(cmd) = words.get(k) else {
        return Rewritten {
            words: out,
            command: None,
        };
    };
    let name = command_name(cmd);
    *changed |= name != cmd;
    out.push(name.to_owned());
    let args = &words[k + 1..];
    if SHELLS.contains(&name) {
        if let Some(body) = shell_c_body(args) {
            texts.push(body.chars().collect());
        }
    }
    let mut after_rm = name == "rm";
    // In a home directory its owner runs in, and on names read from standard input, nothing
    // prompts: `-f` changes nothing.
    let flags = rm_flags(args);
    if after_rm && flags.recursive && !flags.force && (flags.home || via_xargs) {
        *changed = true;
        out.push("--force".to_owned());
    }
    let mut find_exec = false;
    for a in args {
        if name == "find" {
            if let Some(exec) = find_exec_spelling(a) {
                *changed |= exec != a;
                out.push(exec.to_owned());
                find_exec = true;
                continue;
            }
            // The command `find` runs on every file: a delete, forced or not, deletes all, and
            // an overwrite destroys all.
            if std::mem::take(&mut find_exec)
                && matches!(command_name(a), "rm" | "unlink" | "shred")
            {
                *changed = true;
                after_rm = true;
                out.extend(["rm".to_owned(), "--force".to_owned()]);
                continue;
            }
        }
        if after_rm {
            if let Some(full) = rm_option(a) {
                *changed |= full != a;
                out.push(full.to_owned());
                continue;
            }
            if let Some(path) = rm_operand_respelled(a) {
                *changed = true;
                out.push(path);
                continue;
            }
        }
        if command_name(a) == "rm" {
            *changed |= a != "rm";
            after_rm = true;
            out.push("rm".to_owned());
            continue;
        }
        out.push(a.clone());
    }
    Rewritten {
        words: out,
        command: Some(k),
    }
}

/// The `-c` body of a shell's arguments, past `--` and option arguments (`-o errexit`).
fn shell_c_body(args: &[String]) -> Option<&str> {
    let mut pending = 0usize;
    let mut c_seen = false;
    for a in args {
        if pending > 0 {
            pending -= 1;
            continue;
        }
        if a == "--" {
            if c_seen {
                continue;
            }
            return None;
        }
        if a == "--rcfile" || a == "--init-file" {
            pending += 1;
            continue;
        }
        if a.starts_with("--") {
            continue;
        }
        if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 {
            pending += a.chars().filter(|&ch| ch == 'o' || ch == 'O').count();
            if a.starts_with('-') && a.contains('c') {
                c_seen = true;
            }
            continue;
        }
        return c_seen.then_some(a.as_str());
    }
    None
}

/// Whether a shell command reads its script from standard input (no `-c`, no script file).
pub(super) fn shell_reads_stdin(words: &[String]) -> bool {
    let mut k = 0;
    while k < words.len() {
        let w = words[k].as_str();
        let name = command_name(w);
        if is_assignment(w) {
            k += 1;
        } else if PRIV_WRAPPERS.contains(&name) || WRAPPERS.contains(&name) {
            k = skip_options(words, k + 1);
        } else {
            break;
        }
    }
    let Some(cmd) = words.get(k) else {
        return false;
    };
    let name = command_name(cmd);
    if name == "source" || name == "." {
        return words.get(k + 1).is_some_and(|f| is_stdin(f));
    }
    if !SHELLS.contains(&name) {
        return false;
    }
    let mut pending = 0usize;
    for a in &words[k + 1..] {
        if pending > 0 {
            pending -= 1;
            continue;
        }
        if a == "-s" || a == "--" {
            return true;
        }
        if a.starts_with('-') || a.starts_with('+') {
            if a.starts_with('-') && !a.starts_with("--") && a.contains('c') {
                return false;
            }
            pending += a.chars().filter(|&ch| ch == 'o' || ch == 'O').count();
            continue;
        }
        return is_stdin(a);
    }
    true
}

/// A file name that is the reader's standard input.
fn is_stdin(file: &str) -> bool {
    matches!(file, "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0" | "-")
}

/// Whether the command runs a script file it is given as an operand (a shell, `source`, `.`):
/// a process substitution there is its script.
pub(super) fn runs_script_operand(words: &[String], command: Option<usize>) -> bool {
    command.and_then(|k| words.get(k)).is_some_and(|w| {
        matches!(command_name(w), "source" | ".") || SHELLS.contains(&command_name(w))
    })
}

/// What a command substitution or process substitution prints that its text shows: the
/// arguments of `echo` / `printf`, the here-string of `cat`, for each of its commands.
pub(super) fn visible_output(body: &[char], texts: &mut Vec<Vec<char>>) {
    // Nothing printed is visible without a writer's name: spare the tokenizing (a deep nest of
    // substitutions would otherwise be read twice over at every level).
    let named = |w: &str| {
        let w: Vec<char> = w.chars().collect();
        body.windows(w.len()).any(|x| x == w.as_slice())
    };
    if !(named("echo") || named("printf") || named("cat")) {
        return;
    }
    let lx = tokenize(body);
    let mut words: Vec<String> = Vec::new();
    let mut attached = lx.attached.iter().peekable();
    let end = std::iter::once((lx.toks.len(), &Tok::Op(";")));
    for (t, tok) in lx.toks.iter().enumerate().chain(end) {
        match tok {
            Tok::Word(w) => words.push(w.clone()),
            Tok::Op(_) => {
                let mut here: Option<&Attached> = None;
                while let Some(a) = attached.next_if(|a| a.token <= t) {
                    if a.feed == Feed::HereString {
                        here = Some(a);
                    }
                }
                writer_texts(&words, texts);
                if let Some(h) = here.filter(|_| passes_stdin_on(&words)) {
                    texts.push(lx.body(h).to_vec());
                }
                words.clear();
            }
        }
    }
}

/// `tee`, or `cat` with no file operand: what it writes is its standard input.
pub(super) fn copies_stdin(words: &[String]) -> bool {
    words.first().is_some_and(|w| command_name(w) == "tee") || passes_stdin_on(words)
}

/// `cat` with no file operand: it prints its standard input.
pub(super) fn passes_stdin_on(words: &[String]) -> bool {
    words.first().is_some_and(|w| command_name(w) == "cat")
        && words[1..].iter().all(|a| a.starts_with('-'))
}

/// The texts a pipe writer (`echo`, `printf`) hands to a shell: each argument and all of them.
pub(super) fn writer_texts(words: &[String], texts: &mut Vec<Vec<char>>) {
    let Some(first) = words.first() else { return };
    let name = command_name(first);
    if name != "echo" && name != "printf" {
        return;
    }
    let args: Vec<Vec<char>> = words[1..]
        .iter()
        .filter(|a| !(name == "echo" && matches!(a.as_str(), "-n" | "-e" | "-E" | "-ne" | "-en")))
        .map(|a| decode_ansi_c(&a.chars().collect::<Vec<_>>()))
        .collect();
    let mut joined: Vec<char> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            joined.push(' ');
        }
        joined.extend(a);
    }
    texts.extend(args);
    texts.push(joined);
}
