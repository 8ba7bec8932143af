//! Fork bombs under any name: a self-calling function run through a pipe or `&`, then called.

use super::tokens::Tok;

/// Fork bombs under any name: `NAME(){ … NAME … NAME … }` with `|` or `&` in the body,
/// or `function NAME { … }`, followed later by a call of `NAME`.
pub(super) fn fork_bomb(toks: &[Tok]) -> bool {
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
