//! `read_file` (spec §1.3): numbered lines of a text file, windowed and capped.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};

use serde_json::{json, Map, Value};

use super::fs::os_error;
use super::{arg_i64, required_str, Tool, ToolContext, ToolError};

pub const MAX_LINES: usize = 2000;
pub const MAX_LINE_CHARS: usize = 2000;
pub const SNIFF_BYTES: usize = 8192;

pub struct ReadFile;

impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Read a file and return its lines with line numbers. Without limit, the tool returns a \
         maximum of 2000 lines. The tool cuts each line that is longer than 2000 characters. To \
         read a different part of a large file, use offset and limit."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "file_path": {"type": "string", "description": "Path to the file to read (can be absolute or relative)"},
            "offset": {"type": "integer", "description": "Line number to start reading from (1-based, default: 1)"},
            "limit": {"type": "integer", "description": "Maximum number of lines to read. Default 0: a maximum of 2000 lines."}},
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
        let offset = arg_i64(args, "offset")?.unwrap_or(1);
        let limit = arg_i64(args, "limit")?.unwrap_or(0);
        let path = match ctx.resolve_read(file_path) {
            Ok(p) => p,
            Err(msg) => return Ok(msg),
        };
        let fs = &ctx.services.fs;
        if !fs.is_file(&path) {
            return Ok(format!("Error: File {file_path} does not exist"));
        }
        let binary = || {
            let size = fs.stat(&path).map(|s| s.size).unwrap_or(0);
            Ok(format!("Binary file: {file_path} ({size} bytes)"))
        };
        match fs.read_partial(&path, SNIFF_BYTES) {
            Ok(sniff) if sniff.contains(&0) => return binary(),
            Ok(_) => {}
            Err(e) => return Ok(format!("Error reading file: {}", os_error(&e, &path))),
        }
        let start = offset.max(1) as usize;
        let start_idx = start - 1;
        let window = if limit > 0 { limit as usize } else { MAX_LINES };
        let reader = match fs.open_read(&path) {
            Ok(r) => r,
            Err(e) => return Ok(format!("Error reading file: {}", os_error(&e, &path))),
        };
        let (total, kept) = match read_window(reader, start_idx, window, ctx) {
            Ok(v) => v,
            Err(ReadError::Decode) => return binary(),
            Err(ReadError::Io(e)) => {
                return Ok(format!("Error reading file: {}", os_error(&e, &path)))
            }
        };
        let end_line = start_idx.saturating_add(window).min(total);
        let mut out =
            format!("File: {file_path} ({total} lines)\nShowing lines {start}-{end_line}\n");
        let mut long_lines = 0usize;
        for (i, line) in kept.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let _ = write!(out, "{:>6}\t", start + i);
            match line.char_indices().nth(MAX_LINE_CHARS) {
                Some((byte, _)) => {
                    let extra = line[byte..].chars().count();
                    out.push_str(&line[..byte]);
                    let _ = write!(out, "[+{extra} chars]");
                    long_lines += 1;
                }
                None => out.push_str(line),
            }
        }
        if limit == 0 && total.saturating_sub(start_idx) > MAX_LINES {
            let _ = write!(
                out,
                "\n\n[Truncated: showing lines {start}–{end_line} of {total} total. Use offset={} to continue reading.]",
                end_line + 1
            );
        }
        if long_lines > 0 {
            let _ = write!(
                out,
                "\n[{long_lines} line(s) truncated to {MAX_LINE_CHARS} chars per line]"
            );
        }
        Ok(out)
    }
}

enum ReadError {
    Decode,
    Io(std::io::Error),
}

/// Streams the file as Python's universal-newline text mode does (`\n`, `\r\n` and a lone `\r`
/// end a line; every line must be strict UTF-8) and keeps the lines of the window.
fn read_window(
    reader: Box<dyn std::io::Read + Send>,
    start_idx: usize,
    window: usize,
    ctx: &ToolContext<'_>,
) -> Result<(usize, Vec<String>), ReadError> {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut total = 0usize;
    let mut kept = Vec::new();
    let mut piece = Vec::new();
    let mut emit = |line: &[u8], total: &mut usize| -> Result<(), ReadError> {
        let text = std::str::from_utf8(line).map_err(|_| ReadError::Decode)?;
        if *total >= start_idx && *total - start_idx < window {
            kept.push(text.to_owned());
        }
        *total += 1;
        Ok(())
    };
    loop {
        piece.clear();
        let n = reader
            .read_until(b'\n', &mut piece)
            .map_err(ReadError::Io)?;
        if n == 0 {
            break;
        }
        if total % 4096 == 0 && ctx.cancel.is_cancelled() {
            break;
        }
        let body = piece.strip_suffix(b"\n").unwrap_or(&piece);
        let had_newline = body.len() != piece.len();
        let body = if had_newline {
            body.strip_suffix(b"\r").unwrap_or(body)
        } else {
            body
        };
        // Lone carriage returns inside the piece end lines too.
        let mut rest = body;
        while let Some(pos) = rest.iter().position(|&b| b == b'\r') {
            emit(&rest[..pos], &mut total)?;
            rest = &rest[pos + 1..];
        }
        if had_newline || !rest.is_empty() {
            emit(rest, &mut total)?;
        }
    }
    Ok((total, kept))
}
