//! `read_file` (spec §1.3): numbered lines of a text file, windowed and capped.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};

use serde_json::{Map, Value};

use super::fs::os_error;
use super::{arg_i64, required_str, tool_metadata, ReadTarget, Tool, ToolContext, ToolError};
use crate::tools::ToolFuture;

pub(crate) const MAX_LINES: usize = 2000;
pub(crate) const MAX_LINE_CHARS: usize = 2000;
pub(crate) const SNIFF_BYTES: usize = 8192;

pub(crate) struct ReadFile;

/// Files up to this size are read on the turn's task (a 64 KiB read is a few µs; a thread
/// round trip tens of µs on a loaded machine).
pub(crate) const INLINE_READ_BYTES: u64 = 64 * 1024;

/// Whether reading `path` (resolved, found) is cheap enough for a runtime worker: a regular
/// local file of at most [`INLINE_READ_BYTES`] (a FIFO or device could block).
fn reads_inline(path: &std::path::Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.len() <= INLINE_READ_BYTES)
}

/// The call's arguments.
struct ReadArgs<'a> {
    file_path: &'a str,
    offset: i64,
    limit: i64,
}

impl<'a> ReadArgs<'a> {
    fn parse(args: &'a Map<String, Value>) -> Result<Self, ToolError> {
        Ok(ReadArgs {
            file_path: required_str(args, "file_path", "read_file")?,
            offset: arg_i64(args, "offset")?.unwrap_or(1),
            limit: arg_i64(args, "limit")?.unwrap_or(0),
        })
    }
}

impl Tool for ReadFile {
    tool_metadata! {
        name: "read_file",
        read_only: true,
        description: "Read a file and return its lines with line numbers. Without limit, the tool returns a \
         maximum of 2000 lines. The tool cuts each line that is longer than 2000 characters. To \
         read a different part of a large file, use offset and limit.",
        parameters: {"type": "object", "properties": {
            "file_path": {"type": "string", "description": "Path to the file to read (can be absolute or relative)"},
            "offset": {"type": "integer", "description": "Line number to start reading from (1-based, default: 1)"},
            "limit": {"type": "integer", "description": "Maximum number of lines to read. Default 0: a maximum of 2000 lines."}},
            "required": ["file_path"]},
    }
    /// A small local file is read on the turn's task: the blocking-thread round trip costs more
    /// than the read. Anything else (a host file system, a big or special file) still blocks
    /// off the task, through `block_in_place`.
    fn runs_on_task(&self) -> bool {
        true
    }
    fn execute_async<'a>(
        &'a self,
        args: &'a Map<String, Value>,
        ctx: &'a ToolContext<'a>,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            // A host's file system is host code: it never runs on a worker.
            if !ctx.services.fs().is_local_disk() {
                return tokio::task::block_in_place(|| self.execute(args, ctx));
            }
            let call = ReadArgs::parse(args)?;
            let path = match ctx.existing_for_read(call.file_path, ReadTarget::File) {
                Ok(p) => p,
                Err(text) => return Ok(text),
            };
            if reads_inline(&path) {
                read(&call, &path, ctx)
            } else {
                tokio::task::block_in_place(|| read(&call, &path, ctx))
            }
        })
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let call = ReadArgs::parse(args)?;
        let path = match ctx.existing_for_read(call.file_path, ReadTarget::File) {
            Ok(p) => p,
            Err(text) => return Ok(text),
        };
        read(&call, &path, ctx)
    }
}

/// The numbered lines of `path` (resolved and found) as the call asks for them.
fn read(
    call: &ReadArgs<'_>,
    path: &std::path::Path,
    ctx: &ToolContext<'_>,
) -> Result<String, ToolError> {
    let ReadArgs {
        file_path,
        offset,
        limit,
    } = *call;
    let fs = ctx.services.fs();
    let binary = || {
        let size = fs.stat(path).map(|s| s.size).unwrap_or(0);
        Ok(format!("Binary file: {file_path} ({size} bytes)"))
    };
    match fs.read_partial(path, SNIFF_BYTES) {
        Ok(sniff) if sniff.contains(&0) => return binary(),
        Ok(_) => {}
        Err(e) => return Ok(format!("Error reading file: {}", os_error(&e, path))),
    }
    let start = offset.max(1) as usize;
    let start_idx = start - 1;
    let window = if limit > 0 { limit as usize } else { MAX_LINES };
    let reader = match fs.open_read(path) {
        Ok(r) => r,
        Err(e) => return Ok(format!("Error reading file: {}", os_error(&e, path))),
    };
    let (total, kept) = match read_window(reader, start_idx, window, ctx) {
        Ok(v) => v,
        Err(ReadError::Decode) => return binary(),
        Err(ReadError::Io(e)) => return Ok(format!("Error reading file: {}", os_error(&e, path))),
    };
    let end_line = start_idx.saturating_add(window).min(total);
    let mut out = format!("File: {file_path} ({total} lines)\nShowing lines {start}-{end_line}\n");
    let mut long_lines = 0usize;
    for (i, line) in kept.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = write!(out, "{:>6}\t{}", start + i, line.head);
        if line.extra_chars > 0 {
            let _ = write!(out, "[+{} chars]", line.extra_chars);
            long_lines += 1;
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

enum ReadError {
    Decode,
    Io(std::io::Error),
}

/// A line of the window: its first [`MAX_LINE_CHARS`] characters and how many more it has.
struct KeptLine {
    head: String,
    extra_chars: usize,
}

/// Bytes read at a time; a line is never held whole, so this bounds the memory of a read
/// (plus at most 2000 characters for each line of the window).
const PIECE: usize = 64 * 1024;

/// Streams the file as Python's universal-newline text mode does (`\n`, `\r\n` and a lone `\r`
/// end a line; the whole file must be strict UTF-8) and keeps the lines of the window.
fn read_window(
    reader: Box<dyn std::io::Read + Send>,
    start_idx: usize,
    window: usize,
    ctx: &ToolContext<'_>,
) -> Result<(usize, Vec<KeptLine>), ReadError> {
    let mut lines = Lines::new(start_idx, window);
    scan(BufReader::with_capacity(PIECE, reader), &mut lines, &|| {
        ctx.cancel.is_cancelled()
    })?;
    Ok((lines.total, lines.kept))
}

fn scan(
    mut reader: impl BufRead,
    lines: &mut Lines,
    stop: &dyn Fn() -> bool,
) -> Result<(), ReadError> {
    // A `\r` ended the last line: a `\n` right after it belongs to the same line end.
    let mut after_cr = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadError::Io(e)),
        };
        if buf.is_empty() {
            break;
        }
        let mut rest = buf;
        if after_cr && rest[0] == b'\n' {
            rest = &rest[1..];
        }
        after_cr = false;
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', rest) {
            lines.feed(&rest[..pos])?;
            lines.end_line()?;
            if rest[pos] == b'\r' {
                if rest.get(pos + 1) == Some(&b'\n') {
                    rest = &rest[pos + 2..];
                    continue;
                }
                after_cr = pos + 1 == rest.len();
            }
            rest = &rest[pos + 1..];
        }
        lines.feed(rest)?;
        let n = buf.len();
        reader.consume(n);
        if stop() {
            return Ok(());
        }
    }
    if lines.open {
        lines.end_line()?;
    }
    Ok(())
}

/// Line-by-line state fed with pieces of lines.
struct Lines {
    start_idx: usize,
    window: usize,
    total: usize,
    kept: Vec<KeptLine>,
    current: KeptLine,
    /// The current line has bytes.
    open: bool,
    /// The start of a character cut by the end of a piece.
    carry: Vec<u8>,
}

impl Lines {
    fn new(start_idx: usize, window: usize) -> Self {
        Lines {
            start_idx,
            window,
            total: 0,
            kept: Vec::new(),
            current: KeptLine {
                head: String::new(),
                extra_chars: 0,
            },
            open: false,
            carry: Vec::new(),
        }
    }

    fn in_window(&self) -> bool {
        self.total >= self.start_idx && self.total - self.start_idx < self.window
    }

    fn feed(&mut self, mut bytes: &[u8]) -> Result<(), ReadError> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.open = true;
        if let Some(&lead) = self.carry.first() {
            let need = if lead < 0xE0 {
                2
            } else if lead < 0xF0 {
                3
            } else {
                4
            };
            let take = (need - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.carry.len() < need {
                return Ok(());
            }
            let carry = std::mem::take(&mut self.carry);
            let ch = std::str::from_utf8(&carry).map_err(|_| ReadError::Decode)?;
            self.text(ch);
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => self.text(text),
            Err(e) if e.error_len().is_none() => {
                let (valid, cut) = bytes.split_at(e.valid_up_to());
                self.text(std::str::from_utf8(valid).map_err(|_| ReadError::Decode)?);
                self.carry.extend_from_slice(cut);
            }
            Err(_) => return Err(ReadError::Decode),
        }
        Ok(())
    }

    fn text(&mut self, text: &str) {
        if !self.in_window() {
            return;
        }
        let line = &mut self.current;
        if line.extra_chars == 0 {
            let room = MAX_LINE_CHARS - line.head.chars().count().min(MAX_LINE_CHARS);
            match text.char_indices().nth(room) {
                Some((byte, _)) => {
                    line.head.push_str(&text[..byte]);
                    line.extra_chars += text[byte..].chars().count();
                }
                None => line.head.push_str(text),
            }
        } else {
            line.extra_chars += text.chars().count();
        }
    }

    fn end_line(&mut self) -> Result<(), ReadError> {
        if !self.carry.is_empty() {
            return Err(ReadError::Decode);
        }
        if self.in_window() {
            self.kept.push(std::mem::replace(
                &mut self.current,
                KeptLine {
                    head: String::new(),
                    extra_chars: 0,
                },
            ));
        }
        self.total += 1;
        self.open = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as `(head, extra)`, read with pieces of `piece` bytes.
    fn lines(data: &[u8], piece: usize) -> Result<Vec<(String, usize)>, ()> {
        let mut l = Lines::new(0, usize::MAX);
        scan(BufReader::with_capacity(piece, data), &mut l, &|| false).map_err(|_| ())?;
        assert_eq!(l.total, l.kept.len());
        Ok(l.kept
            .into_iter()
            .map(|k| (k.head, k.extra_chars))
            .collect())
    }

    #[test]
    fn line_ends_and_characters_cut_by_piece_boundaries() {
        let data = "aé\r\nb€\rc\r\r\nd𝄞\n\ne".as_bytes();
        let expected: Vec<(String, usize)> = ["aé", "b€", "c", "", "d𝄞", "", "e"]
            .iter()
            .map(|s| ((*s).to_owned(), 0))
            .collect();
        for piece in 1..=data.len() {
            assert_eq!(lines(data, piece).unwrap(), expected, "piece {piece}");
        }
        assert_eq!(lines(b"a\r", 1).unwrap(), vec![("a".to_owned(), 0)]);
        assert_eq!(lines(b"", 1).unwrap(), vec![]);
    }

    #[test]
    fn bad_utf8_anywhere_is_a_decode_error() {
        for piece in 1..6 {
            assert!(lines(b"ok\n\xff", piece).is_err());
            // A character cut short by a line end.
            assert!(lines(b"ok\xc3\nx", piece).is_err());
            assert!(lines(b"ok\xc3", piece).is_err());
        }
    }

    #[test]
    fn long_lines_keep_their_head_and_count_the_rest() {
        let line = format!("{}{}", "é".repeat(1500), "x".repeat(1000));
        for piece in [1, 7, 4096] {
            assert_eq!(
                lines(line.as_bytes(), piece).unwrap(),
                vec![(format!("{}{}", "é".repeat(1500), "x".repeat(500)), 500)]
            );
        }
    }
}
