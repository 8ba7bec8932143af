//! The child's single user message (spec §6.2): the parent's last messages as a context block,
//! then the task.

use serde_json::Value;

use crate::pycompat::splitlines;

/// User and assistant text is cut to this many characters.
const TEXT_CHARS: usize = 400;
/// Tool results are cut to this many characters.
const TOOL_CHARS: usize = 300;

/// Every line after the first indented, so quoted text cannot open a line of its own (a fetched
/// page could otherwise write the child a second `[Your Task]`).
fn indent_continuation(text: &str) -> String {
    splitlines(text, false).join("\n    ")
}

fn head(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The message's text: a string, or the text blocks of a content list joined by spaces.
fn content_text(m: &Value) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .map(|b| b.get("text").and_then(Value::as_str).unwrap_or(""))
            .collect::<Vec<_>>()
            .join(" "),
        Some(Value::Null) | None => String::new(),
        Some(other) => crate::pycompat::python_str(other),
    }
}

/// `[Parent conversation context (last N messages)]\n<one line per message>\n`, or empty when
/// no message yields a line. `messages` are the parent's last ones, oldest first.
pub(crate) fn parent_context(messages: &[Value]) -> String {
    let mut lines = Vec::new();
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("unknown");
        let content = content_text(m);
        match role {
            "tool" => {
                let name = m.get("name").and_then(Value::as_str).unwrap_or("tool");
                lines.push(format!(
                    "[tool/{}]: {}",
                    indent_continuation(name),
                    indent_continuation(head(&content, TOOL_CHARS))
                ));
            }
            "user" | "assistant" if !content.is_empty() => {
                lines.push(format!(
                    "[{role}]: {}",
                    indent_continuation(head(&content, TEXT_CHARS))
                ));
            }
            "assistant" => {
                let Some(calls) = m.get("tool_calls").and_then(Value::as_array) else {
                    continue;
                };
                if calls.is_empty() {
                    continue;
                }
                let names: Vec<&str> = calls
                    .iter()
                    .map(|c| {
                        c.pointer("/function/name")
                            .and_then(Value::as_str)
                            .unwrap_or("?")
                    })
                    .collect();
                lines.push(format!(
                    "[assistant called: {}]",
                    indent_continuation(&names.join(", "))
                ));
            }
            _ => {}
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "[Parent conversation context (last {} messages)]\n{}\n",
        messages.len(),
        lines.join("\n")
    )
}

/// The child's user message: the context block, then `[Your Task]` and the task.
pub(crate) fn child_message(context: &str, task: &str) -> String {
    if context.is_empty() {
        task.to_owned()
    } else {
        format!("{context}\n[Your Task]\n{task}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_roles_truncation_and_indentation() {
        let long_user = "u".repeat(450);
        let long_tool = format!("line1\nline2{}", "t".repeat(400));
        let msgs = vec![
            json!({"role": "system", "content": "ignored"}),
            json!({"role": "user", "content": long_user}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                {"id": "2", "type": "function", "function": {"name": "glob", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "1", "name": "read_file", "content": long_tool}),
            json!({"role": "assistant", "content": "two\nlines\r\nthree"}),
            json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]}),
        ];
        let ctx = parent_context(&msgs);
        let tool_head: String = long_tool.chars().take(300).collect();
        let expected = format!(
            "[Parent conversation context (last 6 messages)]\n[user]: {}\n[assistant called: read_file, glob]\n[tool/read_file]: {}\n[assistant]: two\n    lines\n    three\n[user]: a b\n",
            "u".repeat(400),
            tool_head.replace('\n', "\n    ")
        );
        assert_eq!(ctx, expected);
        assert_eq!(
            child_message(&ctx, "do it"),
            format!("{expected}\n[Your Task]\ndo it")
        );
        assert_eq!(
            parent_context(&[json!({"role": "system", "content": "x"})]),
            ""
        );
        assert_eq!(child_message("", "do it"), "do it");
    }
}
