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
//! - what a command writes into a shell's output process substitution is judged as that
//!   shell's script (`echo … | tee >(sh)`, `printf … > >(bash)`);
//! - `xargs … rm` recursive without force is respelled with `--force` (what it deletes comes
//!   from standard input, and nothing prompts there), and `find … -exec shred` as
//!   `-exec rm --force` (overwriting every file destroys it as surely as deleting it);
//! - an absolute `rm` operand is read with its `.`, `..` and doubled `/` resolved
//!   (`/proc/..` is `/`), and a top-level kernel or mount directory (`/dev`, `/proc`, `/sys`,
//!   `/run`, `/mnt`, `/media`, `/lib64`, …) counts as `/`;
//! - an output redirection onto a raw block device is found whatever its operator
//!   (`>|`, `1>`, `&>`, `<>`) or spelling of the path (`/dev//sda`).
//!
//! The rewritten command is emitted with words needing it single-quoted, so a literal stays a
//! literal for the scanner. Every output is at most as long as its input plus quoting.

mod fork_bomb;
mod rewrite;
mod tokens;

use fork_bomb::fork_bomb;
use rewrite::{
    copies_stdin, passes_stdin_on, rewrite_command, runs_script_operand, shell_reads_stdin,
    visible_output, writer_texts,
};
use tokens::{tokenize, Attached, Feed, Lexed, Tok};

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
    /// Judges what the command being read gets on its standard input: its here-string, and in
    /// a pipe what the writer before it prints or passes on.
    fn judge_stdin(&mut self, here: Option<&'a Attached>) {
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
            self.judge_stdin(here);
        }
        // `echo … | tee >(sh)`, `echo … > >(sh)`: what the command writes into a shell's
        // process substitution is that shell's script.
        let feeds_a_shell = feeds.iter().any(|a| {
            a.feed == Feed::OutputProcessSub && shell_reads_stdin(&first_command(self.lx.body(a)))
        });
        if feeds_a_shell {
            writer_texts(&self.words, &mut self.texts);
            if copies_stdin(&self.words) {
                self.judge_stdin(here);
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

/// The words of the first simple command of `body`.
fn first_command(body: &[char]) -> Vec<String> {
    tokenize(body)
        .toks
        .into_iter()
        .map_while(|t| match t {
            Tok::Word(w) => Some(w),
            Tok::Op(_) => None,
        })
        .collect()
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
