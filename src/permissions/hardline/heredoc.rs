//! Here-doc masking: bodies fed as data (not to a shell) are blanked before matching.

use super::lex::{at_exact, get, is_space, is_ts, is_word, Contexts, Ctx};
use super::SHELLS;

/// Whether the line holding the here-doc opener at `pos` names a shell interpreter as a word.
fn heredoc_owner_is_shell(cmd: &[char], pos: usize) -> bool {
    let ls = cmd[..pos]
        .iter()
        .rposition(|&c| c == '\n')
        .map_or(0, |p| p + 1);
    let le = cmd[pos..]
        .iter()
        .position(|&c| c == '\n')
        .map_or(cmd.len(), |p| pos + p);
    let line = &cmd[ls..le];
    let m = line.len();
    let mut k = 0;
    while k < m {
        if k == 0 || is_space(line[k - 1]) {
            let mut e = k;
            while e < m && (is_word(line[e]) || line[e] == '/') {
                e += 1;
            }
            if e > k && (e == m || is_space(line[e])) {
                for name in SHELLS {
                    let l = name.chars().count();
                    if e - k >= l
                        && at_exact(line, e - l, name)
                        && (e - l == k || line[e - l - 1] == '/')
                    {
                        return true;
                    }
                }
            }
            k = e.max(k + 1);
        } else {
            k += 1;
        }
    }
    false
}

/// Replaces here-doc bodies (fed as data, not code) with spaces, preserving offsets.
pub(super) fn mask_heredocs(cmd: &[char]) -> Vec<char> {
    let n = cmd.len();
    if !cmd.windows(2).any(|w| w == ['<', '<']) {
        return cmd.to_vec();
    }
    let ctx = Contexts::compute(cmd);
    let mut out = cmd.to_vec();
    let mut i = 0;
    while i < n {
        if !(i + 1 < n
            && cmd[i] == '<'
            && cmd[i + 1] == '<'
            && !ctx.escaped[i]
            && matches!(ctx.ctx[i], Ctx::Top | Ctx::Sub | Ctx::Bt))
        {
            i += 1;
            continue;
        }
        // <<(-?)(['"]?)(\w+)\2
        let mut j = i + 2;
        let dash = get(cmd, j) == Some('-');
        if dash {
            j += 1;
        }
        let quote = match get(cmd, j) {
            Some(q @ ('\'' | '"')) => {
                j += 1;
                Some(q)
            }
            _ => None,
        };
        let tag_start = j;
        while j < n && is_word(cmd[j]) {
            j += 1;
        }
        if j == tag_start || (quote.is_some() && get(cmd, j) != quote) {
            i += 1;
            continue;
        }
        let tag = &cmd[tag_start..j];
        let opener_end = if quote.is_some() { j + 1 } else { j };
        let Some(nl) = cmd[opener_end..]
            .iter()
            .position(|&c| c == '\n')
            .map(|p| p + opener_end)
        else {
            i = opener_end;
            continue;
        };
        let body_start = nl + 1;
        // Closer: \n[\t]*TAG[ \t]*(?=\n|$), searched from the opener line's newline.
        let mut body_end = n;
        let mut p = nl;
        while p < n {
            if cmd[p] == '\n' {
                let mut k = p + 1;
                if dash {
                    while k < n && cmd[k] == '\t' {
                        k += 1;
                    }
                }
                if k + tag.len() <= n && &cmd[k..k + tag.len()] == tag {
                    let mut e = k + tag.len();
                    while e < n && is_ts(cmd[e]) {
                        e += 1;
                    }
                    if e == n || cmd[e] == '\n' {
                        body_end = p;
                        break;
                    }
                }
            }
            p += 1;
        }
        if heredoc_owner_is_shell(cmd, i) {
            i = body_end.max(i + 1);
            continue;
        }
        for ch in out.iter_mut().take(body_end).skip(body_start) {
            *ch = ' ';
        }
        i = body_end.max(i + 1);
    }
    out
}
