//! Canonical spellings for the hardline floor: gaps the reference's
//! scanner shares, closed by rewriting a command into texts the table already judges.
//!
//! One linear pass splits a text into shell words (quotes, `$'…'`, escapes decoded) and
//! operators, then per simple command:
//! - leading `NAME=VALUE` assignments are dropped, whatever their quoting (`FOO="a b" rm`);
//! - privilege wrappers the reference does not know (`doas`, `pkexec`, `run0`) are dropped
//!   with their options;
//! - a command word given as a path is reduced to its name (`/bin//rm`, `../../bin/rm`),
//!   also after the reference's wrappers (`env /bin//rm`);
//! - `rm`'s GNU long-option abbreviations are spelled out (`--rec --for`);
//! - the body of `sh -c` is found past `--` and option arguments (`bash -c -- '…'`,
//!   `bash -o errexit -c '…'`) and judged as a text of its own;
//! - a shell reading its script from a pipe (`printf '%s' '…' | bash`) has the writer's
//!   arguments judged as texts (backslash escapes decoded, as `printf` and `echo -e` do);
//! - the contents of `$(…)` and backquotes are judged as texts;
//! - backslash-newline continuations are removed (they join words);
//! - a function that calls itself twice through a pipe or `&` and is then called is a fork
//!   bomb, whatever its name (`f(){ f|f& };f`);
//! - what a shell or `source` runs as its script is judged as a text when the command shows it:
//!   a here-string (`bash<<<'…'`, `. /dev/stdin <<< '…'`), a here-string passed on by `cat`
//!   through a pipe, what `echo` / `printf` print inside a process substitution (`. <(echo …)`)
//!   or inside a command substitution that stands for the command word
//!   (`bash -c "$(printf '%s' '…')"`), and the arguments of `eval`;
//! - `rm` recursive without force on a home directory (`rm -r ~`, `rm -r "$HOME"`) is respelled
//!   with `--force`: nothing prompts in a directory the user owns;
//! - `find … -exec rm` / `-ok rm` / `-exec unlink` is respelled `-exec rm --force`, so the
//!   table's row judges it on its paths;
//! - an output redirection onto a raw block device is found whatever its operator
//!   (`>|`, `1>`, `&>`, `<>`) or spelling of the path (`/dev//sda`).
//!
//! The rewritten command is emitted with words needing it single-quoted, so a literal stays a
//! literal for the scanner. Every output is at most as long as its input plus quoting.

use super::lex::decode_ansi_c;

/// What the rewriting found in one text.
#[derive(Debug, Default)]
pub(super) struct Canon {
    /// A self-calling function run in the background or through a pipe, then called.
    pub(crate) fork_bomb: bool,
    /// An output redirection whose target is a raw block device.
    pub(crate) device_redirect: bool,
    /// The command respelled, when a rewrite changed something the scanner would read.
    pub(crate) canonical: Option<Vec<char>>,
    /// Raw texts to judge: shell bodies, pipe-fed scripts, substitutions.
    pub(crate) texts: Vec<Vec<char>>,
}

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

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A word with its quoting removed.
    Word(String),
    /// `|`, `|&`, `||`, `&`, `&&`, `;`, `;;`, newline, `(`, `)`.
    Op(&'static str),
}

/// How a text found inside a command reaches it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Feed {
    /// `$(…)` or backquotes: its output becomes words of the command.
    CommandSub,
    /// `<(…)`: its output is a file the command reads.
    ProcessSub,
    /// `<<< word`: the word is the command's standard input.
    HereString,
}

/// A text fed to the simple command holding token `token` (for a process substitution or a
/// here-string, the token that follows it, which is still in the same command or ends it):
/// `index` into [`Lexed::here_strings`] for a here-string, into [`Lexed::subs`] otherwise.
#[derive(Debug)]
struct Attached {
    token: usize,
    feed: Feed,
    index: usize,
}

/// What the next word read is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum NextWord {
    Word,
    /// The target of an input redirection or a here-doc delimiter: dropped.
    Dropped,
    /// The target of an output redirection: dropped, after a look at whether it is a device.
    OutputTarget,
    /// The word of `<<<`.
    HereString,
}

/// A text split into words and operators.
#[derive(Debug, Default)]
struct Lexed {
    toks: Vec<Tok>,
    /// The bodies of every `$(…)`, backquote and `<(…)`, in order.
    subs: Vec<Vec<char>>,
    here_strings: Vec<Vec<char>>,
    attached: Vec<Attached>,
    /// An output redirection onto a raw block device was seen.
    device_redirect: bool,
}

impl Lexed {
    /// The word `word` is complete: it becomes a token, or what the redirection before it asks.
    fn flush(&mut self, word: &mut String, in_word: &mut bool, next: &mut NextWord) {
        if !*in_word {
            return;
        }
        let w = std::mem::take(word);
        match std::mem::replace(next, NextWord::Word) {
            NextWord::Word => self.toks.push(Tok::Word(w)),
            NextWord::Dropped => {}
            NextWord::OutputTarget => self.device_redirect |= is_raw_device(&w),
            NextWord::HereString => {
                self.attached.push(Attached {
                    token: self.toks.len(),
                    feed: Feed::HereString,
                    index: self.here_strings.len(),
                });
                self.here_strings.push(w.chars().collect());
            }
        }
        *in_word = false;
    }

    /// A substitution's body: judged as a text of its own, and remembered as fed to the word
    /// being read.
    fn substitution(&mut self, body: &[char], feed: Feed) {
        self.attached.push(Attached {
            token: self.toks.len(),
            feed,
            index: self.subs.len(),
        });
        self.subs.push(body.to_vec());
    }

    fn body(&self, a: &Attached) -> &[char] {
        match a.feed {
            Feed::HereString => &self.here_strings[a.index],
            Feed::CommandSub | Feed::ProcessSub => &self.subs[a.index],
        }
    }
}

/// Whether a redirection target names a raw block device (`/dev/sda`, `/dev//nvme0n1`).
fn is_raw_device(target: &str) -> bool {
    let mut path = String::with_capacity(target.len());
    for part in target.split('/') {
        if part.is_empty() || part == "." {
            continue;
        }
        path.push('/');
        path.push_str(part);
    }
    let path = path.to_ascii_lowercase();
    path.strip_prefix("/dev/").is_some_and(|d| {
        super::patterns::RAW_DEVICES
            .iter()
            .any(|r| d.starts_with(r))
    }) && target.starts_with('/')
}

/// Splits `text` into words and operators (see [`Lexed`]). Redirections and their targets are
/// dropped; a here-string's word is kept as fed to its command.
fn tokenize(text: &[char]) -> Lexed {
    let n = text.len();
    let mut lx = Lexed::default();
    let mut word = String::new();
    let mut in_word = false;
    let mut next_word = NextWord::Word;
    let mut i = 0;
    while i < n {
        let c = text[i];
        match c {
            ' ' | '\t' | '\u{a0}' => {
                lx.flush(&mut word, &mut in_word, &mut next_word);
                i += 1;
            }
            '\\' if i + 1 < n => {
                if text[i + 1] != '\n' {
                    word.push(text[i + 1]);
                    in_word = true;
                }
                i += 2;
            }
            '\'' => {
                in_word = true;
                let end = text[i + 1..]
                    .iter()
                    .position(|&q| q == '\'')
                    .map_or(n, |p| i + 1 + p);
                word.extend(&text[i + 1..end]);
                i = end + 1;
            }
            '"' => {
                in_word = true;
                let mut j = i + 1;
                while j < n && text[j] != '"' {
                    if text[j] == '\\' && j + 1 < n && matches!(text[j + 1], '"' | '\\' | '$' | '`')
                    {
                        word.push(text[j + 1]);
                        j += 2;
                        continue;
                    }
                    // A substitution is copied whole (its own words are judged as a text
                    // of its own), so nothing inside it is looked at twice here.
                    if text[j] == '$' && j + 1 < n && text[j + 1] == '(' {
                        let end = balanced(text, j + 2);
                        lx.substitution(&text[j + 2..end.min(n)], Feed::CommandSub);
                        word.extend(&text[j..(end + 1).min(n)]);
                        j = end + 1;
                        continue;
                    }
                    if text[j] == '`' {
                        j = take_backticks(text, j, &mut lx, &mut word);
                        continue;
                    }
                    word.push(text[j]);
                    j += 1;
                }
                i = j + 1;
            }
            '$' if i + 1 < n && text[i + 1] == '\'' => {
                in_word = true;
                let mut j = i + 2;
                while j < n && text[j] != '\'' {
                    j += if text[j] == '\\' { 2 } else { 1 };
                }
                let j = j.min(n);
                word.extend(decode_ansi_c(&text[i + 2..j]));
                i = j + 1;
            }
            '$' if i + 1 < n && text[i + 1] == '(' => {
                in_word = true;
                let end = balanced(text, i + 2);
                lx.substitution(&text[i + 2..end.min(n)], Feed::CommandSub);
                word.extend(&text[i..(end + 1).min(n)]);
                i = end + 1;
            }
            '`' => {
                in_word = true;
                i = take_backticks(text, i, &mut lx, &mut word);
            }
            '#' if !in_word => {
                while i < n && text[i] != '\n' {
                    i += 1;
                }
            }
            '<' | '>' => {
                lx.flush(&mut word, &mut in_word, &mut next_word);
                // A process substitution is a body (the file a reader of `<(…)` reads); any
                // other redirection drops its target.
                if i + 1 < n && text[i + 1] == '(' {
                    let end = balanced(text, i + 2);
                    let body = &text[i + 2..end.min(n)];
                    if c == '<' {
                        lx.substitution(body, Feed::ProcessSub);
                    } else {
                        lx.subs.push(body.to_vec());
                    }
                    // `bash < <(…)`: the substitution was the redirection's target.
                    next_word = NextWord::Word;
                    i = end + 1;
                    continue;
                }
                // A digit right before belongs to the redirection (`2>`), not to a word.
                if let Some(Tok::Word(w)) = lx.toks.last() {
                    if !w.is_empty()
                        && w.chars().all(|d| d.is_ascii_digit())
                        && i > 0
                        && !text[i - 1].is_whitespace()
                    {
                        lx.toks.pop();
                    }
                }
                let start = i;
                while i < n && matches!(text[i], '<' | '>' | '&' | '|' | '-') {
                    i += 1;
                }
                let op: String = text[start..i].iter().collect();
                next_word = if op == "<<<" {
                    NextWord::HereString
                } else if op.contains('>') {
                    NextWord::OutputTarget
                } else {
                    NextWord::Dropped
                };
            }
            '|' | '&' | ';' | '\n' | '\r' | '(' | ')' => {
                lx.flush(&mut word, &mut in_word, &mut next_word);
                let two = |a: char| i + 1 < n && text[i + 1] == a;
                let (op, len) = match c {
                    '|' if two('|') => ("||", 2),
                    '|' if two('&') => ("|&", 2),
                    '|' => ("|", 1),
                    '&' if two('&') => ("&&", 2),
                    '&' => ("&", 1),
                    ';' if two(';') => (";;", 2),
                    ';' => (";", 1),
                    '(' => ("(", 1),
                    ')' => (")", 1),
                    _ => ("\n", 1),
                };
                lx.toks.push(Tok::Op(op));
                i += len;
            }
            _ => {
                word.push(c);
                in_word = true;
                i += 1;
            }
        }
    }
    lx.flush(&mut word, &mut in_word, &mut next_word);
    lx
}

/// The index of the `)` closing a `(` whose contents start at `from` (quotes respected
/// roughly: parentheses inside quotes do not count); `text.len()` when unclosed.
/// A backtick substitution opening at `open`: its body is a substitution of the word being
/// read, its text joins `word`; returns the index after the closing backtick (or the end of an
/// unclosed one).
fn take_backticks(text: &[char], open: usize, lx: &mut Lexed, word: &mut String) -> usize {
    let n = text.len();
    let end = text[open + 1..]
        .iter()
        .position(|&q| q == '`')
        .map_or(n, |p| open + 1 + p);
    lx.substitution(&text[open + 1..end], Feed::CommandSub);
    word.extend(&text[open..(end + 1).min(n)]);
    end + 1
}

fn balanced(text: &[char], from: usize) -> usize {
    let mut depth = 1usize;
    let mut quote: Option<char> = None;
    let mut j = from;
    while j < text.len() {
        let c = text[j];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '\\' => j += 1,
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return j;
                    }
                }
                _ => {}
            },
        }
        j += 1;
    }
    text.len()
}

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

/// `rm` arguments that delete a home directory recursively without `-f`: in a directory its
/// owner runs in, nothing prompts, so `-f` changes nothing.
fn recursive_without_force_on_home(args: &[String]) -> bool {
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
    recursive && !force && home
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
struct Rewritten {
    words: Vec<String>,
    /// The index of the command word in the input words (after assignments and wrappers).
    command: Option<usize>,
}

/// One simple command rewritten; pushes shell bodies and `eval` texts found in it to `texts`.
fn rewrite_command(words: &[String], texts: &mut Vec<Vec<char>>, changed: &mut bool) -> Rewritten {
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut k = 0;
    let mut eval_seen = false;
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
    if after_rm && recursive_without_force_on_home(args) {
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
            // The command `find` runs on every file: a delete, forced or not, deletes all.
            if std::mem::take(&mut find_exec) && matches!(command_name(a), "rm" | "unlink") {
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
fn shell_reads_stdin(words: &[String]) -> bool {
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
fn runs_script_operand(words: &[String], command: Option<usize>) -> bool {
    command.and_then(|k| words.get(k)).is_some_and(|w| {
        matches!(command_name(w), "source" | ".") || SHELLS.contains(&command_name(w))
    })
}

/// What a command substitution or process substitution prints that its text shows: the
/// arguments of `echo` / `printf`, the here-string of `cat`, for each of its commands.
fn visible_output(body: &[char], texts: &mut Vec<Vec<char>>) {
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

/// `cat` with no file operand: it prints its standard input.
fn passes_stdin_on(words: &[String]) -> bool {
    words.first().is_some_and(|w| command_name(w) == "cat")
        && words[1..].iter().all(|a| a.starts_with('-'))
}

/// The texts a pipe writer (`echo`, `printf`) hands to a shell: each argument and all of them.
fn writer_texts(words: &[String], texts: &mut Vec<Vec<char>>) {
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

/// Whether a word needs quoting to stay one literal word.
fn needs_quote(w: &str) -> bool {
    w.is_empty()
        || w.chars().any(|c| {
            c.is_whitespace()
                || matches!(
                    c,
                    ';' | '&' | '|' | '(' | ')' | '<' | '>' | '\'' | '"' | '\\' | '$' | '`' | '#'
                )
        })
}

fn emit_word(out: &mut Vec<char>, w: &str) {
    if needs_quote(w) {
        out.push('\'');
        for c in w.chars() {
            if c == '\'' {
                out.extend(['\'', '\\', '\'', '\'']);
            } else {
                out.push(c);
            }
        }
        out.push('\'');
    } else {
        out.extend(w.chars());
    }
}

/// Fork bombs under any name: `NAME(){ … NAME … NAME … }` with `|` or `&` in the body,
/// or `function NAME { … }`, followed later by a call of `NAME`.
fn fork_bomb(toks: &[Tok]) -> bool {
    let word = |i: usize| match toks.get(i) {
        Some(Tok::Word(w)) => Some(w.as_str()),
        _ => None,
    };
    let op = |i: usize, o: &str| matches!(toks.get(i), Some(Tok::Op(x)) if *x == o);
    let mut i = 0;
    while i < toks.len() {
        let (name, mut b) = match word(i) {
            Some("function") => match word(i + 1) {
                Some(nm) => {
                    let mut b = i + 2;
                    if op(b, "(") && op(b + 1, ")") {
                        b += 2;
                    }
                    (nm, b)
                }
                None => {
                    i += 1;
                    continue;
                }
            },
            Some(nm) if op(i + 1, "(") && op(i + 2, ")") => (nm, i + 3),
            _ => {
                i += 1;
                continue;
            }
        };
        while op(b, "\n") {
            b += 1;
        }
        // The body: `{ … }` (words) or `( … )` (operators), nesting counted.
        let (open_word, close): (bool, &str) = match (word(b), &toks.get(b)) {
            (Some("{"), _) => (true, "}"),
            (_, Some(Tok::Op("("))) => (false, ")"),
            _ => {
                i += 1;
                continue;
            }
        };
        let mut depth = 1usize;
        let mut j = b + 1;
        let mut calls = 0usize;
        let mut spawns = false;
        let mut at_cmd = true;
        while j < toks.len() {
            match &toks[j] {
                Tok::Word(w) if open_word && w == "{" => depth += 1,
                Tok::Word(w) if open_word && w == close => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Tok::Op("(") if !open_word => depth += 1,
                Tok::Op(")") if !open_word => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            match &toks[j] {
                Tok::Word(w) => {
                    if at_cmd && (w == name || w.trim_end_matches('&') == name) {
                        calls += 1;
                    }
                    at_cmd = w == "{" || w == "!";
                }
                Tok::Op(o) => {
                    if matches!(*o, "|" | "&" | "|&") {
                        spawns = true;
                    }
                    at_cmd = true;
                }
            }
            j += 1;
        }
        if calls >= 2 && spawns {
            let called_later = toks[j.min(toks.len())..]
                .windows(2)
                .any(|p| matches!((&p[0], &p[1]), (Tok::Op(_), Tok::Word(w)) if w == name));
            if called_later {
                return true;
            }
        }
        i = j.max(i + 1);
    }
    false
}

/// The respelled text being built, one simple command at a time.
struct Respelling<'a> {
    out: Vec<char>,
    /// The command being read (with the token index of each word), and the one before it in
    /// the pipeline (with its here-string).
    words: Vec<String>,
    word_tokens: Vec<usize>,
    prev_words: Vec<String>,
    prev_here: Option<&'a Attached>,
    piped: bool,
    changed: bool,
    texts: Vec<Vec<char>>,
    lx: &'a Lexed,
    /// The texts fed to commands not finished yet, in token order.
    attached: std::iter::Peekable<std::slice::Iter<'a, Attached>>,
}

impl<'a> Respelling<'a> {
    /// Rewrites the command read so far (its tokens end before `end_token`) into `out`. A shell
    /// or `source` also has what it would run judged: the writer before it in a pipe, its
    /// here-string, what its process substitution prints; and a command word that is a
    /// substitution has what that prints judged.
    fn finish_command(&mut self, end_token: usize) {
        let mut feeds: Vec<&'a Attached> = Vec::new();
        while let Some(a) = self.attached.next_if(|a| a.token <= end_token) {
            feeds.push(a);
        }
        if self.words.is_empty() {
            return;
        }
        let here = feeds.iter().copied().find(|a| a.feed == Feed::HereString);
        if shell_reads_stdin(&self.words) {
            if let Some(h) = here {
                self.texts.push(self.lx.body(h).to_vec());
            }
            if self.piped {
                writer_texts(&self.prev_words, &mut self.texts);
                if let Some(h) = self.prev_here.filter(|_| passes_stdin_on(&self.prev_words)) {
                    self.texts.push(self.lx.body(h).to_vec());
                }
            }
        }
        let rewritten = rewrite_command(&self.words, &mut self.texts, &mut self.changed);
        if runs_script_operand(&self.words, rewritten.command) {
            for a in feeds.iter().filter(|a| a.feed == Feed::ProcessSub) {
                visible_output(self.lx.body(a), &mut self.texts);
            }
        }
        if let Some(tok) = rewritten.command.map(|k| self.word_tokens[k]) {
            for a in feeds
                .iter()
                .filter(|a| a.feed == Feed::CommandSub && a.token == tok)
            {
                visible_output(self.lx.body(a), &mut self.texts);
            }
        }
        for (i, w) in rewritten.words.iter().enumerate() {
            if i > 0 {
                self.out.push(' ');
            }
            emit_word(&mut self.out, w);
        }
        self.prev_words = std::mem::take(&mut self.words);
        self.word_tokens.clear();
        self.prev_here = here;
    }
}

/// Rewrites one text (see the module doc).
pub(super) fn canonicalize(text: &[char]) -> Canon {
    let lx = tokenize(text);
    let mut r = Respelling {
        out: Vec::with_capacity(text.len() + 16),
        words: Vec::new(),
        word_tokens: Vec::new(),
        prev_words: Vec::new(),
        prev_here: None,
        piped: false,
        // A backslash-newline joins words (`r\<newline>m` is `rm`): the respelling removes it.
        changed: text.windows(2).any(|w| w == ['\\', '\n']),
        texts: Vec::new(),
        lx: &lx,
        attached: lx.attached.iter().peekable(),
    };
    for (i, t) in lx.toks.iter().enumerate() {
        match t {
            Tok::Word(w) => {
                r.words.push(w.clone());
                r.word_tokens.push(i);
            }
            Tok::Op(o) => {
                r.finish_command(i);
                r.piped = matches!(*o, "|" | "|&");
                if !r.piped {
                    r.prev_words.clear();
                    r.prev_here = None;
                }
                r.out.push(' ');
                r.out.extend(o.chars());
                r.out.push(' ');
            }
        }
    }
    r.finish_command(lx.toks.len());
    let mut texts = r.texts;
    let (out, changed) = (r.out, r.changed);
    texts.extend(lx.subs);
    Canon {
        fork_bomb: fork_bomb(&lx.toks),
        device_redirect: lx.device_redirect,
        canonical: changed.then_some(out),
        texts,
    }
}
