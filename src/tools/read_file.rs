//! `read_file`: numbered lines of a text file, windowed and capped.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::{arg_i64, required_str, Tool, ToolContext, ToolError};

pub const MAX_LINES: usize = 2000;
pub const MAX_LINE_CHARS: usize = 2000;
const SNIFF_BYTES: usize = 8192;

pub struct ReadFile;

impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Read a text file and return its lines numbered like `cat -n`. Use `offset` (1-based line) and \
         `limit` (number of lines) to page through long files; at most 2000 lines are shown at once \
         and lines longer than 2000 characters are cut."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "file_path": {"type": "string", "description": "Path of the file, relative to the working directory or absolute."},
            "offset": {"type": "integer", "description": "1-based line to start at.", "default": 1},
            "limit": {"type": "integer", "description": "Number of lines to read; 0 means up to 2000.", "default": 0}},
            "required": ["file_path"]})
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn requires_confirmation(&self) -> bool {
        false
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let file_path = required_str(args, "file_path", "read_file")?;
        let offset = arg_i64(args, "offset")?.unwrap_or(1).max(1) as usize;
        let limit = arg_i64(args, "limit")?.unwrap_or(0).max(0) as usize;
        let path = match ctx.resolve_read(file_path) {
            Ok(p) => p,
            Err(msg) => return Ok(msg),
        };
        if !path.is_file() {
            return Ok(format!("Error: File {file_path} does not exist"));
        }
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                return Ok(format!(
                    "Error reading file: {}",
                    super::write_file::os_error(&e, &path)
                ))
            }
        };
        let sniff = &bytes[..bytes.len().min(SNIFF_BYTES)];
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) if !sniff.contains(&0) => t,
            _ => return Ok(format!("Binary file: {file_path} ({} bytes)", bytes.len())),
        };
        Ok(render(file_path, text, offset, limit))
    }
}

fn render(file_path: &str, text: &str, offset: usize, limit: usize) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let total = lines.len();
    let window = if limit == 0 {
        MAX_LINES
    } else {
        limit.min(MAX_LINES)
    };
    let start_idx = (offset - 1).min(total);
    let end_idx = (start_idx + window).min(total);
    let shown = &lines[start_idx..end_idx];
    let end_line = offset - 1 + shown.len();
    let mut out = format!("File: {file_path} ({total} lines)\nShowing lines {offset}-{end_line}\n");
    let mut cut = 0usize;
    for (i, line) in shown.iter().enumerate() {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if i > 0 {
            out.push('\n');
        }
        let _ = write!(out, "{:>6}\t", offset + i);
        match line.char_indices().nth(MAX_LINE_CHARS) {
            Some((byte, _)) => {
                let extra = line[byte..].chars().count();
                out.push_str(&line[..byte]);
                let _ = write!(out, "[+{extra} chars]");
                cut += 1;
            }
            None => out.push_str(line),
        }
    }
    if cut > 0 {
        let _ = write!(
            out,
            "\n[{cut} line(s) truncated to {MAX_LINE_CHARS} chars per line]"
        );
    }
    if (limit == 0 || limit > MAX_LINES) && end_idx < total {
        let _ = write!(
            out,
            "\n\n[Truncated: showing lines {offset}–{end_line} of {total} total. Use offset={} to continue reading.]",
            end_line + 1
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_reference() {
        assert_eq!(
            render("notes.txt", "Project notes\nline 2\nline 3\n", 1, 0),
            "File: notes.txt (3 lines)\nShowing lines 1-3\n     1\tProject notes\n     2\tline 2\n     3\tline 3"
        );
        assert_eq!(
            render("lines.txt", "l1\nl2\nl3\n", 2, 1),
            "File: lines.txt (3 lines)\nShowing lines 2-2\n     2\tl2"
        );
    }

    #[test]
    fn long_files_and_lines_are_capped() {
        let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
        let out = render("big", &text, 1, 0);
        assert!(out.ends_with(
            "[Truncated: showing lines 1–2000 of 2500 total. Use offset=2001 to continue reading.]"
        ));
        let long = "x".repeat(2005);
        let out = render("w", &long, 1, 0);
        assert!(out.contains("[+5 chars]"));
        assert!(out.ends_with("\n[1 line(s) truncated to 2000 chars per line]"));
    }
}
