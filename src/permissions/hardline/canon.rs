//! Canonical spellings for the hardline floor (issue 9, finding 4): gaps the reference's
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
//!   bomb, whatever its name (`f(){ f|f& };f`).
//!
//! The rewritten command is emitted with words needing it single-quoted, so a literal stays a
//! literal for the scanner. Every output is at most as long as its input plus quoting.

use super::lex::decode_ansi_c;

/// What the rewriting found in one text.
#[derive(Debug, Default)]
pub(super) struct Canon {
    /// A self-calling function run in the background or through a pipe, then called.
    pub(crate) fork_bomb: bool,
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

/// Splits `text` into words and operators; collects `$(…)` / backquote bodies into `subs`.
/// Redirections and their targets are dropped.
fn tokenize(text: &[char], subs: &mut Vec<Vec<char>>) -> Vec<Tok> {
    let n = text.len();
    let mut toks = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut skip_next_word = false;
    let mut i = 0;
    let flush = |word: &mut String, in_word: &mut bool, toks: &mut Vec<Tok>, skip: &mut bool| {
        if *in_word {
            if *skip {
                *skip = false;
            } else {
                toks.push(Tok::Word(std::mem::take(word)));
            }
            word.clear();
            *in_word = false;
        }
    };
    while i < n {
        let c = text[i];
        match c {
            ' ' | '\t' | '\u{a0}' => {
                flush(&mut word, &mut in_word, &mut toks, &mut skip_next_word);
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
                        subs.push(text[j + 2..end.min(n)].to_vec());
                        word.extend(&text[j..(end + 1).min(n)]);
                        j = end + 1;
                        continue;
                    }
                    if text[j] == '`' {
                        j = take_backticks(text, j, subs, &mut word);
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
                subs.push(text[i + 2..end.min(n)].to_vec());
                word.extend(&text[i..(end + 1).min(n)]);
                i = end + 1;
            }
            '`' => {
                in_word = true;
                i = take_backticks(text, i, subs, &mut word);
            }
            '#' if !in_word => {
                while i < n && text[i] != '\n' {
                    i += 1;
                }
            }
            '<' | '>' => {
                flush(&mut word, &mut in_word, &mut toks, &mut skip_next_word);
                // A process substitution is a body; any other redirection drops its target.
                if i + 1 < n && text[i + 1] == '(' {
                    let end = balanced(text, i + 2);
                    subs.push(text[i + 2..end.min(n)].to_vec());
                    i = end + 1;
                    continue;
                }
                // A digit right before belongs to the redirection (`2>`), not to a word.
                if let Some(Tok::Word(w)) = toks.last() {
                    if !w.is_empty()
                        && w.chars().all(|d| d.is_ascii_digit())
                        && i > 0
                        && !text[i - 1].is_whitespace()
                    {
                        toks.pop();
                    }
                }
                while i < n && matches!(text[i], '<' | '>' | '&' | '|' | '-') {
                    i += 1;
                }
                // `<<<` feeds its word to the command: keep it as a body.
                skip_next_word = true;
            }
            '|' | '&' | ';' | '\n' | '\r' | '(' | ')' => {
                flush(&mut word, &mut in_word, &mut toks, &mut skip_next_word);
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
                toks.push(Tok::Op(op));
                i += len;
            }
            _ => {
                word.push(c);
                in_word = true;
                i += 1;
            }
        }
    }
    flush(&mut word, &mut in_word, &mut toks, &mut skip_next_word);
    toks
}

/// The index of the `)` closing a `(` whose contents start at `from` (quotes respected
/// roughly: parentheses inside quotes do not count); `text.len()` when unclosed.
/// A backtick substitution opening at `open`: its body is queued in `subs`, its text joins
/// `word`; returns the index after the closing backtick (or the end of an unclosed one).
fn take_backticks(
    text: &[char],
    open: usize,
    subs: &mut Vec<Vec<char>>,
    word: &mut String,
) -> usize {
    let n = text.len();
    let end = text[open + 1..]
        .iter()
        .position(|&q| q == '`')
        .map_or(n, |p| open + 1 + p);
    subs.push(text[open + 1..end].to_vec());
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

/// One simple command rewritten; pushes shell bodies found in it to `texts`.
fn rewrite_command(
    words: &[String],
    texts: &mut Vec<Vec<char>>,
    changed: &mut bool,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut k = 0;
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
        return out;
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
    for a in args {
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
    out
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
    if !SHELLS.contains(&command_name(cmd)) {
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
        return false;
    }
    true
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
struct Respelling {
    out: Vec<char>,
    /// The command being read, and the one before it in the pipeline.
    words: Vec<String>,
    prev_words: Vec<String>,
    piped: bool,
    changed: bool,
    texts: Vec<Vec<char>>,
}

impl Respelling {
    /// Rewrites the command read so far into `out`; a shell fed by a pipe also checks what the
    /// writer before it printed.
    fn finish_command(&mut self) {
        if self.words.is_empty() {
            return;
        }
        if self.piped && shell_reads_stdin(&self.words) {
            writer_texts(&self.prev_words, &mut self.texts);
        }
        let rewritten = rewrite_command(&self.words, &mut self.texts, &mut self.changed);
        for (i, w) in rewritten.iter().enumerate() {
            if i > 0 {
                self.out.push(' ');
            }
            emit_word(&mut self.out, w);
        }
        self.prev_words = std::mem::take(&mut self.words);
    }
}

/// Rewrites one text (see the module doc).
pub(super) fn canonicalize(text: &[char]) -> Canon {
    let mut subs = Vec::new();
    let toks = tokenize(text, &mut subs);
    let mut r = Respelling {
        out: Vec::with_capacity(text.len() + 16),
        words: Vec::new(),
        prev_words: Vec::new(),
        piped: false,
        // A backslash-newline joins words (`r\<newline>m` is `rm`): the respelling removes it.
        changed: text.windows(2).any(|w| w == ['\\', '\n']),
        texts: Vec::new(),
    };
    for t in &toks {
        match t {
            Tok::Word(w) => r.words.push(w.clone()),
            Tok::Op(o) => {
                r.finish_command();
                r.piped = matches!(*o, "|" | "|&");
                if !r.piped {
                    r.prev_words.clear();
                }
                r.out.push(' ');
                r.out.extend(o.chars());
                r.out.push(' ');
            }
        }
    }
    r.finish_command();
    let mut texts = r.texts;
    texts.extend(subs);
    Canon {
        fork_bomb: fork_bomb(&toks),
        canonical: r.changed.then_some(r.out),
        texts,
    }
}
