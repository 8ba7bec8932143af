//! Per-text index: token boundaries, next-occurrence tables, and the command-position head
//! (assignments, wrappers and their flags) shared by the patterns and the nested bodies.

use super::lex::{at_ci, at_exact, fold, get, is_alnum_ci, is_letter_ci, is_space, is_ts, is_word};
use super::{NONE, SHELLS};

const WRAPPERS: &[&str] = &[
    "sudo", "env", "command", "builtin", "exec", "eval", "nohup", "setsid", "nice", "ionice",
    "taskset", "chrt", "time", "coproc", "busybox", "then", "do", "else", "elif", "timeout",
    "stdbuf",
];

pub(super) struct Idx<'a> {
    pub(super) c: &'a [char],
    pub(super) n: usize,
    pub(super) ws: Vec<bool>,
    /// First whitespace position at or after i (n if none).
    pub(super) tok_end: Vec<usize>,
    /// First non-whitespace position at or after i (n if none).
    pub(super) skip_ws: Vec<usize>,
    /// End of the run of `[\w/]` characters starting at i.
    pub(super) wslash_end: Vec<usize>,
    /// End of the run of spaces/tabs starting at i.
    pub(super) ts_end: Vec<usize>,
    /// End of the run of `[A-Za-z0-9_]` (case-insensitive) characters starting at i.
    pub(super) name_end: Vec<usize>,
    /// End of the run of `\w` characters starting at i.
    pub(super) word_end: Vec<usize>,
    /// First position at or after i holding one of `; & | \``.
    pub(super) bad_next: Vec<usize>,
}

impl<'a> Idx<'a> {
    pub(super) fn new(c: &'a [char]) -> Idx<'a> {
        let n = c.len();
        let ws: Vec<bool> = c.iter().map(|&x| is_space(x)).collect();
        let mut tok_end = vec![n; n + 1];
        let mut skip_ws = vec![n; n + 1];
        let mut wslash_end = vec![n; n + 1];
        let mut ts_end = vec![n; n + 1];
        let mut name_end = vec![n; n + 1];
        let mut word_end = vec![n; n + 1];
        let mut bad_next = vec![NONE; n + 1];
        for i in (0..n).rev() {
            name_end[i] = if is_alnum_ci(c[i]) || c[i] == '_' {
                name_end[i + 1]
            } else {
                i
            };
            word_end[i] = if is_word(c[i]) { word_end[i + 1] } else { i };
            bad_next[i] = if matches!(c[i], ';' | '&' | '|' | '`') {
                i
            } else {
                bad_next[i + 1]
            };
            tok_end[i] = if ws[i] { i } else { tok_end[i + 1] };
            skip_ws[i] = if ws[i] { skip_ws[i + 1] } else { i };
            wslash_end[i] = if is_word(c[i]) || c[i] == '/' {
                wslash_end[i + 1]
            } else {
                i
            };
            ts_end[i] = if is_ts(c[i]) { ts_end[i + 1] } else { i };
        }
        Idx {
            c,
            n,
            ws,
            tok_end,
            skip_ws,
            wslash_end,
            ts_end,
            name_end,
            word_end,
            bad_next,
        }
    }

    /// Start of the token after the one at `i` (n if none).
    pub(super) fn next(&self, i: usize) -> usize {
        if i >= self.n {
            return self.n;
        }
        self.skip_ws[self.tok_end[i]]
    }

    /// `[x, e)` is `(?:[\w/]*/)?NAME` for one of `names` (case-insensitive unless `exact`).
    pub(super) fn prefixed_name(
        &self,
        x: usize,
        e: usize,
        names: &[&str],
        exact: bool,
    ) -> Option<usize> {
        for name in names {
            let l = name.len();
            if e < x + l {
                continue;
            }
            let s = e - l;
            let ok = if exact {
                at_exact(self.c, s, name)
            } else {
                at_ci(self.c, s, name)
            };
            if ok && (s == x || (self.c[s - 1] == '/' && self.wslash_end[x] >= s)) {
                return Some(s);
            }
        }
        None
    }

    /// Interpreter token: the whole token is `(?:[\w/]*/)?(sh|bash|…)`, whitespace after.
    pub(super) fn is_interp_token(&self, x: usize) -> bool {
        let e = self.tok_end[x];
        e < self.n && self.wslash_end[x] >= e && self.prefixed_name(x, e, SHELLS, false).is_some()
    }

    /// `(?:-c|-[a-zA-Z]*c)` as a whole token followed by whitespace.
    pub(super) fn is_c_token(&self, y: usize, letters_end: &[usize]) -> bool {
        let e = self.tok_end[y];
        self.c[y] == '-' && e >= y + 2 && letters_end[y + 1] >= e && fold(self.c[e - 1]) == 'c'
    }
}

pub(super) fn next_table(n: usize, pred: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut v = vec![NONE; n + 1];
    for i in (0..n).rev() {
        v[i] = if pred(i) { i } else { v[i + 1] };
    }
    v
}

pub(super) fn head_env(ix: &Idx, i: usize, wrap: u32, env: &[u32]) -> u32 {
    let mut m = wrap;
    if is_env_token(ix, i) {
        m |= env[ix.next(i)];
    }
    m
}

pub(super) fn head_wrap(ix: &Idx, i: usize, rest: u32, flags: &[u32]) -> u32 {
    let mut m = rest;
    if is_wrapper_token(ix, i) {
        m |= flags[ix.next(i)];
    }
    m
}

pub(super) fn head_flags(ix: &Idx, y: usize, wrap: u32, flags: &[u32]) -> u32 {
    let mut m = wrap;
    for t in flag_targets(ix, y).into_iter().flatten() {
        m |= flags[t];
    }
    m
}

/// Targets of one wrapper-flag iteration at token `y`, in regex priority order.
fn flag_targets(ix: &Idx, y: usize) -> [Option<usize>; 2] {
    let c = ix.c;
    let n = ix.n;
    let e = ix.tok_end[y];
    let nx = ix.next(y);
    let value_target = || {
        if nx < n && c[nx] != '-' && c[nx] != '=' {
            Some(ix.next(nx))
        } else {
            None
        }
    };
    // `-X VALUE` (any single letter) and `--long VALUE`: the value is a separate token that
    // does not start with `-` or `=`.
    let short_value = e == y + 2 && c[y] == '-' && is_letter_ci(c[y + 1]);
    let long_value = e > y + 2
        && c[y] == '-'
        && c[y + 1] == '-'
        && is_letter_ci(c[y + 2])
        && !c[y..e].contains(&'=');
    let with_value = if short_value || long_value {
        value_target()
    } else {
        None
    };
    // `-…` flags, `NAME=VALUE`, and numeric operands (`timeout 5`, `nice 10`, `taskset 0x1`,
    // `timeout .5`).
    let numeric =
        c[y].is_ascii_digit() || (c[y] == '.' && get(c, y + 1).is_some_and(|d| d.is_ascii_digit()));
    let one = (c[y] == '-' && e >= y + 2) || is_assign_token(ix, y) || numeric;
    [with_value, if one { Some(nx) } else { None }]
}

pub(super) fn is_name_start(ch: char) -> bool {
    is_letter_ci(ch) || ch == '_'
}

/// `[A-Za-z_][A-Za-z0-9_]*=[^\s;&|`]*` followed by whitespace.
fn is_env_token(ix: &Idx, x: usize) -> bool {
    let c = ix.c;
    if !is_name_start(c[x]) {
        return false;
    }
    let te = ix.tok_end[x];
    if te >= ix.n {
        return false;
    }
    let e = ix.name_end[x];
    e < te && c[e] == '=' && (ix.bad_next[e + 1] == NONE || ix.bad_next[e + 1] >= te)
}

/// `[A-Za-z_][A-Za-z0-9_]*=[^\s]*` as a whole token.
fn is_assign_token(ix: &Idx, x: usize) -> bool {
    let c = ix.c;
    if !is_name_start(c[x]) {
        return false;
    }
    let e = ix.name_end[x];
    e < ix.tok_end[x] && c[e] == '='
}

/// A wrapper word, optionally path-qualified (`/usr/bin/sudo`), followed by whitespace.
fn is_wrapper_token(ix: &Idx, x: usize) -> bool {
    let te = ix.tok_end[x];
    te < ix.n && ix.wslash_end[x] >= te && ix.prefixed_name(x, te, WRAPPERS, false).is_some()
}

/// The first of a candidate's head starts (in priority order), inside a text of `n` characters,
/// from which the prefix state `env` can reach `want`.
pub(super) fn first_head(heads: &[usize], n: usize, env: &[u32], want: u32) -> Option<usize> {
    heads.iter().copied().find(|&x| x < n && env[x] & want != 0)
}

/// Walks ENV → WRAP → FLAGS in priority order and returns the REST position reached.
pub(super) fn head_walk(
    ix: &Idx,
    x: usize,
    want: u32,
    env: &[u32],
    flags: &[u32],
    rest_ok: impl Fn(usize) -> bool,
) -> Option<usize> {
    let mut pos = x;
    // ENV*
    loop {
        if pos < ix.n && is_env_token(ix, pos) && env[ix.next(pos)] & want != 0 {
            pos = ix.next(pos);
        } else {
            break;
        }
    }
    // (WRAPPER FLAGS*)*
    'outer: loop {
        if pos < ix.n && is_wrapper_token(ix, pos) && flags[ix.next(pos)] & want != 0 {
            let mut y = ix.next(pos);
            loop {
                let mut moved = false;
                for t in flag_targets(ix, y).into_iter().flatten() {
                    if flags[t] & want != 0 {
                        y = t;
                        moved = true;
                        break;
                    }
                }
                if !moved {
                    pos = y;
                    continue 'outer;
                }
            }
        }
        break;
    }
    if pos <= ix.n && rest_ok(pos) {
        Some(pos)
    } else {
        None
    }
}

pub(super) const SEP_FIRST: &[char] = &['$', ';', '&', '|', '(', ')', '`', '{', '!', '\n', '\r'];

fn is_sep(ch: char) -> bool {
    matches!(
        ch,
        ';' | '&' | '|' | '`' | '\n' | '\r' | '(' | ')' | '{' | '!'
    )
}

/// Every command-position candidate of `c`: (match start, head starts after whitespace).
pub(super) fn candidates(c: &[char], skip_ws: &[usize]) -> Vec<(usize, [usize; 3], usize)> {
    let n = c.len();
    let mut out = Vec::new();
    for i in 0..n {
        if i != 0 && !is_sep(c[i]) && c[i] != '$' {
            continue;
        }
        let (mut heads, k) = candidate_heads(c, i);
        if k == 0 {
            continue;
        }
        for h in heads.iter_mut().take(k) {
            *h = skip_ws[(*h).min(n)];
        }
        out.push((i, heads, k));
    }
    out
}

/// Positions whose prefix states are ever read: token starts and the head start of every
/// command-position candidate.
pub(super) fn needed_positions(ix: &Idx) -> Vec<bool> {
    let n = ix.n;
    let mut v: Vec<bool> = (0..=n)
        .map(|i| i < n && !ix.ws[i] && (i == 0 || ix.ws[i - 1]))
        .collect();
    for (_, heads, k) in candidates(ix.c, &ix.skip_ws) {
        for &x in &heads[..k] {
            v[x] = true;
        }
    }
    v
}

/// Command-position candidates: (match start, head starts in priority order).
fn candidate_heads(c: &[char], i: usize) -> ([usize; 3], usize) {
    let mut heads = [0usize; 3];
    let mut k = 0;
    if i == 0 {
        heads[k] = 0;
        k += 1;
    }
    if i < c.len() && is_sep(c[i]) {
        heads[k] = i + 1;
        k += 1;
    }
    if i + 1 < c.len() && c[i] == '$' && c[i + 1] == '(' {
        heads[k] = i + 2;
        k += 1;
    }
    (heads, k)
}
