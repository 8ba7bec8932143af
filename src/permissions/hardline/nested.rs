//! Nested bodies (on the raw, here-doc-masked text): what a nested shell would run.

use super::index::{
    candidates, first_head, head_env, head_flags, head_walk, head_wrap, is_name_start,
    needed_positions, next_table, Idx,
};
use super::lex::{
    at_ci, at_exact, decode_ansi_c, get, is_letter_ci, is_ts, is_word, normalize, wb_end, Contexts,
    Ctx,
};
use super::{bit, NONE, SHELLS};

const E_WRAPPER: u32 = 0;
const E_HERESTRING: u32 = 1;
const E_ECHO_PIPE: u32 = 2;
const E_PROCSUBST: u32 = 3;
const E_CMDSUB: u32 = 4;

struct ExtTables<'a> {
    ix: Idx<'a>,
    letters_end: Vec<usize>,
    next_squote: Vec<usize>,
    dq_close: Vec<usize>,
    /// For a whitespace run start: position of `<<<` reached through flags, or NONE.
    hs_chain: Vec<usize>,
    /// Same for `<(`.
    ps_chain: Vec<usize>,
    /// Last token of a chain of `-` tokens starting at i.
    dash_chain_last: Vec<usize>,
    sh_slash: Vec<bool>,
    next_pipe_nl: Vec<usize>,
    next_paren_nl: Vec<usize>,
    next_parbt_nl: Vec<usize>,
    env: Vec<u32>,
    flags: Vec<u32>,
}

struct Extracted {
    body: Vec<char>,
    end: usize,
}

impl<'a> ExtTables<'a> {
    fn new(c: &'a [char]) -> ExtTables<'a> {
        let ix = Idx::new(c);
        let n = ix.n;
        let mut letters_end = vec![n; n + 1];
        for i in (0..n).rev() {
            letters_end[i] = if is_letter_ci(c[i]) {
                letters_end[i + 1]
            } else {
                i
            };
        }
        let next_squote = next_table(n, |i| c[i] == '\'');
        let mut dq_close = vec![NONE; n + 2];
        for i in (0..n).rev() {
            dq_close[i] = match c[i] {
                '"' => i,
                '\\' => {
                    if i + 1 < n && c[i + 1] != '\n' {
                        dq_close[i + 2]
                    } else {
                        NONE
                    }
                }
                _ => dq_close[i + 1],
            };
        }
        let is_flagish = |t: usize| {
            (c[t] == '-' && ix.tok_end[t] >= t + 2) || {
                // [A-Za-z_]\w*=\S+
                is_name_start(c[t]) && {
                    let mut e = t + 1;
                    while e < n && is_word(c[e]) {
                        e += 1;
                    }
                    e < ix.tok_end[t] && c[e] == '=' && e + 1 < ix.tok_end[t]
                }
            }
        };
        let mut hs_chain = vec![NONE; n + 1];
        let mut ps_chain = vec![NONE; n + 1];
        for i in (0..n).rev() {
            if !ix.ws[i] {
                continue;
            }
            let r = ix.skip_ws[i];
            if ix.ts_end[i] < r || r >= n {
                continue;
            }
            if at_exact(c, r, "<<<") {
                hs_chain[i] = r;
            } else if is_flagish(r) {
                hs_chain[i] = hs_chain[ix.tok_end[r]];
            }
            if at_exact(c, r, "<(") {
                ps_chain[i] = r;
            } else if is_flagish(r) {
                ps_chain[i] = ps_chain[ix.tok_end[r]];
            }
        }
        let mut dash_chain_last = vec![NONE; n + 1];
        for i in (0..n).rev() {
            if c[i] != '-' || !(i == 0 || ix.ws[i - 1]) {
                continue;
            }
            let nx = ix.next(i);
            dash_chain_last[i] = if nx < n && c[nx] == '-' && dash_chain_last[nx] != NONE {
                dash_chain_last[nx]
            } else {
                i
            };
        }
        let shname_b = |k: usize| {
            SHELLS
                .iter()
                .any(|s| at_ci(c, k, s) && wb_end(c, k + s.len()))
        };
        let mut sh_slash = vec![false; n + 1];
        for k in (0..n).rev() {
            sh_slash[k] = (is_word(c[k]) || c[k] == '/')
                && ((c[k] == '/' && shname_b(k + 1)) || sh_slash[k + 1]);
        }
        let next_pipe_nl = next_table(n, |i| c[i] == '|' || c[i] == '\n');
        let next_paren_nl = next_table(n, |i| c[i] == ')' || c[i] == '\n');
        let next_parbt_nl = next_table(n, |i| c[i] == ')' || c[i] == '`' || c[i] == '\n');
        let mut t = ExtTables {
            ix,
            letters_end,
            next_squote,
            dq_close,
            hs_chain,
            ps_chain,
            dash_chain_last,
            sh_slash,
            next_pipe_nl,
            next_paren_nl,
            next_parbt_nl,
            env: vec![0; n + 1],
            flags: vec![0; n + 1],
        };
        let needed = needed_positions(&t.ix);
        for i in (0..n).rev() {
            if t.ix.ws[i] || !needed[i] {
                continue;
            }
            let rest = t.rest(i);
            let wrap = head_wrap(&t.ix, i, rest, &t.flags);
            if i == 0 || t.ix.ws[i - 1] {
                t.flags[i] = head_flags(&t.ix, i, wrap, &t.flags);
            }
            t.env[i] = head_env(&t.ix, i, wrap, &t.env);
        }
        t
    }

    fn rest(&self, x: usize) -> u32 {
        let mut m = 0;
        for b in [E_WRAPPER, E_HERESTRING, E_ECHO_PIPE, E_PROCSUBST, E_CMDSUB] {
            if self.tail(x, b, false).is_some() {
                m |= bit(b);
            }
        }
        m
    }

    /// Body opener at v: `'…'`, `$'…'`, `"…"`, `$"…"`. Returns (body, end).
    fn body_at(&self, v: usize, want_body: bool) -> Option<(Vec<char>, usize)> {
        let c = self.ix.c;
        let (dollar, q) = match (get(c, v), get(c, v + 1)) {
            (Some('$'), Some('\'')) => (true, '\''),
            (Some('$'), Some('"')) => (true, '"'),
            (Some('\''), _) => (false, '\''),
            (Some('"'), _) => (false, '"'),
            _ => return None,
        };
        let open = if dollar { v + 1 } else { v };
        let close = if q == '\'' {
            self.next_squote[open + 1]
        } else {
            self.dq_close[open + 1]
        };
        if close == NONE {
            return None;
        }
        let raw = &c[open + 1..close];
        let body = if !want_body {
            if raw.is_empty() {
                Vec::new()
            } else {
                vec![' ']
            }
        } else if dollar && q == '\'' {
            decode_ansi_c(raw)
        } else {
            raw.to_vec()
        };
        Some((body, close + 1))
    }

    fn tail(&self, x: usize, b: u32, want_body: bool) -> Option<Extracted> {
        let ix = &self.ix;
        let c = ix.c;
        let n = ix.n;
        if x >= n {
            return None;
        }
        match b {
            E_WRAPPER => {
                let te = ix.tok_end[x];
                if te >= n {
                    return None;
                }
                let interp = (ix.wslash_end[x] >= te
                    && ix.prefixed_name(x, te, SHELLS, false).is_some())
                    || (c[x] == '$'
                        && ((te > x + 1 && ix.word_end[x + 1] >= te)
                            || (te >= x + 4
                                && c[x + 1] == '{'
                                && c[te - 1] == '}'
                                && ix.word_end[x + 2] >= te - 1)));
                if !interp {
                    return None;
                }
                let y0 = ix.next(x);
                if y0 >= n || c[y0] != '-' {
                    return None;
                }
                let y = self.dash_chain_last[y0];
                if y == NONE || !ix.is_c_token(y, &self.letters_end) {
                    return None;
                }
                let (body, end) = self.body_at(ix.next(y), want_body)?;
                Some(Extracted { body, end })
            }
            E_HERESTRING => {
                let e = ix.wslash_end[x];
                if !get(c, e).is_some_and(is_ts) || ix.prefixed_name(x, e, SHELLS, false).is_none()
                {
                    return None;
                }
                let lt = self.hs_chain[e];
                if lt == NONE {
                    return None;
                }
                let v = ix.ts_end[lt + 3];
                let (body, end) = self.body_at(v, want_body)?;
                Some(Extracted { body, end })
            }
            E_ECHO_PIPE => {
                let e = ix.wslash_end[x];
                if !get(c, e).is_some_and(is_ts)
                    || ix.prefixed_name(x, e, &["echo", "printf"], false).is_none()
                {
                    return None;
                }
                let (args, p) = self.args(e, &self.next_pipe_nl, true)?;
                if c[p] != '|' {
                    return None;
                }
                let s = ix.ts_end[p + 1];
                let name_end = SHELLS
                    .iter()
                    .find(|sh| at_ci(c, s, sh) && wb_end(c, s + sh.len()))
                    .map(|sh| s + sh.len());
                let end = match name_end {
                    Some(e) => e,
                    None if self.sh_slash[s] => ix.wslash_end[s],
                    None => return None,
                };
                Some(Extracted {
                    body: if want_body {
                        normalize(args).0
                    } else {
                        Vec::new()
                    },
                    end,
                })
            }
            E_PROCSUBST => {
                let e = if at_ci(c, x, "source") && get(c, x + 6).is_some_and(is_ts) {
                    x + 6
                } else if c[x] == '.' && get(c, x + 1).is_some_and(is_ts) {
                    x + 1
                } else {
                    let e = ix.wslash_end[x];
                    if !get(c, e).is_some_and(is_ts)
                        || ix.prefixed_name(x, e, SHELLS, false).is_none()
                    {
                        return None;
                    }
                    e
                };
                let lp = self.ps_chain[e];
                if lp == NONE {
                    return None;
                }
                self.echo_args_after(ix.ts_end[lp + 2], &self.next_paren_nl, true, want_body)
            }
            E_CMDSUB => {
                let s = if c[x] == '$' && get(c, x + 1) == Some('(') {
                    x + 2
                } else if c[x] == '`' {
                    x + 1
                } else {
                    return None;
                };
                self.echo_args_after(ix.ts_end[s.min(n)], &self.next_parbt_nl, false, want_body)
            }
            _ => None,
        }
    }

    /// `(?:[\w/]*/)?(?:echo|printf)\b FLAGS [ \t]+ (ARGS) [ \t]* TERM` starting at s.
    fn echo_args_after(
        &self,
        s: usize,
        term: &[usize],
        no_pipe: bool,
        want_body: bool,
    ) -> Option<Extracted> {
        let ix = &self.ix;
        let c = ix.c;
        if s >= ix.n {
            return None;
        }
        let e = ix.wslash_end[s];
        if !get(c, e).is_some_and(is_ts)
            || ix.prefixed_name(s, e, &["echo", "printf"], false).is_none()
        {
            return None;
        }
        let (args, t) = self.args(e, term, no_pipe)?;
        if c[t] == '\n' {
            return None;
        }
        Some(Extracted {
            body: if want_body {
                normalize(args).0
            } else {
                Vec::new()
            },
            end: t + 1,
        })
    }

    /// Greedy flags then the lazy args up to the first terminator. `e` is the name end
    /// (a space or tab). Returns (args, terminator position).
    fn args(&self, e: usize, term: &[usize], no_pipe: bool) -> Option<(&'a [char], usize)> {
        let ix = &self.ix;
        let c: &'a [char] = ix.c;
        let flag_ends = flag_ends(ix, e, no_pipe);
        for k in (0..=flag_ends.len()).rev() {
            let start = if k == 0 { e } else { flag_ends[k - 1] };
            let a = ix.ts_end[start];
            let l = a - start;
            if l == 0 {
                continue;
            }
            let t = term[a];
            if t == NONE || c[t] == '\n' {
                continue;
            }
            let (s, end) = if a < t {
                let mut end = t;
                while end > a + 1 && is_ts(c[end - 1]) {
                    end -= 1;
                }
                (a, end)
            } else if l >= 2 {
                (a - 1, a)
            } else {
                continue;
            };
            return Some((&c[s..end], t));
        }
        None
    }
}

/// Ends of the greedy `(?:[ \t]+-[^\s]+)*` flags after `e`, each flag followed by a space or
/// tab; with `no_pipe`, a flag holding `|` ends the run.
fn flag_ends(ix: &Idx, e: usize, no_pipe: bool) -> Vec<usize> {
    let c = ix.c;
    let n = ix.n;
    let mut ends = Vec::new();
    let mut pos = e;
    loop {
        let r = ix.ts_end[pos];
        if r == pos || r >= n || c[r] != '-' {
            break;
        }
        let te = ix.tok_end[r];
        if te < r + 2 || te >= n || !is_ts(c[te]) {
            break;
        }
        if no_pipe && c[r..te].contains(&'|') {
            break;
        }
        ends.push(te);
        pos = te;
    }
    ends
}

pub(super) fn extract_bodies(text: &[char], ctx: &Contexts, out: &mut Vec<Vec<char>>) {
    let n = text.len();
    if n == 0 {
        return;
    }
    let t = ExtTables::new(text);
    let cands = candidates(text, &t.ix.skip_ws);
    let valid = |start: usize| -> bool {
        if ctx.escaped[start] {
            return false;
        }
        !matches!(ctx.ctx[start], Ctx::Sq | Ctx::Dq) || matches!(text[start], '$' | '`')
    };
    for b in [E_WRAPPER, E_HERESTRING, E_ECHO_PIPE, E_PROCSUBST, E_CMDSUB] {
        let want = bit(b);
        let mut last_end = 0usize;
        for &(i, heads, k) in &cands {
            if i < last_end {
                continue;
            }
            let Some(x) = first_head(&heads[..k], n, &t.env, want) else {
                continue;
            };
            let Some(pos) = head_walk(&t.ix, x, want, &t.env, &t.flags, |p| t.rest(p) & want != 0)
            else {
                continue;
            };
            let Some(m) = t.tail(pos, b, true) else {
                continue;
            };
            last_end = m.end.max(i + 1);
            if !valid(i) {
                continue;
            }
            let keep = match b {
                E_WRAPPER | E_HERESTRING => !m.body.is_empty(),
                _ => true,
            };
            if keep {
                out.push(m.body);
            }
        }
    }
}

/// `^[ \t]*\$\([ \t]*(?:[\w/]*/)?(?:echo|printf)\b(?:[ \t]+-[^\s]+)*[ \t]+(.+?)[ \t]*\)[ \t]*$`
/// (DOTALL) on the whole text: the arguments, raw.
pub(super) fn cmdsub_echo_as_body(text: &[char]) -> Option<Vec<char>> {
    let n = text.len();
    let mut i = 0;
    while i < n && is_ts(text[i]) {
        i += 1;
    }
    if !(get(text, i) == Some('$') && get(text, i + 1) == Some('(')) {
        return None;
    }
    let mut s = i + 2;
    while s < n && is_ts(text[s]) {
        s += 1;
    }
    let ix = Idx::new(text);
    let e = ix.wslash_end[s.min(n)];
    if !get(text, e).is_some_and(is_ts)
        || ix.prefixed_name(s, e, &["echo", "printf"], false).is_none()
    {
        return None;
    }
    // the closing paren: last `)` followed only by [ \t]* and an optional final newline
    let mut end = n;
    if end > 0 && text[end - 1] == '\n' {
        end -= 1;
    }
    while end > 0 && is_ts(text[end - 1]) {
        end -= 1;
    }
    if end == 0 || text[end - 1] != ')' {
        return None;
    }
    let close = end - 1;
    let flag_ends = flag_ends(&ix, e, false);
    for k in (0..=flag_ends.len()).rev() {
        let start = if k == 0 { e } else { flag_ends[k - 1] };
        let a = ix.ts_end[start];
        let l = a - start;
        if a < close {
            let mut stop = close;
            while stop > a + 1 && is_ts(text[stop - 1]) {
                stop -= 1;
            }
            return Some(text[a..stop].to_vec());
        }
        if a == close && l >= 2 {
            return Some(text[a - 1..a].to_vec());
        }
    }
    None
}
