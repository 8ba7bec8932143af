//! A `SKILL.md` file: YAML front matter between `---` lines (Anthropic's Agent Skills format:
//! `name`, `description`, and optional fields this library does not use, such as `license`,
//! `allowed-tools` or `metadata`), then the Markdown body, which is the skill's instructions.
//!
//! The YAML is read as events (yaml-rust2's parser), never built into a tree: an alias is
//! refused rather than expanded, so a small file cannot grow into a large document, and
//! nesting is bounded.

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

/// How deep the front matter's collections may nest (`metadata` maps are one or two levels).
const MAX_DEPTH: usize = 16;

/// The fields the catalogue uses; every other key is accepted and ignored.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct FrontMatter {
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) when_to_use: Option<String>,
}

/// A parsed file: its front matter (empty when the file has none) and its body.
#[derive(Debug, PartialEq)]
pub(crate) struct SkillFile<'a> {
    pub(crate) front: FrontMatter,
    pub(crate) body: &'a str,
}

/// Splits and reads a file's text. An unclosed front matter, YAML that does not parse, an
/// alias, or a `name`/`description` that is not a plain value is an error naming the problem.
pub(crate) fn parse(text: &str) -> Result<SkillFile<'_>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = strip_fence_line(text) else {
        return Ok(SkillFile {
            front: FrontMatter::default(),
            body: text,
        });
    };
    let mut at = 0;
    let (yaml, body) = loop {
        let Some(line_len) = rest[at..].find('\n').map(|n| n + 1).or_else(|| {
            // The last line, without a newline.
            (at < rest.len()).then(|| rest.len() - at)
        }) else {
            return Err("the front matter is not closed by a `---` line".into());
        };
        let line = rest[at..at + line_len].trim_end();
        if line == "---" || line == "..." {
            break (&rest[..at], &rest[at + line_len..]);
        }
        at += line_len;
    };
    Ok(SkillFile {
        front: read_yaml(yaml)?,
        body,
    })
}

/// The text after a first line that is exactly `---` (trailing blanks allowed).
fn strip_fence_line(text: &str) -> Option<&str> {
    let (first, rest) = match text.find('\n') {
        Some(n) => (&text[..n], &text[n + 1..]),
        None => (text, ""),
    };
    (first.trim_end() == "---").then_some(rest)
}

fn is_null(value: &str, style: TScalarStyle) -> bool {
    style == TScalarStyle::Plain && matches!(value, "" | "~" | "null" | "Null" | "NULL")
}

fn read_yaml(yaml: &str) -> Result<FrontMatter, String> {
    let mut front = FrontMatter::default();
    let mut parser = Parser::new_from_str(yaml);
    let mut depth = 0usize;
    let mut key: Option<String> = None;
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| format!("the front matter is not valid YAML: {e}"))?;
        let at = || format!("line {}", mark.line() + 1);
        match event {
            Event::StreamEnd | Event::DocumentEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart => {}
            Event::Alias(_) => {
                return Err(format!(
                    "the front matter uses a YAML alias ({}), which is not accepted",
                    at()
                ))
            }
            Event::Scalar(value, style, ..) => match depth {
                0 if is_null(&value, style) => {}
                0 => return Err("the front matter is not a YAML mapping".into()),
                1 => match key.take() {
                    None => key = Some(value),
                    Some(k) => {
                        let value = if is_null(&value, style) {
                            String::new()
                        } else {
                            value
                        };
                        let slot = match k.as_str() {
                            "name" => &mut front.name,
                            "description" => &mut front.description,
                            "when-to-use" | "when_to_use" => &mut front.when_to_use,
                            _ => continue,
                        };
                        *slot = Some(value);
                    }
                },
                _ => {}
            },
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                let mapping = matches!(event, Event::MappingStart(..));
                match (depth, &key) {
                    (0, _) if !mapping => {
                        return Err("the front matter is not a YAML mapping".into())
                    }
                    (1, None) => {
                        return Err(format!(
                            "the front matter has a key that is not a plain value ({})",
                            at()
                        ))
                    }
                    (1, Some(k))
                        if matches!(
                            k.as_str(),
                            "name" | "description" | "when-to-use" | "when_to_use"
                        ) =>
                    {
                        return Err(format!("`{k}` must be a string ({})", at()))
                    }
                    _ => {}
                }
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!(
                        "the front matter nests deeper than {MAX_DEPTH} levels"
                    ));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => {
                depth = depth.saturating_sub(1);
                if depth == 1 {
                    // A collection value ended: the next scalar is a key.
                    key = None;
                }
            }
        }
    }
    Ok(front)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn front(text: &str) -> FrontMatter {
        parse(text).unwrap().front
    }

    #[test]
    fn the_agent_skills_fields_and_the_body() {
        let f = parse(
            "---\nname: pdf-tools\ndescription: Fill PDF forms.\nlicense: MIT\n\
             allowed-tools: [Read, Bash]\nmetadata:\n  version: \"1.0\"\n  tags: [a, b]\n---\n# PDF\nBody\n",
        )
        .unwrap();
        assert_eq!(f.front.name.as_deref(), Some("pdf-tools"));
        assert_eq!(f.front.description.as_deref(), Some("Fill PDF forms."));
        assert_eq!(f.body, "# PDF\nBody\n");
    }

    #[test]
    fn block_scalars_quotes_and_other_types_are_text() {
        let f = front(
            "---\nname: 'x'\ndescription: >\n  folded\n  text\nwhen-to-use: |\n  a\n  b\n---\n",
        );
        assert_eq!(f.description.as_deref(), Some("folded text\n"));
        assert_eq!(f.when_to_use.as_deref(), Some("a\nb\n"));
        assert_eq!(front("---\nname: 12\n---\n").name.as_deref(), Some("12"));
        assert_eq!(
            front("---\ndescription:\n---\n").description.as_deref(),
            Some("")
        );
        assert_eq!(
            front("\u{feff}---\r\nname: crlf\r\n---\r\nb")
                .name
                .as_deref(),
            Some("crlf")
        );
    }

    #[test]
    fn no_front_matter_is_an_empty_one() {
        let f = parse("# Title\ntext").unwrap();
        assert_eq!(f.front, FrontMatter::default());
        assert_eq!(f.body, "# Title\ntext");
        assert_eq!(parse("---\n---\nbody").unwrap().body, "body");
    }

    #[test]
    fn broken_front_matter_is_an_error() {
        for (text, words) in [
            ("---\nname: x\n", "not closed"),
            ("---\na: \"open\n---\n", "not valid YAML"),
            ("---\n- a\n- b\n---\n", "not a YAML mapping"),
            ("---\njust text\n---\n", "not a YAML mapping"),
            ("---\nname: [a]\n---\n", "`name` must be a string"),
            (
                "---\ndescription: {a: 1}\n---\n",
                "`description` must be a string",
            ),
            ("---\na: &x [1]\nb: *x\n---\n", "alias"),
            ("---\n? [k]\n: v\n---\n", "key that is not a plain value"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(words), "{text:?}: {e}");
        }
        let deep = format!("---\nk: {}{}\n---\n", "[".repeat(40), "]".repeat(40));
        assert!(parse(&deep).unwrap_err().contains("deeper"));
    }

    /// Hostile text made of YAML's own punctuation: never a panic, and the body is always the
    /// end of the text.
    #[test]
    fn random_yaml_punctuation_never_panics() {
        const PIECES: &[&str] = &[
            "---\n",
            "...\n",
            "name",
            "description",
            ": ",
            "\n",
            "  ",
            "- ",
            "[",
            "]",
            "{",
            "}",
            ",",
            "&a ",
            "*a",
            "!!str ",
            "|",
            ">",
            "\"",
            "'",
            "#",
            "? ",
            "\t",
            "\r\n",
            "é",
            "%YAML 1.2\n",
            "\u{feff}",
            "\\",
            "x",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..5000 {
            let mut text = String::from("---\n");
            for _ in 0..rng.usize(0..60) {
                text.push_str(PIECES[rng.usize(0..PIECES.len())]);
            }
            if let Ok(f) = parse(&text) {
                assert!(text.ends_with(f.body), "{text:?}");
            }
        }
    }
}
