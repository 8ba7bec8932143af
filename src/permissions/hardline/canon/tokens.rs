//! The canonicaliser's single pass over a text: shell words (quotes, `$'…'`, escapes
//! decoded), operators, the substitutions and here-strings each command is fed, and output
//! redirections onto raw block devices.

use super::decode_ansi_c;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    /// A word with its quoting removed.
    Word(String),
    /// `|`, `|&`, `||`, `&`, `&&`, `;`, `;;`, newline, `(`, `)`.
    Op(&'static str),
}

/// How a text found inside a command reaches it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Feed {
    /// `$(…)` or backquotes: its output becomes words of the command.
    CommandSub,
    /// `<(…)`: its output is a file the command reads.
    ProcessSub,
    /// `>(…)`: a file the command writes is the standard input of the body.
    OutputProcessSub,
    /// `<<< word`: the word is the command's standard input.
    HereString,
}

/// A text fed to the simple command holding token `token` (for a process substitution or a
/// here-string, the token that follows it, which is still in the same command or ends it):
/// `index` into [`Lexed::here_strings`] for a here-string, into [`Lexed::subs`] otherwise.
#[derive(Debug)]
pub(super) struct Attached {
    pub(super) token: usize,
    pub(super) feed: Feed,
    pub(super) index: usize,
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
pub(super) struct Lexed {
    pub(super) toks: Vec<Tok>,
    /// The bodies of every `$(…)`, backquote and `<(…)`, in order.
    pub(super) subs: Vec<Vec<char>>,
    pub(super) here_strings: Vec<Vec<char>>,
    pub(super) attached: Vec<Attached>,
    /// An output redirection onto a raw block device was seen.
    pub(super) device_redirect: bool,
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

    pub(super) fn body(&self, a: &Attached) -> &[char] {
        match a.feed {
            Feed::HereString => &self.here_strings[a.index],
            Feed::CommandSub | Feed::ProcessSub | Feed::OutputProcessSub => &self.subs[a.index],
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
        super::super::patterns::RAW_DEVICES
            .iter()
            .any(|r| d.starts_with(r))
    }) && target.starts_with('/')
}

/// Splits `text` into words and operators (see [`Lexed`]). Redirections and their targets are
/// dropped; a here-string's word is kept as fed to its command.
pub(super) fn tokenize(text: &[char]) -> Lexed {
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
                    let feed = if c == '<' {
                        Feed::ProcessSub
                    } else {
                        Feed::OutputProcessSub
                    };
                    lx.substitution(body, feed);
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
