//! Character classes (Python `re` with IGNORECASE on str patterns), quote / substitution
//! contexts, ANSI-C decoding and shell-word normalisation.

pub(super) use crate::pycompat::{ignorecase_fold as fold, is_space};

/// Python's `\w`.
pub(super) fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

pub(super) fn is_letter_ci(c: char) -> bool {
    fold(c).is_ascii_alphabetic()
}

pub(super) fn is_alnum_ci(c: char) -> bool {
    let f = fold(c);
    f.is_ascii_alphanumeric()
}

pub(super) fn is_ts(c: char) -> bool {
    c == ' ' || c == '\t'
}

pub(super) fn at_ci(c: &[char], i: usize, w: &str) -> bool {
    i + w.len() <= c.len()
        && c[i..]
            .iter()
            .zip(w.bytes())
            .all(|(&x, b)| fold(x) == b as char)
}

pub(super) fn at_exact(c: &[char], i: usize, w: &str) -> bool {
    let l = w.chars().count();
    i + l <= c.len() && c[i..].iter().zip(w.chars()).all(|(&x, y)| x == y)
}

/// The end of a bare command name such as `reboot`: not followed by a word character, `-` or
/// `.` (`reboot-check.sh` and `reboot_now` are other programs).
pub(super) fn name_end_ok(c: &[char], e: usize) -> bool {
    match get(c, e) {
        None => true,
        Some(ch) => !(is_word(ch) || ch == '-' || ch == '.'),
    }
}

/// `\b` right after a word character at `e - 1`.
pub(super) fn wb_end(c: &[char], e: usize) -> bool {
    e >= c.len() || !is_word(c[e])
}

pub(super) fn get(c: &[char], i: usize) -> Option<char> {
    c.get(i).copied()
}

// ---------------------------------------------------------------------------------------------
// Quote / substitution contexts
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Ctx {
    Top,
    Sq,
    Dq,
    Sub,
    Bt,
}

pub(super) struct Contexts {
    pub(super) ctx: Vec<Ctx>,
    pub(super) escaped: Vec<bool>,
}

impl Contexts {
    pub(super) fn compute(cmd: &[char]) -> Contexts {
        let n = cmd.len();
        let mut ctx = vec![Ctx::Top; n];
        let mut escaped = vec![false; n];
        let mut stack: Vec<Ctx> = Vec::new();
        let mut i = 0;
        while i < n {
            let c = cmd[i];
            let cur = stack.last().copied().unwrap_or(Ctx::Top);
            ctx[i] = cur;
            if cur == Ctx::Sq {
                if c == '\'' {
                    stack.pop();
                }
                i += 1;
                continue;
            }
            if c == '\\' && i + 1 < n {
                escaped[i + 1] = true;
                ctx[i + 1] = cur;
                i += 2;
                continue;
            }
            let opens_sub = c == '$' && i + 1 < n && cmd[i + 1] == '(';
            // Inside double quotes only `$(` and a backquote open something.
            let unquoted = cur != Ctx::Dq;
            match (cur, c) {
                (Ctx::Sq, _) => {}
                (Ctx::Dq, '"') | (Ctx::Sub, ')') | (Ctx::Bt, '`') => {
                    stack.pop();
                }
                (_, '\'') if unquoted => stack.push(Ctx::Sq),
                (_, '"') if unquoted => stack.push(Ctx::Dq),
                _ if opens_sub => {
                    stack.push(Ctx::Sub);
                    ctx[i + 1] = Ctx::Sub;
                    i += 2;
                    continue;
                }
                (_, '`') => stack.push(Ctx::Bt),
                _ => {}
            }
            i += 1;
        }
        Contexts { ctx, escaped }
    }
}

fn push_code(out: &mut Vec<char>, code: u32) {
    out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
}

/// Decodes the body of a `$'…'` string the way bash does.
pub(super) fn decode_ansi_c(body: &[char]) -> Vec<char> {
    let n = body.len();
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while i < n {
        if body[i] != '\\' || i + 1 >= n {
            out.push(body[i]);
            i += 1;
            continue;
        }
        let c = body[i + 1];
        let simple = match c {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            '\\' => Some('\\'),
            '\'' => Some('\''),
            '"' => Some('"'),
            '?' => Some('?'),
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'v' => Some('\u{b}'),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            i += 2;
            continue;
        }
        match c {
            'x' | 'u' | 'U' => {
                let max = match c {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut j = i + 2;
                let mut val: u32 = 0;
                while j < n && j - (i + 2) < max && body[j].is_ascii_hexdigit() {
                    val = val * 16 + body[j].to_digit(16).unwrap_or(0);
                    j += 1;
                }
                if j > i + 2 {
                    if c == 'x' {
                        push_code(&mut out, val);
                    } else if val > 0x10FFFF {
                        out.push(c);
                    } else {
                        push_code(&mut out, val);
                    }
                    i = j;
                } else {
                    out.push(c);
                    i += 2;
                }
            }
            '0'..='7' => {
                let mut j = i + 1;
                let mut val: u32 = 0;
                while j < n && j - (i + 1) < 3 && ('0'..='7').contains(&body[j]) {
                    val = val * 8 + body[j].to_digit(8).unwrap_or(0);
                    j += 1;
                }
                push_code(&mut out, val % 256);
                i = j;
            }
            'c' => {
                if i + 2 < n {
                    let x = body[i + 2];
                    let mut up = x.to_uppercase();
                    let u = match (up.next(), up.next()) {
                        (Some(u), None) => u,
                        _ => x,
                    };
                    push_code(&mut out, (u as u32) ^ 0x40);
                    i += 3;
                } else {
                    out.push('c');
                    i += 2;
                }
            }
            _ => {
                out.push(c);
                i += 2;
            }
        }
    }
    out
}

/// `$'…'` / `$"…"` at `i` (where `cmd[i] == '$'`): (index after it, decoded body).
fn consume_dollar_quote(cmd: &[char], i: usize) -> Option<(usize, Vec<char>)> {
    let n = cmd.len();
    let q = get(cmd, i + 1)?;
    if q != '\'' && q != '"' {
        return None;
    }
    let mut j = i + 2;
    while j < n {
        if cmd[j] == '\\' && j + 1 < n {
            j += 2;
        } else if cmd[j] == q {
            break;
        } else {
            j += 1;
        }
    }
    let j = j.min(n);
    let body = &cmd[i + 2..j];
    let next = if j < n { j + 1 } else { j };
    let decoded = if q == '\'' {
        decode_ansi_c(body)
    } else {
        body.to_vec()
    };
    Some((next, decoded))
}

/// The shell-word view: quote characters and escaping backslashes removed, content kept.
/// Returns the view and, for each of its characters, the offset in `cmd` it came from.
pub(super) fn normalize(cmd: &[char]) -> (Vec<char>, Vec<usize>) {
    let n = cmd.len();
    let mut norm = Vec::with_capacity(n);
    let mut map = Vec::with_capacity(n);
    let mut stack: Vec<Ctx> = Vec::new();
    let mut i = 0;
    while i < n {
        let c = cmd[i];
        let cur = stack.last().copied().unwrap_or(Ctx::Top);
        if cur == Ctx::Sq {
            if c == '\'' {
                stack.pop();
            } else {
                norm.push(c);
                map.push(i);
            }
            i += 1;
            continue;
        }
        if c == '\\' && i + 1 < n {
            norm.push(cmd[i + 1]);
            map.push(i + 1);
            i += 2;
            continue;
        }
        if cur == Ctx::Dq {
            if c == '"' {
                stack.pop();
                i += 1;
                continue;
            }
            if c == '$' && i + 1 < n && cmd[i + 1] == '(' {
                stack.push(Ctx::Sub);
                norm.extend(['$', '(']);
                map.extend([i, i + 1]);
                i += 2;
                continue;
            }
            if c == '`' {
                stack.push(Ctx::Bt);
            }
            norm.push(c);
            map.push(i);
            i += 1;
            continue;
        }
        if (cur == Ctx::Sub && c == ')') || (cur == Ctx::Bt && c == '`') {
            stack.pop();
            norm.push(c);
            map.push(i);
            i += 1;
            continue;
        }
        match c {
            '\'' => {
                stack.push(Ctx::Sq);
                i += 1;
            }
            '"' => {
                stack.push(Ctx::Dq);
                i += 1;
            }
            '$' => {
                if let Some((next, decoded)) = consume_dollar_quote(cmd, i) {
                    for ch in decoded {
                        norm.push(ch);
                        map.push(i);
                    }
                    i = next;
                } else if i + 1 < n && cmd[i + 1] == '(' {
                    stack.push(Ctx::Sub);
                    norm.extend(['$', '(']);
                    map.extend([i, i + 1]);
                    i += 2;
                } else {
                    norm.push(c);
                    map.push(i);
                    i += 1;
                }
            }
            '`' => {
                stack.push(Ctx::Bt);
                norm.push(c);
                map.push(i);
                i += 1;
            }
            _ => {
                norm.push(c);
                map.push(i);
                i += 1;
            }
        }
    }
    (norm, map)
}
