//! `read_file` (spec §1.3): numbered lines of a text file, windowed and capped.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use serde_json::{Map, Value};

use super::fs::{os_error, FileSystem, LocalFileSystem};
use super::{arg_i64, required_str, tool_metadata, ReadTarget, Tool, ToolContext, ToolError};
use crate::tools::{ToolFuture, ToolServices};

pub(crate) const MAX_LINES: usize = 2000;
pub(crate) const MAX_LINE_CHARS: usize = 2000;
pub(crate) const SNIFF_BYTES: usize = 8192;

pub(crate) struct ReadFile;

/// Files up to this size are read on the turn's task (a 64 KiB read is a few µs; a thread
/// round trip tens of µs on a loaded machine).
pub(crate) const INLINE_READ_BYTES: u64 = 64 * 1024;

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

    /// The first line's index (0-based).
    fn start_idx(&self) -> usize {
        self.offset.max(1) as usize - 1
    }

    /// How many lines the window holds.
    fn window(&self) -> usize {
        if self.limit > 0 {
            self.limit as usize
        } else {
            MAX_LINES
        }
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
    /// than the read. A big or special local file still blocks off the task, through
    /// `block_in_place`; a host's file system is host code, so its reads run on a blocking
    /// thread like every other tool's.
    fn runs_on_task(&self, services: &ToolServices) -> bool {
        services.fs().is_local_disk()
    }
    fn execute_async<'a>(
        &'a self,
        args: &'a Map<String, Value>,
        ctx: &'a ToolContext<'a>,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            // Not on the task with a host's file system (`runs_on_task`); should it be polled
            // anyway, host code still never runs on a worker.
            if !ctx.services.fs().is_local_disk() {
                return tokio::task::block_in_place(|| self.execute(args, ctx));
            }
            let call = ReadArgs::parse(args)?;
            let path = match ctx.existing_for_read(call.file_path, ReadTarget::File) {
                Ok(p) => p,
                Err(text) => return Ok(text),
            };
            let stop = || ctx.cancel.is_cancelled();
            match open_small(&path) {
                Ok(Some(small)) => Ok(read_small(&call, &path, small, &stop)),
                Ok(None) => Ok(tokio::task::block_in_place(|| {
                    read(&call, &path, &*ctx.services.fs(), &stop)
                })),
                Err(e) => Ok(read_error(&e, &path)),
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
        Ok(read(&call, &path, &*ctx.services.fs(), &|| {
            ctx.cancel.is_cancelled()
        }))
    }
}

fn read_error(e: &std::io::Error, path: &Path) -> String {
    format!("Error reading file: {}", os_error(e, path))
}

fn binary(call: &ReadArgs<'_>, path: &Path, fs: &dyn FileSystem) -> String {
    let size = fs.stat(path).map(|s| s.size).unwrap_or(0);
    format!("Binary file: {} ({size} bytes)", call.file_path)
}

/// A regular local file of at most [`INLINE_READ_BYTES`], open, with its size then.
struct SmallFile {
    file: std::fs::File,
    size: u64,
}

/// `path` opened once for the inline read, if what was opened is a small regular file (the
/// size and kind come from the open file, so the check and the read see the same file);
/// `None`: read it the general way, off the task (a FIFO or device could block; it is opened
/// non-blocking here, so the open itself cannot).
fn open_small(path: &Path) -> std::io::Result<Option<SmallFile>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    Ok(
        (meta.is_file() && meta.len() <= INLINE_READ_BYTES).then(|| SmallFile {
            file,
            size: meta.len(),
        }),
    )
}

/// [`read`] of a small local file, through the one open file: read whole into a buffer of its
/// size, sniffed and scanned from there.
fn read_small(
    call: &ReadArgs<'_>,
    path: &Path,
    small: SmallFile,
    stop: &dyn Fn() -> bool,
) -> String {
    let SmallFile { file, size } = small;
    // One byte more than the size: a file that grew since is noticed (and read on, below).
    let mut data = Vec::with_capacity(size as usize + 1);
    if let Err(e) = (&file).take(size + 1).read_to_end(&mut data) {
        return read_error(&e, path);
    }
    if data[..data.len().min(SNIFF_BYTES)].contains(&0) {
        return binary(call, path, &LocalFileSystem);
    }
    let mut lines = Lines::new(call.start_idx(), call.window());
    // The heads are at most the file's text: one allocation instead of growing to it.
    lines.heads.reserve(data.len());
    let scanned = if data.len() as u64 <= size {
        scan(&data[..], &mut lines, stop)
    } else {
        // It grew: the rest is streamed as the general path does, from the same open file.
        let rest = std::io::Cursor::new(data).chain(file);
        tokio::task::block_in_place(|| {
            scan(BufReader::with_capacity(PIECE, rest), &mut lines, stop)
        })
    };
    render(call, path, &LocalFileSystem, scanned.map(|()| lines))
}

/// The numbered lines of `path` (resolved and found) as the call asks for them, through `fs`.
fn read(call: &ReadArgs<'_>, path: &Path, fs: &dyn FileSystem, stop: &dyn Fn() -> bool) -> String {
    match fs.read_partial(path, SNIFF_BYTES) {
        Ok(sniff) if sniff.contains(&0) => return binary(call, path, fs),
        Ok(_) => {}
        Err(e) => return read_error(&e, path),
    }
    let reader = match fs.open_read(path) {
        Ok(r) => r,
        Err(e) => return read_error(&e, path),
    };
    let mut lines = Lines::new(call.start_idx(), call.window());
    let scanned = scan(BufReader::with_capacity(PIECE, reader), &mut lines, stop);
    render(call, path, fs, scanned.map(|()| lines))
}

/// The call's text from the scanned lines (or why there are none).
fn render(
    call: &ReadArgs<'_>,
    path: &Path,
    fs: &dyn FileSystem,
    scanned: Result<Lines, ReadError>,
) -> String {
    let lines = match scanned {
        Ok(lines) => lines,
        Err(ReadError::Decode) => return binary(call, path, fs),
        Err(ReadError::Io(e)) => return read_error(&e, path),
    };
    let ReadArgs {
        file_path, limit, ..
    } = *call;
    let (start_idx, window, total) = (lines.start_idx, lines.window, lines.total);
    let start = start_idx + 1;
    let end_line = start_idx.saturating_add(window).min(total);
    // Each line: up to 6 digits, a tab, its head, a newline (the marks of long lines aside).
    let mut out =
        String::with_capacity(file_path.len() + 64 + lines.heads.len() + 8 * lines.kept.len());
    let mut number = itoa::Buffer::new();
    // `File: {file_path} ({total} lines)\nShowing lines {start}-{end_line}\n`, without
    // `write!`'s formatting machinery (most of rendering a small file's text).
    out.push_str("File: ");
    out.push_str(file_path);
    out.push_str(" (");
    out.push_str(number.format(total));
    out.push_str(" lines)\nShowing lines ");
    out.push_str(number.format(start));
    out.push('-');
    out.push_str(number.format(end_line));
    out.push('\n');
    let mut long_lines = 0usize;
    for (i, (head, extra_chars)) in lines.kept().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        // `{:>6}\t{head}`.
        let digits = number.format(start + i);
        out.push_str(&"      "[digits.len().min(6)..]);
        out.push_str(digits);
        out.push('\t');
        out.push_str(head);
        if extra_chars > 0 {
            out.push_str("[+");
            out.push_str(number.format(extra_chars));
            out.push_str(" chars]");
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
    out
}

enum ReadError {
    Decode,
    Io(std::io::Error),
}

/// A line of the window: where its first [`MAX_LINE_CHARS`] characters end in
/// [`Lines::heads`] and how many more it has.
struct KeptLine {
    head_end: usize,
    extra_chars: usize,
}

/// Bytes read at a time; a line is never held whole, so this bounds the memory of a read
/// (plus at most 2000 characters for each line of the window).
const PIECE: usize = 64 * 1024;

/// Streams the file as Python's universal-newline text mode does (`\n`, `\r\n` and a lone `\r`
/// end a line; the whole file must be strict UTF-8) and keeps the lines of the window.
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
    /// The heads of the kept lines and of the current one, one after another (one buffer
    /// rather than a `String` per line).
    heads: String,
    kept: Vec<KeptLine>,
    /// Characters beyond the current line's head.
    extra_chars: usize,
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
            heads: String::new(),
            kept: Vec::new(),
            extra_chars: 0,
            open: false,
            carry: Vec::new(),
        }
    }

    /// The kept lines: head and the number of characters cut from it.
    fn kept(&self) -> impl Iterator<Item = (&str, usize)> {
        let mut start = 0;
        self.kept.iter().map(move |k| {
            let head = &self.heads[start..k.head_end];
            start = k.head_end;
            (head, k.extra_chars)
        })
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
        if self.extra_chars == 0 {
            let line_start = self.kept.last().map_or(0, |k| k.head_end);
            let head = &self.heads[line_start..];
            let room = MAX_LINE_CHARS - head.chars().count().min(MAX_LINE_CHARS);
            // A text of no more bytes than there is room for characters fits whatever it
            // holds; only a longer one is walked a character at a time to find the cut.
            if text.len() <= room {
                self.heads.push_str(text);
                return;
            }
            match text.char_indices().nth(room) {
                Some((byte, _)) => {
                    self.heads.push_str(&text[..byte]);
                    self.extra_chars += text[byte..].chars().count();
                }
                None => self.heads.push_str(text),
            }
        } else {
            self.extra_chars += text.chars().count();
        }
    }

    fn end_line(&mut self) -> Result<(), ReadError> {
        if !self.carry.is_empty() {
            return Err(ReadError::Decode);
        }
        if self.in_window() {
            self.kept.push(KeptLine {
                head_end: self.heads.len(),
                extra_chars: std::mem::take(&mut self.extra_chars),
            });
        }
        self.total += 1;
        self.open = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    /// Lines as `(head, extra)`, read with pieces of `piece` bytes.
    fn lines(data: &[u8], piece: usize) -> Result<Vec<(String, usize)>, ()> {
        let mut l = Lines::new(0, usize::MAX);
        scan(BufReader::with_capacity(piece, data), &mut l, &|| false).map_err(|_| ())?;
        assert_eq!(l.total, l.kept.len());
        Ok(l.kept().map(|(h, e)| (h.to_owned(), e)).collect())
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

    /// The text as the tool rendered it before line numbers were written by hand: `format!`
    /// per line over the same lines.
    fn old_render(call: &ReadArgs<'_>, lines: &Lines) -> String {
        let (start_idx, window, total) = (lines.start_idx, lines.window, lines.total);
        let start = start_idx + 1;
        let end_line = start_idx.saturating_add(window).min(total);
        let file_path = call.file_path;
        let mut out =
            format!("File: {file_path} ({total} lines)\nShowing lines {start}-{end_line}\n");
        let mut long_lines = 0usize;
        for (i, (head, extra)) in lines.kept().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let _ = write!(out, "{:>6}\t{}", start + i, head);
            if extra > 0 {
                let _ = write!(out, "[+{} chars]", extra);
                long_lines += 1;
            }
        }
        if call.limit == 0 && total.saturating_sub(start_idx) > MAX_LINES {
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
        out
    }

    /// Files whose rendering has something to get wrong.
    fn corpus() -> Vec<(&'static str, Vec<u8>)> {
        let long = format!("{}{}\n", "é".repeat(1500), "x".repeat(1000));
        let many: String = (1..=2100).map(|i| format!("line {i}\n")).collect();
        vec![
            ("empty", Vec::new()),
            ("one line, no newline", b"hello".to_vec()),
            ("lf", b"a\nb\nc\n".to_vec()),
            ("crlf", b"a\r\nb\r\n\r\nc".to_vec()),
            ("lone cr", b"a\rb\r\r\nc\r".to_vec()),
            ("blank lines", b"\n\n\n".to_vec()),
            ("unicode", "aé\n€𝄞\n\u{2028}x\n".as_bytes().to_vec()),
            ("long line", long.into_bytes()),
            (
                "long lines",
                format!("{0}{0}short\n", format!("{}\n", "y".repeat(2001))).into_bytes(),
            ),
            ("over 2000 lines", many.into_bytes()),
            ("nul", b"text\0more\n".to_vec()),
            ("invalid utf-8", b"ok\n\xff\xfe\n".to_vec()),
            ("cut character", b"ok\xc3".to_vec()),
            (
                "nul after the sniff",
                [vec![b'a'; SNIFF_BYTES], b"\0\n".to_vec()].concat(),
            ),
            ("64 KiB", vec![b'z'; INLINE_READ_BYTES as usize]),
        ]
    }

    /// The inline read of a small local file renders what the general path renders, and both
    /// what the old `format!` rendering wrote, for every file and window of the corpus.
    #[test]
    fn the_inline_read_renders_as_the_general_path_and_the_old_format() {
        let dir = tempfile::tempdir().unwrap();
        let windows = [
            (1, 0),
            (0, 0),
            (-3, 2),
            (2, 1),
            (2, 0),
            (3, 5),
            (2000, 0),
            (2101, 0),
            (9, 1),
        ];
        let mut small = 0;
        for (name, data) in corpus() {
            let path = dir.path().join(name);
            std::fs::write(&path, &data).unwrap();
            for (offset, limit) in windows {
                let call = ReadArgs {
                    file_path: name,
                    offset,
                    limit,
                };
                let general = read(&call, &path, &LocalFileSystem, &|| false);
                let opened = open_small(&path).unwrap().expect("a small regular file");
                small += 1;
                let inline = read_small(&call, &path, opened, &|| false);
                assert_eq!(inline, general, "{name} {offset} {limit}");
                let mut lines = Lines::new(call.start_idx(), call.window());
                let scanned = scan(&data[..], &mut lines, &|| false);
                let expected = match scanned {
                    Ok(()) if !data[..data.len().min(SNIFF_BYTES)].contains(&0) => {
                        old_render(&call, &lines)
                    }
                    _ => format!("Binary file: {name} ({} bytes)", data.len()),
                };
                assert_eq!(general, expected, "{name} {offset} {limit}");
            }
        }
        assert_eq!(small, 15 * windows.len());
        // Line numbers over six digits (the general path: the file is over the inline bound).
        let wide = dir.path().join("wide");
        std::fs::write(&wide, "\n".repeat(1_000_005)).unwrap();
        let call = ReadArgs {
            file_path: "wide",
            offset: 999_998,
            limit: 0,
        };
        let mut lines = Lines::new(call.start_idx(), call.window());
        scan("\n".repeat(1_000_005).as_bytes(), &mut lines, &|| false)
            .ok()
            .unwrap();
        let general = read(&call, &wide, &LocalFileSystem, &|| false);
        assert_eq!(general, old_render(&call, &lines));
        assert!(general.contains("\n1000000\t\n"), "{general}");
        // Over the inline bound, or not a regular file: the general path.
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'z'; INLINE_READ_BYTES as usize + 1]).unwrap();
        assert!(open_small(&big).unwrap().is_none());
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(
            open_small(&fifo).unwrap().is_none(),
            "opened without blocking"
        );
        assert!(open_small(dir.path()).unwrap().is_none());
    }

    /// A file that grows after its size was taken is read on, from the same open file, as the
    /// general path reads it.
    #[test]
    fn a_file_that_grew_since_it_was_opened_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grows");
        std::fs::write(&path, b"one\ntwo\n").unwrap();
        let opened = open_small(&path).unwrap().unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"three\r\nfour")
            .unwrap();
        let call = ReadArgs {
            file_path: "grows",
            offset: 1,
            limit: 0,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let inline = runtime.block_on(async { read_small(&call, &path, opened, &|| false) });
        assert_eq!(inline, read(&call, &path, &LocalFileSystem, &|| false));
        assert!(inline.ends_with("     4\tfour"), "{inline}");
    }
}
