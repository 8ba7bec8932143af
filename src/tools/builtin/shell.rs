//! `run_shell_command` (spec §1.9): launch through the [`ShellExecutor`](super::shell_exec)
//! seam and format what came back for the model within 40,000 characters.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use regex::Regex;
use serde_json::{json, Map, Value};

use super::result_format::thousands;
use super::shell_exec::{BackgroundError, BackgroundHandle, ShellRequest, ShellResult};
use super::{arg_bool, arg_f64, arg_str, required_str, Tool, ToolContext, ToolError};
use crate::permissions::git_launch::{self, GitLaunch};
use crate::permissions::path_policy;
use crate::tools::Approval;

/// The longest string the tool returns, headers and notices included.
pub(crate) const MAX_OUTPUT_CHARS: usize = 40_000;
pub(crate) const MAX_COMMAND_ECHO_CHARS: usize = 2_000;
pub(crate) const DEFAULT_TIMEOUT_S: f64 = 120.0;
/// The longest command planned or run: Linux passes no longer argument to a program
/// (`MAX_ARG_STRLEN`), so the local executor could not run it anyway, and the floor's scan of a
/// command grows faster than its length.
pub(crate) const MAX_COMMAND_BYTES: usize = 128 * 1024;
const HEAD_SHARE: f64 = 0.2;

pub(crate) struct RunShellCommand {
    description: String,
    command_description: String,
}

impl RunShellCommand {
    /// `interpreter` is what the tool description names (`<interpreter> -c <command>`).
    pub(crate) fn new(interpreter: &Path) -> Self {
        let invocation = format!("{} -c <command>", interpreter.display());
        let description = format!(
            "Run a shell command as `{invocation}`. The command runs in its own process group.\n\n\
             Background commands:\n\
             1. Set is_background to true.\n\
             2. The tool starts the command and returns at once. It does not wait for the command, \
             and it does not check the command for errors.\n\
             3. The tool discards the stdout and stderr of a background command.\n\
             4. The result gives the process ID (PID). It also gives the process group ID (PGID) \
             when one is available.\n\
             5. To stop the command, run the stop command that the result gives. With a PGID, this \
             is `kill -- -PGID`. To send a different signal, run `kill -s SIGNAL -- -PGID`.\n\n\
             Output volume:\n\
             - Use quiet flags when they exist, for example `npm install --silent` or `pip install -q`.\n\
             - Always turn off terminal pagination so that the command can end, for example \
             `git --no-pager` or `PAGER=cat`.\n\n\
             The result of a foreground command contains:\n\
             - Output: stdout and stderr, shown separately. After a timeout, the output can be \
             empty or partial.\n\
             - Exit code: only if the exit code is not zero.\n\
             - Signal: only if a signal stopped the process."
        );
        RunShellCommand {
            description,
            command_description: format!(
                "The exact command to run. The tool runs it as `{invocation}`."
            ),
        }
    }
}

impl Tool for RunShellCommand {
    fn name(&self) -> &str {
        "run_shell_command"
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "command": {"type": "string", "description": self.command_description},
            "description": {"type": "string", "description": "One sentence that tells the user what the command does. The confirmation prompt and the progress indicator show this text. Be specific. Do not use line breaks."},
            "working_directory": {"type": "string", "description": "Directory to run the command in. The directory must exist. Default: the working directory."},
            "timeout": {"type": "number", "description": "Inactivity timeout in seconds. Default 120. Any new output starts the timer again. For a command that must run with no end, use is_background.", "default": 120},
            "is_background": {"type": "boolean", "description": "If true, start the command in the background and return at once. The tool does not check the command for errors, and it discards the stdout and stderr. Use this for long-running servers and file watchers.", "default": false}},
            "required": ["command"]})
    }
    fn reject_early(&self, args: &Map<String, Value>) -> Option<String> {
        oversized_command(args.get("command")?.as_str()?)
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let command = required_str(args, "command", "run_shell_command")?;
        let _description = arg_str(args, "description")?;
        let working_directory = arg_str(args, "working_directory")?.unwrap_or(".");
        let timeout = arg_f64(args, "timeout")?.unwrap_or(ctx.services.shell_settings.timeout_s);
        let is_background = arg_bool(args, "is_background")?.unwrap_or(false);

        if let Some(refusal) = oversized_command(command) {
            return Ok(refusal);
        }
        let floor = ctx.services.shell_settings.hardline_at_launch;
        if let Some(desc) = floor
            .then(|| crate::permissions::hardline_verdict(command))
            .flatten()
        {
            return Ok(cap_result(&format!("Error: hardline:{desc}"), ""));
        }
        if working_directory.contains('\0') {
            return Ok(cap_result(
                &format!(
                    "Error: working_directory '{}' cannot be used: embedded null byte.",
                    clip(working_directory, "the path")
                ),
                "",
            ));
        }
        let cwd = match path_policy::contain_directory(ctx.workspace, working_directory) {
            Ok(p) => p,
            Err(msg) => return Ok(cap_result(&format!("Error: {msg}"), "")),
        };
        let executor = ctx.services.shell();
        if let Err(why) = executor.shell_spec() {
            return Ok(cap_result(
                &format!("Error: hardline:no-shell-opaque:{why}"),
                "",
            ));
        }
        if executor.is_local() && !cwd.is_dir() {
            return Ok(cap_result(
                &format!(
                    "Error: working_directory '{}' does not exist or is not a directory.",
                    clip(working_directory, "the path")
                ),
                "",
            ));
        }
        let mut env = super::shell_exec::build_child_env(ctx.services.shell_settings.scrub_env);
        let hardened;
        // The read-only git set runs with config-driven execution off (see git_launch).
        let contain = (ctx.approval == Approval::ReadOnlySet
            && !ctx.settings.allow_reads_outside_workspace)
            .then_some(ctx.workspace);
        let launch = match git_launch::harden(command, &cwd, &env, executor.is_local(), contain) {
            GitLaunch::Unchanged => command,
            GitLaunch::Refused(text) => return Ok(cap_result(&text, "")),
            GitLaunch::Hardened { command, env: e } => {
                env = e;
                hardened = command;
                hardened.as_str()
            }
        };
        let timeout_d = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::MAX);
        let request = ShellRequest {
            command: launch,
            cwd: &cwd,
            env: &env,
            timeout: timeout_d,
            on_chunk: Some(ctx.output),
            cancel: Some(ctx.cancel),
        };
        if is_background {
            let started = executor.run_background(&request);
            if let Ok(BackgroundHandle {
                owned: Some(group), ..
            }) = &started
            {
                ctx.services.processes().keep(group.clone());
            }
            let text = match started {
                Ok(h) => match h.pgid {
                    Some(pgid) => format!(
                        "Background process started.\nPID: {}\nPGID: {pgid}\nCommand: {}\nWorking directory: {}\nTo stop: kill -- -{pgid}",
                        h.pid,
                        clip(command, "the command"),
                        cwd.display()
                    ),
                    None => format!(
                        "Background process started.\nPID: {}\nCommand: {}\nWorking directory: {}\nTo stop: kill {}",
                        h.pid,
                        clip(command, "the command"),
                        cwd.display(),
                        h.pid
                    ),
                },
                Err(BackgroundError::Unsupported) => "Error: shell executor does not support background execution. \
                     Run this command with is_background=false."
                    .to_owned(),
                Err(BackgroundError::Failed(e)) => format!("Error starting background command: {e}"),
            };
            return Ok(cap_result(&text, ""));
        }
        let result = match executor.run(&request) {
            Ok(r) => r,
            Err(e) => return Ok(cap_result(&format!("Error starting command: {e}"), "")),
        };
        if result.cancelled && ctx.cancel.is_cancelled() {
            let header = format!("[Operation Cancelled] {}", ctx.cancel.reason());
            let body = partial_report(
                &result,
                format!("Command: {}", clip(command, "the command")),
                "\n\nOutput before it was cancelled:\n",
                header.chars().count() + 1,
            );
            return Ok(format!("{header}\n{body}"));
        }
        if result.cancelled {
            return Ok(cap_result(
                &partial_report(
                    &result,
                    format!(
                        "Command was cancelled by the shell executor.\nCommand: {}",
                        clip(command, "the command")
                    ),
                    "\n\nOutput before it was cancelled:\n",
                    0,
                ),
                "",
            ));
        }
        if result.timed_out {
            return Ok(cap_result(
                &partial_report(
                    &result,
                    format!(
                        "Command timed out after {timeout:.0}s of inactivity.\nCommand: {}",
                        clip(command, "the command")
                    ),
                    "\n\nPartial output before timeout:\n",
                    0,
                ),
                "",
            ));
        }
        Ok(cap_result(&format_result(&result, 0), ""))
    }
}

/// The refusal of a command over [`MAX_COMMAND_BYTES`].
pub(crate) fn oversized_command(command: &str) -> Option<String> {
    (command.len() > MAX_COMMAND_BYTES).then(|| {
        format!(
            "Error: the command is {} bytes; commands longer than {} bytes are refused without \
             being checked or run (no longer argument can be passed to a program). Write a long \
             script to a file with write_file, then run the file.",
            thousands(command.len() as u64),
            thousands(MAX_COMMAND_BYTES as u64)
        )
    })
}

/// One stream ready to show: text before the gap, bytes lost in it, text after.
#[derive(Debug, Clone, Default)]
struct Stream {
    head: String,
    gap: u64,
    tail: String,
}

fn clen(s: &str) -> usize {
    s.chars().count()
}

fn first_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn last_chars(s: &str, n: usize) -> &str {
    let len = clen(s);
    if n >= len {
        return s;
    }
    match s.char_indices().nth(len - n) {
        Some((i, _)) => &s[i..],
        None => "",
    }
}

/// The command (or path) echoed back, clipped at 2,000 characters.
pub(crate) fn clip(text: &str, what: &str) -> String {
    let n = clen(text);
    if n <= MAX_COMMAND_ECHO_CHARS {
        return text.to_owned();
    }
    format!(
        "{} [... {} more chars of {what} not shown]",
        first_chars(text, MAX_COMMAND_ECHO_CHARS),
        thousands((n - MAX_COMMAND_ECHO_CHARS) as u64)
    )
}

fn ansi_re() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\x1b(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])").ok())
        .as_ref()
}

fn severed_re() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\x1b(?:\[[0-?]*[ -/]*)?\z").ok())
        .as_ref()
}

/// Terminal `\r` overwrites collapsed (CRLF first becomes LF), then ANSI escapes removed.
pub(crate) fn clean(text: &str) -> String {
    let collapsed = if text.contains('\r') {
        let text = text.replace("\r\n", "\n");
        let mut lines = Vec::new();
        for line in text.split('\n') {
            if line.contains('\r') {
                let seg = line.rsplit('\r').next().unwrap_or("");
                if !seg.is_empty() {
                    lines.push(seg.to_owned());
                }
            } else {
                lines.push(line.to_owned());
            }
        }
        lines.join("\n")
    } else {
        text.to_owned()
    };
    match ansi_re() {
        Some(re) if collapsed.contains('\x1b') => re.replace_all(&collapsed, "").into_owned(),
        _ => collapsed,
    }
}

fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(8192)].contains(&0)
}

fn stream_of(raw: &[u8], omitted: u64, at: usize) -> Stream {
    if is_binary(raw) {
        return Stream {
            head: format!(
                "[binary output — {} bytes not shown]",
                thousands(raw.len() as u64 + omitted)
            ),
            ..Stream::default()
        };
    }
    let at = if at <= raw.len() { at } else { 0 };
    if omitted == 0 {
        return Stream {
            head: clean(&String::from_utf8_lossy(raw)),
            ..Stream::default()
        };
    }
    let head = String::from_utf8_lossy(&raw[..at]).into_owned();
    let tail = String::from_utf8_lossy(&raw[at..]).into_owned();
    let head = match severed_re() {
        Some(re) => re.replace(&head, "").into_owned(),
        None => head,
    };
    Stream {
        head: clean(&head),
        gap: omitted,
        tail: clean(&tail),
    }
}

fn gap_note(gap: u64, cut: usize) -> String {
    if gap > 0 && cut > 0 {
        format!(
            "[... {} bytes of output not kept, and {} more chars omitted ...]",
            thousands(gap),
            thousands(cut as u64)
        )
    } else if gap > 0 {
        format!("[... {} bytes of output not kept ...]", thousands(gap))
    } else {
        format!("[... {} chars omitted ...]", thousands(cut as u64))
    }
}

fn around(head: &str, note: &str, tail: &str) -> String {
    format!(
        "{head}{}{note}\n{tail}",
        if head.is_empty() { "" } else { "\n" }
    )
}

fn fit_stream(stream: &Stream, budget: usize) -> String {
    if budget == 0 {
        return String::new();
    }
    let (head, gap, tail) = (&stream.head, stream.gap, &stream.tail);
    let (hl, tl) = (clen(head), clen(tail));
    if gap == 0 {
        if hl <= budget {
            return head.clone();
        }
        let overhead = clen(&around("x", &gap_note(0, hl), ""));
        if budget <= overhead {
            return first_chars(&gap_note(0, hl), budget).to_owned();
        }
        let keep = budget - overhead;
        let first = (keep as f64 * HEAD_SHARE) as usize;
        let last = keep - first;
        return around(
            first_chars(head, first),
            &gap_note(0, hl - keep),
            last_chars(head, last),
        );
    }
    let whole = around(head, &gap_note(gap, 0), tail);
    if clen(&whole) <= budget {
        return whole;
    }
    let overhead = clen(&around("x", &gap_note(gap, hl + tl), ""));
    if budget <= overhead {
        return first_chars(&gap_note(gap, 0), budget).to_owned();
    }
    let keep = budget - overhead;
    let first = hl.min((keep as f64 * HEAD_SHARE) as usize);
    let last = tl.min(keep - first);
    let first = hl.min(keep - last);
    let cut = (hl - first) + (tl - last);
    around(
        first_chars(head, first),
        &gap_note(gap, cut),
        last_chars(tail, last),
    )
}

fn stream_need(stream: &Stream) -> usize {
    if stream.head.is_empty() && stream.gap == 0 && stream.tail.is_empty() {
        return 0;
    }
    clen(&fit_stream(stream, usize::MAX))
}

fn split_budget(first: usize, second: usize, available: usize) -> (usize, usize) {
    if first + second <= available {
        return (first, second);
    }
    if second == 0 {
        return (available, 0);
    }
    if first == 0 {
        return (0, available);
    }
    if first <= second {
        let f = first.min(available / 2);
        return (f, available - f);
    }
    let s = second.min(available / 2);
    (available - s, s)
}

/// `body` + `suffix` in at most 40,000 characters; the suffix is kept whole.
fn cap_result(body: &str, suffix: &str) -> String {
    if clen(body) + clen(suffix) <= MAX_OUTPUT_CHARS {
        return format!("{body}{suffix}");
    }
    let stream = Stream {
        head: body.to_owned(),
        ..Stream::default()
    };
    format!(
        "{}{suffix}",
        fit_stream(&stream, MAX_OUTPUT_CHARS.saturating_sub(clen(suffix)))
    )
}

fn streams_of(result: &ShellResult) -> [Stream; 2] {
    [
        stream_of(
            &result.stdout,
            result.stdout_omitted_bytes,
            result.stdout_omitted_at,
        ),
        stream_of(
            &result.stderr,
            result.stderr_omitted_bytes,
            result.stderr_omitted_at,
        ),
    ]
}

/// `msg`, then what a command stopped early printed.
fn partial_report(result: &ShellResult, mut msg: String, prefix: &str, reserve: usize) -> String {
    let streams = streams_of(result);
    let needs = [stream_need(&streams[0]), stream_need(&streams[1])];
    if needs.iter().any(|n| *n > 0) {
        let whole = [
            fit_stream(&streams[0], needs[0]),
            fit_stream(&streams[1], needs[1]),
        ];
        let separator = if !whole[0].is_empty() && !whole[1].is_empty() && !whole[0].ends_with('\n')
        {
            "\n"
        } else {
            ""
        };
        let available = MAX_OUTPUT_CHARS
            .saturating_sub(reserve)
            .saturating_sub(clen(&msg))
            .saturating_sub(clen(prefix))
            .saturating_sub(separator.len());
        let (b0, b1) = split_budget(needs[0], needs[1], available);
        let fitted: Vec<String> = [fit_stream(&streams[0], b0), fit_stream(&streams[1], b1)]
            .into_iter()
            .filter(|f| !f.is_empty())
            .collect();
        msg.push_str(prefix);
        msg.push_str(&fitted.join(separator));
    }
    msg
}

/// The normal result: `STDOUT:`/`STDERR:` sections and the status, within the budget.
fn format_result(result: &ShellResult, reserve: usize) -> String {
    let [stdout, stderr] = streams_of(result);
    let (out_need, err_need) = (stream_need(&stdout), stream_need(&stderr));
    let status = if result.returncode < 0 {
        format!("Signal: {}", -result.returncode)
    } else if result.returncode != 0 {
        format!("Exit code: {}", result.returncode)
    } else {
        String::new()
    };
    let mut headers = Vec::new();
    if out_need > 0 {
        headers.push("STDOUT:\n".len());
    }
    if err_need > 0 {
        headers.push("STDERR:\n".len());
    }
    if !status.is_empty() {
        headers.push(status.len());
    }
    let available = (MAX_OUTPUT_CHARS + 2)
        .saturating_sub(reserve)
        .saturating_sub(headers.iter().sum::<usize>())
        .saturating_sub(2 * headers.len());
    let (ob, eb) = split_budget(out_need, err_need, available);
    let mut parts = Vec::new();
    if out_need > 0 {
        let s = fit_stream(&stdout, ob);
        if !s.is_empty() {
            parts.push(format!("STDOUT:\n{s}"));
        }
    }
    if err_need > 0 {
        let s = fit_stream(&stderr, eb);
        if !s.is_empty() {
            parts.push(format!("STDERR:\n{s}"));
        }
    }
    if !status.is_empty() {
        parts.push(status);
    }
    if parts.is_empty() {
        "Command completed with no output.".to_owned()
    } else {
        parts.join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(out: &[u8], err: &[u8], code: i32) -> ShellResult {
        ShellResult {
            returncode: code,
            stdout: out.to_vec(),
            stderr: err.to_vec(),
            ..ShellResult::default()
        }
    }

    #[test]
    fn verified_layout() {
        assert_eq!(
            format_result(&res(b"out\n", b"err\n", 3), 0),
            "STDOUT:\nout\n\n\nSTDERR:\nerr\n\n\nExit code: 3"
        );
        assert_eq!(
            format_result(&res(b"", b"", 0), 0),
            "Command completed with no output."
        );
        assert_eq!(format_result(&res(b"", b"", -9), 0), "Signal: 9");
        assert_eq!(
            format_result(&res(b"a\0b", b"", 0), 0),
            "STDOUT:\n[binary output — 3 bytes not shown]"
        );
    }

    #[test]
    fn cleaning() {
        assert_eq!(clean("10%\r50%\r100%\ndone\r\n"), "100%\ndone\n");
        assert_eq!(clean("\x1b[31mred\x1b[0m"), "red");
        assert_eq!(clean("gone\r\nkeep"), "gone\nkeep");
    }

    #[test]
    fn budget_is_whole_string() {
        let big = "x".repeat(100_000);
        let out = format_result(&res(big.as_bytes(), b"small error", 1), 0);
        assert!(clen(&out) <= MAX_OUTPUT_CHARS, "{}", clen(&out));
        assert!(out.contains("[... 60,"), "{}", &out[..200]);
        assert!(out.contains("STDERR:\nsmall error\n\nExit code: 1"));
        let both = format_result(&res(big.as_bytes(), big.as_bytes(), 0), 0);
        assert!(clen(&both) <= MAX_OUTPUT_CHARS);
        assert!(clen(&both) > MAX_OUTPUT_CHARS - 50);
    }

    #[test]
    fn clip_long_commands() {
        let c = "y".repeat(2_500);
        assert_eq!(
            clip(&c, "the command"),
            format!(
                "{} [... 500 more chars of the command not shown]",
                "y".repeat(2000)
            )
        );
    }
}
