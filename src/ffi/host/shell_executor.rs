//! The host shell executor (spec §5.2): its C vtable, the run handle it answers through, and
//! its adapter to the tools layer's [`ShellExecutor`].

use std::ffi::{c_char, c_void, CString};
use std::path::PathBuf;
use std::sync::Arc;

use crate::ffi::agent::{agent_ref, agentao_agent};
use crate::ffi::answer::{self, Request};
use crate::ffi::cancel::agentao_cancel_token;
use crate::ffi::host::{adopt_opt, host_capability};
use crate::ffi::host_data::HostData;
use crate::ffi::{agentao_error, agentao_status, guard, in_callback, opt_str_arg, Fail};
use crate::tools::shell_run::{self, OutputStream, RunAnswer, RunKind, RunSink};
use crate::tools::{
    BackgroundError, BackgroundHandle, ShellDialect, ShellExecutor, ShellRequest, ShellResult,
    ShellSpec,
};

/// The shell dialect an executor declares (passed as `int32_t`). The hardline floor and the
/// permission rules' `dialect` field see it. v1 accepts `POSIX` only.
#[repr(i32)]
pub(crate) enum agentao_shell_dialect {
    /// A POSIX shell: commands run as `<interpreter> -c <command>`.
    Posix = 0,
}

/// Which output stream a chunk comes from (passed as `int32_t`).
#[repr(i32)]
pub(crate) enum agentao_shell_stream {
    Stdout = 1,
    Stderr = 2,
}

/// One command to run, borrowed for the duration of the `run` / `run_background` callback
/// (copy what you keep; the `cancel` token stays valid until the run is answered).
#[repr(C)]
pub(crate) struct agentao_shell_request {
    /// `sizeof(agentao_shell_request)`: fields may be appended.
    pub(crate) struct_size: u32,
    /// The command, for the executor's shell (`<interpreter> -c <command>` for POSIX).
    pub(crate) command: *const c_char,
    /// The working directory: absolute, inside the workspace (the path policy has checked it;
    /// whether it exists is the executor's check).
    pub(crate) cwd: *const c_char,
    /// The environment as `NAME=value` strings (provider credentials already removed).
    pub(crate) env: *const *const c_char,
    pub(crate) env_len: usize,
    /// The inactivity timeout in milliseconds: stop the command when it has been silent this
    /// long, and answer with `timed_out`. The library stops waiting 2 s after that.
    pub(crate) timeout_ms: u64,
    /// Cancelled when the turn is cancelled or the library stops the run (reason `timeout`):
    /// stop the command and answer. Borrowed: valid until the run is answered.
    pub(crate) cancel: *const agentao_cancel_token,
}

/// A host shell executor (spec §5.2). Installed with `agentao_agent_set_shell_executor`, which
/// copies it. `run_shell_command` hands it every command it launches, after the permission
/// decision, the hardline floor and the working-directory policy have passed: a refused
/// command never reaches the executor.
///
/// `run` receives the request and an `agentao_shell_run` handle, and answers through the
/// handle, before returning or later from any thread: any number of
/// `agentao_shell_run_output` calls, then exactly one of `agentao_shell_run_finish` (the
/// command ended) or `agentao_shell_run_fail` (it could not start, which the tool reports as
/// an error, never as a result). `run_background` (NULL: background runs are refused) answers
/// with `agentao_shell_run_started` or `agentao_shell_run_fail`.
///
/// The library keeps the turn safe from a slow executor: when the turn is cancelled, or no
/// output came for `timeout_ms`, `request->cancel` is cancelled, and 2 s later the library
/// stops waiting and reports what it has. Answer the handle even then: a late answer is
/// ignored, and an unanswered handle leaks.
///
/// Threads: callbacks run on library threads; `run` may block.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct agentao_shell_executor {
    /// `sizeof(agentao_shell_executor)`; a smaller value means the slots past it are NULL.
    pub(crate) struct_size: u32,
    pub(crate) userdata: *mut c_void,
    /// Called exactly once with `userdata` when the library lets go: replaced, or the agent
    /// freed and every run handed out answered; at once when the install is refused.
    pub userdata_free: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// An `agentao_shell_dialect` value.
    pub(crate) dialect: i32,
    /// The interpreter the executor runs commands with (borrowed, copied; NULL: `sh`).
    pub(crate) interpreter: *const c_char,
    /// Runs a command in the foreground. Required.
    pub(crate) run: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            request: *const agentao_shell_request,
            run: *mut agentao_shell_run,
        ),
    >,
    /// Starts a command in the background and answers at once. NULL: not supported.
    pub(crate) run_background: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            request: *const agentao_shell_request,
            run: *mut agentao_shell_run,
        ),
    >,
}

/// One run handed to a shell executor: a request handle (docs/c-api.md, "Answering a
/// request"), valid from the callback until exactly one finishing call, `agentao_shell_run_finish`
/// / `_started` / `_fail`, from any thread, inside `run` or after it. A call on a finished run
/// returns `AGENTAO_STATUS_INVALID_ARGUMENT` and does nothing. Thread-safe: output may come from any
/// thread.
pub struct agentao_shell_run {
    sink: RunSink,
    /// The token `request->cancel` points to.
    _token: Box<agentao_cancel_token>,
    /// Keeps the executor's userdata alive while the host holds the run.
    _vtable: Arc<FfiShell>,
}

impl Request for agentao_shell_run {
    const NAME: &'static str = "run";
}

type RunFn =
    unsafe extern "C" fn(*mut c_void, *const agentao_shell_request, *mut agentao_shell_run);

host_capability!(agentao_shell_executor, minimum: run, required: [run]);

struct FfiShell {
    data: HostData,
    interpreter: PathBuf,
    run: RunFn,
    run_background: Option<RunFn>,
}

/// The executor behind an agent: the vtable, shared with every run handle.
struct FfiShellExecutor(Arc<FfiShell>);

impl FfiShellExecutor {
    fn launch(
        &self,
        f: RunFn,
        kind: RunKind,
        request: &ShellRequest<'_>,
    ) -> Result<shell_run::RunWaiter, String> {
        let command = CString::new(request.command).map_err(|_| "embedded null byte")?;
        let cwd = request
            .cwd
            .to_str()
            .and_then(|c| CString::new(c).ok())
            .ok_or("the working directory is not a valid C string")?;
        let env: Vec<CString> = request
            .env
            .iter()
            .filter_map(|(k, v)| {
                let (k, v) = (k.to_str()?, v.to_str()?);
                CString::new(format!("{k}={v}")).ok()
            })
            .collect();
        let env_ptrs: Vec<*const c_char> = env.iter().map(|e| e.as_ptr()).collect();
        let (sink, waiter, token) = shell_run::channel(kind, request.cancel);
        let token = Box::new(agentao_cancel_token { token });
        let req = agentao_shell_request {
            struct_size: std::mem::size_of::<agentao_shell_request>() as u32,
            command: command.as_ptr(),
            cwd: cwd.as_ptr(),
            env: env_ptrs.as_ptr(),
            env_len: env_ptrs.len(),
            timeout_ms: u64::try_from(request.timeout.as_millis()).unwrap_or(u64::MAX),
            cancel: &*token,
        };
        let run = answer::issue(agentao_shell_run {
            sink,
            _token: token,
            _vtable: self.0.clone(),
        })
        .map_err(|_| "too many host requests are waiting for an answer")?;
        // SAFETY: the host's callback; `req` and what it points to outlive the call, and the
        // run handle is the host's until it answers.
        in_callback(|| unsafe { f(self.0.data.ptr(), &req, run) });
        Ok(waiter)
    }
}

impl ShellExecutor for FfiShellExecutor {
    fn shell_spec(&self) -> Result<ShellSpec, String> {
        Ok(ShellSpec {
            dialect: ShellDialect::Posix,
            interpreter: self.0.interpreter.clone(),
        })
    }

    fn run(&self, request: &ShellRequest<'_>) -> Result<ShellResult, String> {
        self.launch(self.0.run, RunKind::Foreground, request)?
            .wait(request)
    }

    fn run_background(
        &self,
        request: &ShellRequest<'_>,
    ) -> Result<BackgroundHandle, BackgroundError> {
        let f = self.0.run_background.ok_or(BackgroundError::Unsupported)?;
        self.launch(f, RunKind::Background, request)
            .map_err(BackgroundError::Failed)?
            .wait_background(request)
    }
}

/// Installs a host shell executor on `agent` (see `agentao_shell_executor`); the vtable is
/// copied. NULL `shell` restores the local executor. Call it right after `agentao_agent_new`
/// or between turns: while a turn runs it is refused with `AGENTAO_STATUS_TURN_IN_PROGRESS`.
///
/// Errors: `_NULL_ARGUMENT` (NULL agent, or NULL `run`), `_INVALID_ARGUMENT` (a `struct_size`
/// below the `run` slot, or a dialect other than `AGENTAO_SHELL_DIALECT_POSIX`),
/// `_INVALID_UTF8` (`interpreter`), `_TURN_IN_PROGRESS`. On any failure `userdata_free` has
/// already been called and the previous executor stays. Any thread; not from inside a
/// callback of this agent's turn.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_set_shell_executor(
    agent: *mut agentao_agent,
    shell: *const agentao_shell_executor,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        // Owned from here: every failure below releases the userdata.
        let installed: Option<Arc<dyn ShellExecutor>> = match adopt_opt(shell)? {
            None => None,
            Some((data, v)) => {
                if v.dialect != agentao_shell_dialect::Posix as i32 {
                    return Err(Fail(
                        agentao_status::InvalidArgument,
                        format!(
                            "agentao_shell_executor.dialect is {}; only AGENTAO_SHELL_DIALECT_POSIX (0) is supported",
                            v.dialect
                        ),
                    ));
                }
                let interpreter = opt_str_arg(v.interpreter, "interpreter")?.unwrap_or("sh");
                // `run` is a required slot: `adopt` refused a NULL one.
                let run = v.run.ok_or_else(|| Fail::null("run"))?;
                Some(Arc::new(FfiShellExecutor(Arc::new(FfiShell {
                    data,
                    interpreter: PathBuf::from(interpreter),
                    run,
                    run_background: v.run_background,
                }))))
            }
        };
        agent_ref(agent)?.set_shell_executor(installed)?;
        Ok(())
    })
}

fn answer(run: agentao_shell_run, a: RunAnswer) -> Result<(), Fail> {
    run.sink
        .answer(a)
        .map_err(|e| Fail(agentao_status::InvalidArgument, e.to_string()))
}

/// Streams `len` bytes of output (borrowed, copied; any bytes, UTF-8 split across chunks is
/// fine) from `stream` (`AGENTAO_SHELL_STREAM_STDOUT` / `_STDERR`). Each chunk restarts the
/// inactivity clock; its text reaches the host as a `tool_output` event, and the tool's result
/// keeps the first and last 512 KiB of each stream. Any thread, until the run is answered.
/// Errors: `_NULL_ARGUMENT` (`run`, or `data` with `len > 0`), `_INVALID_ARGUMENT` (stream).
#[no_mangle]
pub unsafe extern "C" fn agentao_shell_run_output(
    run: *mut agentao_shell_run,
    stream: i32,
    data: *const u8,
    len: usize,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        if run.is_null() {
            return Err(Fail::null("run"));
        }
        let stream = match stream {
            s if s == agentao_shell_stream::Stdout as i32 => OutputStream::Stdout,
            s if s == agentao_shell_stream::Stderr as i32 => OutputStream::Stderr,
            s => {
                return Err(Fail(
                    agentao_status::InvalidArgument,
                    format!("{s} is not an agentao_shell_stream"),
                ))
            }
        };
        if len == 0 {
            return answer::with(run, |_| ());
        }
        if data.is_null() {
            return Err(Fail(agentao_status::NullArgument, "`data` is NULL".into()));
        }
        let bytes = std::slice::from_raw_parts(data, len);
        answer::with(run, |run| run.sink.output(stream, bytes))
    })
}

/// Answers a foreground run: the command ended with `returncode` (negative: killed by that
/// signal), `timed_out` when it was stopped for inactivity, `cancelled` when it was stopped
/// because `request->cancel` was cancelled. Consumes `run` whatever the outcome; on a
/// background run it is `_INVALID_ARGUMENT` and the run is failed.
#[no_mangle]
pub unsafe extern "C" fn agentao_shell_run_finish(
    run: *mut agentao_shell_run,
    returncode: i32,
    timed_out: bool,
    cancelled: bool,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        answer(
            answer::finish(run)?,
            RunAnswer::Finished {
                returncode,
                timed_out,
                cancelled,
            },
        )
    })
}

/// Answers a background run: the command started as process `pid`, in process group `pgid`
/// (negative: none). Consumes `run`; on a foreground run, or with a `pid` that is not
/// positive, it is `_INVALID_ARGUMENT` and the run is failed.
#[no_mangle]
pub unsafe extern "C" fn agentao_shell_run_started(
    run: *mut agentao_shell_run,
    pid: i64,
    pgid: i64,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let run = answer::finish(run)?;
        let Ok(pid @ 1..) = u32::try_from(pid) else {
            let msg = format!("pid {pid} is not a process id");
            let _ = run
                .sink
                .answer(RunAnswer::Failed(format!("the shell executor gave {msg}")));
            return Err(Fail(agentao_status::InvalidArgument, msg));
        };
        let pgid = u32::try_from(pgid).ok().filter(|&g| g > 0);
        answer(run, RunAnswer::Started { pid, pgid })
    })
}

/// Answers that the command could not be started; `message` (borrowed; NULL allowed) becomes
/// `Error starting command: <message>`. Consumes `run`. Invalid UTF-8 in `message` still fails
/// the run (with a generic message) and returns `_INVALID_UTF8`.
#[no_mangle]
pub unsafe extern "C" fn agentao_shell_run_fail(
    run: *mut agentao_shell_run,
    message: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let run = answer::finish(run)?;
        let (msg, result) = match opt_str_arg(message, "message") {
            Ok(m) => (
                m.unwrap_or("the shell executor could not start the command")
                    .to_owned(),
                Ok(()),
            ),
            Err(f) => (
                "the shell executor could not start the command".to_owned(),
                Err(f),
            ),
        };
        answer(run, RunAnswer::Failed(msg))?;
        result
    })
}
