//! `replace` (spec §1.5): edit a file by replacing text, with three matching tiers (exact,
//! whitespace-flexible, Unicode-fuzzy) and a "most similar text" hint when nothing matches.

use std::collections::HashMap;

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

use super::fs::{os_error, FileChanged};
use super::write_file::nul_error;
use super::{arg_bool, required_str, tool_metadata, Tool, ToolContext, ToolError};
use crate::permissions::path_policy;
use crate::pycompat::{py_strip, splitlines, utf8_error_text};

pub(crate) struct Replace;

const SUFFIX_FLEXIBLE: &str = " (flexible whitespace match)";
const SUFFIX_UNICODE: &str = " (unicode-normalized match)";

impl Tool for Replace {
    tool_metadata! {
        name: "replace",
        description: "Edit a file: replace `old_text` with `new_text`. The `old_text` value must match the file \
         text exactly. By default, the tool replaces only the first match. To replace all matches, \
         set `replace_all` to true. Use this tool for small changes to existing files. It sends \
         less text than write_file, is easier to review, and does not delete text by accident.",
        parameters: {"type": "object", "properties": {
            "file_path": {"type": "string", "description": "Path to the file to edit"},
            "old_text": {"type": "string", "description": "The exact text to replace"},
            "new_text": {"type": "string", "description": "The new text to insert"},
            "replace_all": {"type": "boolean", "description": "Replace all occurrences (default: false, first only)"}},
            "required": ["file_path", "old_text", "new_text"]},
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let file_path = required_str(args, "file_path", "replace")?;
        let old_text = required_str(args, "old_text", "replace")?;
        let new_text = required_str(args, "new_text", "replace")?;
        let replace_all = arg_bool(args, "replace_all")?.unwrap_or(false);
        if old_text.is_empty() {
            return Ok(
                "Error: old_text is empty. Provide the exact text to replace; to create or \
                       overwrite a file use write_file instead."
                    .to_owned(),
            );
        }
        if file_path.contains('\0') {
            return Err(nul_error());
        }
        let path = match path_policy::contain_file(ctx.workspace, file_path) {
            Ok(p) => p,
            Err(msg) => return Ok(format!("Error: {msg}")),
        };
        let mut message = String::new();
        let written = ctx.services.fs().edit_bytes(&path, &mut |bytes| {
            let content = match String::from_utf8(bytes) {
                Ok(s) => s,
                Err(e) => {
                    message = format!(
                        "Error editing file: {}",
                        utf8_error_text(e.as_bytes(), e.utf8_error())
                    );
                    return None;
                }
            };
            match edit(&content, old_text, new_text, replace_all, file_path) {
                Edit::Write(new_content, msg) => {
                    message = msg;
                    Some(new_content.into_bytes())
                }
                Edit::Message(msg) => {
                    message = msg;
                    None
                }
            }
        });
        Ok(match written {
            Ok(()) => message,
            Err(e) => match FileChanged::of(&e) {
                Some(FileChanged::BeforeWrite) => format!(
                    "Error editing file: {file_path} was changed by another process while this \
                     edit was being made, so the edit was not applied. Read the file again, \
                     then retry the edit."
                ),
                Some(FileChanged::DuringRename { kept: Some(copy) }) => format!(
                    "Error editing file: the edit of {file_path} was saved, but another process \
                     wrote to the file at the same moment, into the copy the edit replaced. That \
                     copy is saved as {}. Compare the two files and merge them.",
                    copy.display()
                ),
                Some(FileChanged::DuringRename { kept: None }) => format!(
                    "Error editing file: the edit of {file_path} was saved, but another process \
                     wrote to the file at the same moment, into the copy the edit replaced, \
                     and that copy could not be saved. Read the file again and check it."
                ),
                None => format!("Error editing file: {}", os_error(&e, &path)),
            },
        })
    }
}

type Transform = fn(&str) -> String;

pub(crate) enum Edit {
    Write(String, String),
    Message(String),
}

fn is_pure_crlf(content: &str) -> bool {
    let lf = content.matches('\n').count();
    lf > 0 && lf == content.matches("\r\n").count()
}

fn to_crlf(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut prev = '\0';
    for c in text.chars() {
        if c == '\n' && prev != '\r' {
            out.push('\r');
        }
        out.push(c);
        prev = c;
    }
    out
}

fn ambiguous(
    total: usize,
    remaining: usize,
    old_text: &str,
    new_text: &str,
    where_: &str,
    suffix: &str,
) -> String {
    let grows = new_text.contains(old_text);
    let advice = if grows {
        "include more surrounding context to make it unique"
    } else {
        "include more surrounding context to make it unique, or pass replace_all=true to change all"
    };
    let caution = if grows {
        " Note: new_text contains old_text, so replace_all would re-edit the site just changed — \
         target the remaining sites individually."
    } else {
        ""
    };
    format!(
        "Replaced the first of {total} occurrences in {where_}{suffix}. {remaining} occurrence(s) of \
         old_text remain — if you meant a different one, {advice}.{caution}"
    )
}

/// The whole matching pyramid on decoded content.
pub(crate) fn edit(
    content: &str,
    old_text: &str,
    new_text: &str,
    replace_all: bool,
    file_path: &str,
) -> Edit {
    let hint_text = old_text;
    let (old_owned, new_owned);
    let (old_text, new_text) = if is_pure_crlf(content) {
        old_owned = to_crlf(old_text);
        new_owned = to_crlf(new_text);
        (old_owned.as_str(), new_owned.as_str())
    } else {
        (old_text, new_text)
    };
    // 1. Exact.
    if content.contains(old_text) {
        let count = content.matches(old_text).count();
        if replace_all {
            return Edit::Write(
                content.replace(old_text, new_text),
                format!("Replaced {count} occurrence(s) in {file_path}"),
            );
        }
        let new_content = content.replacen(old_text, new_text, 1);
        let msg = if count > 1 {
            let remaining = new_content.matches(old_text).count();
            ambiguous(count, remaining, old_text, new_text, file_path, "")
        } else {
            format!("Replaced 1 occurrence(s) in {file_path}")
        };
        return Edit::Write(new_content, msg);
    }
    // 2. Whitespace-flexible, 3. Unicode-fuzzy.
    let tiers: [(Transform, &str); 2] = [
        (|s| s.to_owned(), SUFFIX_FLEXIBLE),
        (unicode_fold, SUFFIX_UNICODE),
    ];
    for (transform, suffix) in tiers {
        let matches = line_window_matches(content, old_text, transform);
        if !matches.is_empty() {
            return apply_match(
                content,
                &matches,
                old_text,
                new_text,
                replace_all,
                suffix,
                file_path,
            );
        }
    }
    Edit::Message(not_found_hint(content, hint_text, file_path))
}

fn unicode_fold(s: &str) -> String {
    s.nfkc()
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{201b}' => '\'',
            '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{201f}' => '"',
            '\u{00a0}' | '\u{2002}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

fn line_window_matches(content: &str, old_text: &str, transform: Transform) -> Vec<(usize, usize)> {
    let normalized: Vec<&str> = splitlines(old_text, false)
        .into_iter()
        .map(|l| l.trim_end())
        .collect();
    let joined = normalized.join("\n");
    let old_lines = splitlines(&joined, false);
    let content_lines = splitlines(content, true);
    let n = old_lines.len();
    if n == 0 || content_lines.len() < n {
        return Vec::new();
    }
    let pat: Vec<String> = old_lines
        .iter()
        .map(|l| py_strip(&transform(l)).to_owned())
        .collect();
    let norm: Vec<String> = content_lines
        .iter()
        .map(|l| py_strip(&transform(l)).to_owned())
        .collect();
    let mut prefix = Vec::with_capacity(content_lines.len() + 1);
    prefix.push(0usize);
    for l in &content_lines {
        prefix.push(prefix[prefix.len() - 1] + l.len());
    }
    let mut matches = Vec::new();
    let mut i = 0;
    while i + n <= content_lines.len() {
        if norm[i..i + n] == pat[..] {
            matches.push((prefix[i], prefix[i + n]));
            i += n;
        } else {
            i += 1;
        }
    }
    matches
}

fn apply_match(
    content: &str,
    matches: &[(usize, usize)],
    old_text: &str,
    new_text: &str,
    replace_all: bool,
    suffix: &str,
    file_path: &str,
) -> Edit {
    let spans = if replace_all { matches } else { &matches[..1] };
    let mut new_content = content.to_owned();
    let mut sorted: Vec<(usize, usize)> = spans.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    for (start, mut end) in sorted {
        if !old_text.ends_with('\n') {
            if content[..end].ends_with("\r\n") {
                end -= 2;
            } else if content[..end].ends_with('\n') {
                end -= 1;
            }
        }
        new_content.replace_range(start..end, new_text);
    }
    let msg = if replace_all || matches.len() == 1 {
        format!(
            "Replaced {} occurrence(s) in {file_path}{suffix}",
            spans.len()
        )
    } else {
        ambiguous(
            matches.len(),
            matches.len() - spans.len(),
            old_text,
            new_text,
            file_path,
            suffix,
        )
    };
    Edit::Write(new_content, msg)
}

fn not_found_hint(content: &str, old_text: &str, file_path: &str) -> String {
    let mut msg = format!("Error: Old text not found in {file_path}");
    let old_lines = splitlines(old_text, false);
    let content_lines = splitlines(content, false);
    let window = old_lines.len();
    if window == 0 || content_lines.is_empty() {
        return msg;
    }
    let old_chars: Vec<char> = old_text.chars().collect();
    let old_bag = char_bag(&old_chars);
    let windows = content_lines
        .len()
        .saturating_sub(window)
        .saturating_add(1)
        .max(1);
    // Rank every window by difflib's cheap upper bound, then score the best few exactly.
    let mut ranked: Vec<(f64, usize)> = (0..windows)
        .map(|i| {
            let chunk = content_lines[i..(i + window).min(content_lines.len())].join("\n");
            let chars: Vec<char> = chunk.chars().collect();
            (quick_ratio(&old_bag, old_chars.len(), &chars), i)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut best = (0.0f64, 0usize, String::new());
    for &(_, i) in ranked.iter().take(8) {
        let chunk = content_lines[i..(i + window).min(content_lines.len())].join("\n");
        let chars: Vec<char> = chunk.chars().collect();
        let ratio = if old_chars.len() * chars.len() <= 4_000_000 {
            ratio(&old_chars, &chars)
        } else {
            quick_ratio(&old_bag, old_chars.len(), &chars)
        };
        if ratio > best.0 || (ratio == best.0 && i < best.1 && !best.2.is_empty()) {
            best = (ratio, i, chunk);
        }
    }
    if best.0 > 0.4 {
        let line = best.1 + 1;
        msg.push_str(&format!(
            "\n\nMost similar text (lines {line}-{}, {:.0}% similar):\n{}",
            line + window - 1,
            best.0 * 100.0,
            best.2
        ));
    }
    msg
}

fn char_bag(chars: &[char]) -> HashMap<char, usize> {
    let mut bag = HashMap::new();
    for &c in chars {
        *bag.entry(c).or_insert(0) += 1;
    }
    bag
}

fn quick_ratio(a_bag: &HashMap<char, usize>, a_len: usize, b: &[char]) -> f64 {
    let total = a_len + b.len();
    if total == 0 {
        return 1.0;
    }
    let mut avail = a_bag.clone();
    let mut matches = 0usize;
    for c in b {
        if let Some(n) = avail.get_mut(c) {
            if *n > 0 {
                *n -= 1;
                matches += 1;
            }
        }
    }
    2.0 * matches as f64 / total as f64
}

/// Ratcliff/Obershelp similarity (difflib's `ratio()` without its junk heuristics).
fn ratio(a: &[char], b: &[char]) -> f64 {
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    2.0 * matching_chars(a, b) as f64 / total as f64
}

fn matching_chars(a: &[char], b: &[char]) -> usize {
    let mut stack = vec![(0usize, a.len(), 0usize, b.len())];
    let mut total = 0;
    let mut row = vec![0usize; b.len() + 1];
    while let Some((alo, ahi, blo, bhi)) = stack.pop() {
        if alo >= ahi || blo >= bhi {
            continue;
        }
        // Longest common substring of a[alo..ahi] and b[blo..bhi] (earliest in a, then b).
        let (mut best_i, mut best_j, mut best_k) = (alo, blo, 0usize);
        for v in row.iter_mut() {
            *v = 0;
        }
        for (i, ca) in a.iter().enumerate().take(ahi).skip(alo) {
            let mut prev_diag = 0usize;
            for j in blo..bhi {
                let above = row[j + 1];
                let k = if *ca == b[j] { prev_diag + 1 } else { 0 };
                prev_diag = above;
                row[j + 1] = k;
                if k > best_k {
                    best_k = k;
                    best_i = i + 1 - k;
                    best_j = j + 1 - k;
                }
            }
        }
        if best_k == 0 {
            continue;
        }
        total += best_k;
        stack.push((alo, best_i, blo, best_j));
        stack.push((best_i + best_k, ahi, best_j + best_k, bhi));
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(content: &str, old: &str, new: &str, all: bool) -> (Option<String>, String) {
        match edit(content, old, new, all, "f.txt") {
            Edit::Write(c, m) => (Some(c), m),
            Edit::Message(m) => (None, m),
        }
    }

    #[test]
    fn exact_first_and_all() {
        let (c, m) = run("a x a x", "x", "y", false);
        assert_eq!(c.unwrap(), "a y a x");
        assert_eq!(
            m,
            "Replaced the first of 2 occurrences in f.txt. 1 occurrence(s) of old_text remain — if you meant a \
             different one, include more surrounding context to make it unique, or pass replace_all=true to change all."
        );
        let (c, m) = run("a x a x", "x", "y", true);
        assert_eq!(c.unwrap(), "a y a y");
        assert_eq!(m, "Replaced 2 occurrence(s) in f.txt");
        let (_, m) = run("foo foo", "foo", "foobar", false);
        assert!(m.contains("Note: new_text contains old_text"), "{m}");
        let (c, m) = run("one\n", "one", "two", false);
        assert_eq!(
            (c.unwrap().as_str(), m.as_str()),
            ("two\n", "Replaced 1 occurrence(s) in f.txt")
        );
    }

    #[test]
    fn flexible_unicode_crlf() {
        let (c, m) = run(
            "fn a() {\n    x = 1;  \n}\n",
            "x = 1;\n}",
            "x = 2;\n}",
            false,
        );
        assert_eq!(c.unwrap(), "fn a() {\nx = 2;\n}\n");
        assert_eq!(
            m,
            "Replaced 1 occurrence(s) in f.txt (flexible whitespace match)"
        );
        let (c, m) = run("say “hi” — ok\n", "say \"hi\" - ok", "bye", false);
        assert_eq!(c.unwrap(), "bye\n");
        assert!(m.ends_with("(unicode-normalized match)"));
        let (c, _) = run("a\r\nb\r\n", "a\nb\n", "c\nd\n", false);
        assert_eq!(c.unwrap(), "c\r\nd\r\n");
    }

    #[test]
    fn not_found_with_hint() {
        let (c, m) = run("alpha beta\ngamma\n", "alpha betx", "z", false);
        assert!(c.is_none());
        assert!(m.starts_with("Error: Old text not found in f.txt\n\nMost similar text (lines 1-1, 90% similar):\nalpha beta"), "{m}");
        let (_, m) = run("zzzz\n", "qqqq", "z", false);
        assert_eq!(m, "Error: Old text not found in f.txt");
    }
}
