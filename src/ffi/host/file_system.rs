//! The host file system (spec §5.1): its C vtable, the answers its slots give through
//! `agentao_fs_out`, and its adapter to the tools layer's [`FileSystem`].

use std::ffi::{c_char, c_void, CString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::ffi::agent::{agent_ref, agentao_agent};
use crate::ffi::answer::{self, Answerer, NoAnswer, Request};
use crate::ffi::host::{adopt_opt, host_capability};
use crate::ffi::host_data::HostData;
use crate::ffi::{agentao_error, agentao_status, guard, in_callback, str_arg, Fail};
use crate::tools::{normalize, FileEntry, FileStat, FileSystem, LocalFileSystem, WalkEntry};

/// What a path is, in a file-system answer (passed as `int32_t`).
#[repr(i32)]
pub(crate) enum agentao_fs_kind {
    /// Neither a regular file nor a directory (a device, a dangling link).
    Other = 0,
    /// A regular file.
    File = 1,
    /// A directory.
    Dir = 2,
}

/// `max_bytes` of a `read` that wants the whole file.
const READ_ALL: u64 = u64::MAX;
/// The most entries one `list_dir` or `walk` answer may hold.
const MAX_ENTRIES: usize = 1_000_000;

/// A host file system (spec §5.1). Installed with `agentao_agent_set_file_system`, which
/// copies it. Every file tool (`read_file`, `write_file`, `replace`, `list_directory`, `glob`,
/// `search_file_content`) reaches files through it, so a host can serve the whole workspace
/// from memory or from a remote machine. The path policy still applies to the paths the tools
/// compute, before any callback runs, and to every path a `walk` or `list_dir` answer yields
/// (links resolved on the local disk, as for a path the model names) before any slot, the
/// host's or the local disk's, reads, stats or lists it: a listed link that leads outside the
/// workspace is left out, or shown by name only, while reads outside are refused.
///
/// Paths passed in are absolute, UTF-8, and valid until the callback returns. A NULL slot
/// falls back to the local disk for that operation (fill every slot to serve the whole
/// workspace). Each answering slot returns 0 on success or a positive `errno` value (`ENOENT`,
/// `EISDIR`, `EACCES`...), which the tools report as the OS error it names; any other return
/// value is a host error the tools report by name.
///
/// Ownership of answers: the library never frees host memory. A slot that produces data
/// answers through the `agentao_fs_out` it receives, with the `agentao_fs_out_*` setter that
/// fits the slot (each copies what it is given). A wrong setter or a bad value fails that one
/// operation with a message naming the problem.
///
/// Deferred answers: the `out` handle is a request handle (docs/c-api.md, "Answering a
/// request"). By default the slot's return value finishes it when the callback returns. A slot
/// that calls `agentao_fs_out_defer(out)` before returning answers later instead, from any
/// thread: the setters, then exactly one `agentao_fs_out_finish(out, code)` (the code the slot
/// would have returned); its return value is then ignored. `write` and `exists` have no handle
/// and always answer by returning. A deferred request waits at most the config's
/// `reply_timeout_ms`, 300 s when unset (then it fails with a timeout, and the late answer is
/// dropped), and no longer than its turn: a cancel fails it at once (the late answer is
/// dropped too); a pending handle keeps `userdata` alive.
///
/// Threads: callbacks run on library threads, possibly several at once (read-only tools of one
/// batch run in parallel), and never while the library holds a lock. Blocking is fine; a
/// callback still running 2 s after its turn was cancelled is left behind (the call is
/// answered as cancelled, the turn ends, and what the callback answers later is dropped).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct agentao_file_system {
    /// `sizeof(agentao_file_system)`; a smaller value means the slots past it are NULL.
    pub(crate) struct_size: u32,
    pub(crate) userdata: *mut c_void,
    /// Called exactly once with `userdata` when the library lets go of the vtable: when
    /// another file system replaces it, when the agent is freed and its last call ended, or
    /// at once when `agentao_agent_set_file_system` refuses it.
    pub userdata_free: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// Reads the file at `path`: the whole file when `max_bytes` is `UINT64_MAX`, else at
    /// most `max_bytes` bytes from its start (binary sniffing). Answer with
    /// `agentao_fs_out_set_data`. Text lines are split by the library (strict UTF-8).
    pub(crate) read: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            path: *const c_char,
            max_bytes: u64,
            out: *mut agentao_fs_out,
        ) -> i32,
    >,
    /// Writes `len` bytes (borrowed for the call) to `path`: appended when `append`, else
    /// replacing the content atomically. Missing parent directories are created; no newline
    /// translation.
    pub(crate) write: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            path: *const c_char,
            data: *const u8,
            len: usize,
            append: bool,
        ) -> i32,
    >,
    /// The entries of the directory `path` (not `.` and `..`): one
    /// `agentao_fs_out_add_entry` each, in any order.
    pub(crate) list_dir: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            path: *const c_char,
            out: *mut agentao_fs_out,
        ) -> i32,
    >,
    /// Every descendant of the directory `base` (not `base` itself) down to `max_depth` levels
    /// (1: its entries; negative: no limit), without descending into symlinked directories:
    /// one `agentao_fs_out_add_path` each, with an absolute path under `base`. `glob` and
    /// `search_file_content` match their patterns on this list themselves, so matching is the
    /// same on every file system.
    pub(crate) walk: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            base: *const c_char,
            max_depth: i32,
            out: *mut agentao_fs_out,
        ) -> i32,
    >,
    /// Size, modification time and kind of `path` (symlinks followed): answer with
    /// `agentao_fs_out_set_stat`. Also answers "is it a file / a directory".
    pub(crate) stat: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            path: *const c_char,
            out: *mut agentao_fs_out,
        ) -> i32,
    >,
    /// Whether `path` exists. NULL with a `stat` slot: asked through `stat`.
    pub exists: Option<unsafe extern "C" fn(userdata: *mut c_void, path: *const c_char) -> bool>,
}

/// Which slot an `agentao_fs_out` answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FsOp {
    Read,
    ListDir,
    Walk,
    Stat,
}

impl FsOp {
    fn slot(self) -> &'static str {
        match self {
            FsOp::Read => "read",
            FsOp::ListDir => "list_dir",
            FsOp::Walk => "walk",
            FsOp::Stat => "stat",
        }
    }
}

/// The answer of one file-system callback, filled by the `agentao_fs_out_*` setters: a request
/// handle, finished by the callback's return or, after `agentao_fs_out_defer`, by
/// `agentao_fs_out_finish` from any thread. A call on a finished handle returns
/// `AGENTAO_STATUS_INVALID_ARGUMENT`.
pub struct agentao_fs_out {
    op: FsOp,
    max_bytes: u64,
    filled: Filled,
    deferred: bool,
    answerer: Answerer<FsAnswer>,
    /// The file system's userdata stays alive while the host holds the handle.
    _keep_alive: Arc<HostData>,
}

/// What the setters put in an answer.
#[derive(Default)]
struct Filled {
    data: Option<Vec<u8>>,
    entries: Vec<FileEntry>,
    paths: Vec<WalkEntry>,
    stat: Option<FileStat>,
    /// The first bad setter call: the operation fails with it.
    error: Option<String>,
}

/// A deferred answer: the slot's code and what the setters filled in.
struct FsAnswer {
    code: i32,
    filled: Filled,
}

impl Request for agentao_fs_out {
    const NAME: &'static str = "out";

    fn deferred(&self) -> bool {
        self.deferred
    }
}

fn kind_of(kind: i32) -> Option<(bool, bool)> {
    match kind {
        k if k == agentao_fs_kind::Other as i32 => Some((false, false)),
        k if k == agentao_fs_kind::File as i32 => Some((false, true)),
        k if k == agentao_fs_kind::Dir as i32 => Some((true, false)),
        _ => None,
    }
}

/// Runs one setter: checks the handle and the slot it answers; a refused call also fails
/// the operation, so a host that ignores the status still gets a clear error in the tool.
unsafe fn with_out(
    out: *mut agentao_fs_out,
    setter: &str,
    answers: FsOp,
    err_out: *mut *mut agentao_error,
    body: impl FnOnce(&mut agentao_fs_out) -> Result<(), Fail>,
) -> agentao_status {
    guard(err_out, || {
        answer::with(out, |out| {
            let result = if out.op != answers {
                Err(Fail(
                    agentao_status::InvalidArgument,
                    format!(
                        "{setter} answers `{}`, but this is the answer of `{}`",
                        answers.slot(),
                        out.op.slot()
                    ),
                ))
            } else {
                body(out)
            };
            if let Err(f) = &result {
                out.filled.error.get_or_insert_with(|| f.1.clone());
            }
            result
        })?
    })
}

/// Answers `read` with `len` bytes at `data` (borrowed, copied; NULL allowed when `len` is
/// 0). More than the `max_bytes` asked for is `AGENTAO_STATUS_INVALID_ARGUMENT`. Call it
/// once, before `out` is finished (any thread; see `agentao_fs_out_defer`). A setter on a
/// finished `out` returns `_INVALID_ARGUMENT` and does nothing.
#[no_mangle]
pub unsafe extern "C" fn agentao_fs_out_set_data(
    out: *mut agentao_fs_out,
    data: *const u8,
    len: usize,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_out(out, "agentao_fs_out_set_data", FsOp::Read, err_out, |o| {
        if data.is_null() && len > 0 {
            return Err(Fail(agentao_status::NullArgument, "`data` is NULL".into()));
        }
        if len as u64 > o.max_bytes {
            return Err(Fail(
                agentao_status::InvalidArgument,
                format!("{len} bytes answer a read of at most {} bytes", o.max_bytes),
            ));
        }
        let bytes = if len == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(data, len).to_vec()
        };
        o.filled.data = Some(bytes);
        Ok(())
    })
}

/// Adds one entry to a `list_dir` answer: `name` (borrowed, copied; UTF-8, no `/`, not empty,
/// not `.` or `..`), its `agentao_fs_kind`, and its size (ignored for directories).
#[no_mangle]
pub unsafe extern "C" fn agentao_fs_out_add_entry(
    out: *mut agentao_fs_out,
    name: *const c_char,
    kind: i32,
    size: u64,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_out(
        out,
        "agentao_fs_out_add_entry",
        FsOp::ListDir,
        err_out,
        |o| {
            let name = str_arg(name, "name")?;
            if name.is_empty() || name == "." || name == ".." || name.contains('/') {
                return Err(Fail(
                    agentao_status::InvalidArgument,
                    format!("entry name {name:?} is not a single path component"),
                ));
            }
            let (is_dir, is_file) = kind_of(kind).ok_or_else(|| bad_kind(kind))?;
            if o.filled.entries.len() >= MAX_ENTRIES {
                return Err(too_many());
            }
            o.filled.entries.push(FileEntry {
                name: name.to_owned(),
                is_dir,
                is_file,
                size: if is_dir { 0 } else { size },
            });
            Ok(())
        },
    )
}

/// Adds one path to a `walk` answer: an absolute path (borrowed, copied; UTF-8) under the
/// walked directory, without `.` or `..` components (`_INVALID_ARGUMENT`), and its
/// `agentao_fs_kind`. A path outside the walked directory is dropped.
#[no_mangle]
pub unsafe extern "C" fn agentao_fs_out_add_path(
    out: *mut agentao_fs_out,
    path: *const c_char,
    kind: i32,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_out(out, "agentao_fs_out_add_path", FsOp::Walk, err_out, |o| {
        let path = str_arg(path, "path")?;
        if !path.starts_with('/') {
            return Err(Fail(
                agentao_status::InvalidArgument,
                format!("walk path {path:?} is not absolute"),
            ));
        }
        // `<base>/../x` is under `base` by its spelling only.
        if path.split('/').any(|part| part == "." || part == "..") {
            return Err(Fail(
                agentao_status::InvalidArgument,
                format!("walk path {path:?} has a `.` or `..` component"),
            ));
        }
        let (is_dir, is_file) = kind_of(kind).ok_or_else(|| bad_kind(kind))?;
        if o.filled.paths.len() >= MAX_ENTRIES {
            return Err(too_many());
        }
        o.filled.paths.push(WalkEntry {
            path: PathBuf::from(path),
            is_dir,
            is_file,
        });
        Ok(())
    })
}

/// Answers `stat`: `size` in bytes, `mtime` in seconds since the epoch (finite), and the
/// `agentao_fs_kind`.
#[no_mangle]
pub unsafe extern "C" fn agentao_fs_out_set_stat(
    out: *mut agentao_fs_out,
    size: u64,
    mtime: f64,
    kind: i32,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_out(out, "agentao_fs_out_set_stat", FsOp::Stat, err_out, |o| {
        let (is_dir, is_file) = kind_of(kind).ok_or_else(|| bad_kind(kind))?;
        if !mtime.is_finite() {
            return Err(Fail(
                agentao_status::InvalidArgument,
                "`mtime` is not a finite number".into(),
            ));
        }
        o.filled.stat = Some(FileStat {
            size,
            mtime,
            is_dir,
            is_file,
        });
        Ok(())
    })
}

/// Says, inside a `read`, `list_dir`, `walk` or `stat` callback, that the slot answers after
/// it returns: the callback's return value is then ignored, and the request waits for
/// `agentao_fs_out_finish` (from any thread), at most the config's `reply_timeout_ms` (300 s
/// when unset).
/// Calling it again is harmless. Errors: `_NULL_ARGUMENT`; `_INVALID_ARGUMENT` when `out` is finished
/// (after the callback returned without deferring, or after `agentao_fs_out_finish`).
#[no_mangle]
pub unsafe extern "C" fn agentao_fs_out_defer(
    out: *mut agentao_fs_out,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || answer::with(out, |o| o.deferred = true))
}

/// Finishes `out` with `code`, what the slot would have returned: 0 (the setters called so far
/// are the answer) or a positive `errno` value. Any thread, inside the callback or after it;
/// exactly once. Consumes `out`: a second call (or a call after the callback returned
/// without `agentao_fs_out_defer`) returns `AGENTAO_STATUS_INVALID_ARGUMENT` and does nothing. An
/// answer after the request gave up (`reply_timeout_ms`) is dropped and returns
/// `AGENTAO_STATUS_OK`. The file system's `userdata_free` may run inside this call, when it is
/// the last thing keeping it.
#[no_mangle]
pub unsafe extern "C" fn agentao_fs_out_finish(
    out: *mut agentao_fs_out,
    code: i32,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let o = answer::finish(out)?;
        o.answerer.answer(FsAnswer {
            code,
            filled: o.filled,
        });
        Ok(())
    })
}

fn bad_kind(kind: i32) -> Fail {
    Fail(
        agentao_status::InvalidArgument,
        format!("{kind} is not an agentao_fs_kind"),
    )
}

fn too_many() -> Fail {
    Fail(
        agentao_status::InvalidArgument,
        format!("an answer may hold at most {MAX_ENTRIES} entries"),
    )
}

type ReadFn = unsafe extern "C" fn(*mut c_void, *const c_char, u64, *mut agentao_fs_out) -> i32;
type WriteFn = unsafe extern "C" fn(*mut c_void, *const c_char, *const u8, usize, bool) -> i32;
type PathOutFn = unsafe extern "C" fn(*mut c_void, *const c_char, *mut agentao_fs_out) -> i32;
type WalkFn = unsafe extern "C" fn(*mut c_void, *const c_char, i32, *mut agentao_fs_out) -> i32;
type ExistsFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> bool;

/// The copied vtable, as the tools see it.
struct FfiFileSystem {
    data: Arc<HostData>,
    /// How long a deferred answer is waited for (the config's `reply_timeout_ms`).
    deadline: Duration,
    read: Option<ReadFn>,
    write: Option<WriteFn>,
    list_dir: Option<PathOutFn>,
    walk: Option<WalkFn>,
    stat: Option<PathOutFn>,
    exists: Option<ExistsFn>,
}

host_capability!(agentao_file_system, minimum: userdata_free, required: []);

/// The path as the host sees it: `.` and `..` folded (the path policy has already resolved
/// it; a host file system has no symlinks to resolve through).
fn c_path(path: &Path) -> io::Result<CString> {
    let path = normalize(path);
    let s = path.to_str().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "the path is not valid UTF-8")
    })?;
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "embedded null byte"))
}

impl FfiFileSystem {
    /// Calls a slot that answers through a handle: the answer is its return and what it
    /// filled in, or, when it deferred, what `agentao_fs_out_finish` brings.
    fn ask(
        &self,
        op: FsOp,
        max_bytes: u64,
        call: impl FnOnce(*mut agentao_fs_out) -> i32,
    ) -> io::Result<Filled> {
        let slot = op.slot();
        let (answerer, waiter) = answer::channel();
        let out = answer::issue(agentao_fs_out {
            op,
            max_bytes,
            filled: Filled::default(),
            deferred: false,
            answerer,
            _keep_alive: self.data.clone(),
        })
        .map_err(|_| io::Error::other("too many host requests are waiting for an answer"))?;
        let code = in_callback(|| call(out));
        let (code, filled) = match answer::returned(out) {
            Some(o) => (code, o.filled),
            None => match waiter.wait(Some(self.deadline)) {
                Ok(a) => (a.code, a.filled),
                Err(NoAnswer::TimedOut) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the host file system did not finish `{slot}` within reply_timeout_ms ({} ms)",
                            self.deadline.as_millis()
                        ),
                    ))
                }
                Err(NoAnswer::Dropped) => {
                    return Err(io::Error::other(format!(
                        "the host file system's `{slot}` request was dropped"
                    )))
                }
                Err(NoAnswer::Cancelled) => {
                    return Err(io::Error::new(
                        io::ErrorKind::Interrupted,
                        format!("cancelled while the host file system's `{slot}` was unanswered"),
                    ))
                }
            },
        };
        self.call(slot, Some(&filled), code)?;
        Ok(filled)
    }

    /// Turns a slot's status into an `io::Result`.
    fn call(&self, slot: &str, out: Option<&Filled>, code: i32) -> io::Result<()> {
        if let Some(e) = out.and_then(|o| o.error.as_ref()) {
            return Err(io::Error::other(format!(
                "the host file system's `{slot}` answer was refused: {e}"
            )));
        }
        match code {
            0 => Ok(()),
            c if c > 0 => Err(io::Error::from_raw_os_error(c)),
            c => Err(io::Error::other(format!(
                "the host file system's `{slot}` callback returned {c}, which is neither 0 nor an errno value"
            ))),
        }
    }

    fn read_with(&self, f: ReadFn, path: &Path, max: u64) -> io::Result<Vec<u8>> {
        let p = c_path(path)?;
        // SAFETY: the host's callback with its userdata; `p` outlives the call, and `out` is a
        // handle the host answers through.
        let out = self.ask(FsOp::Read, max, |out| unsafe {
            f(self.data.ptr(), p.as_ptr(), max, out)
        })?;
        out.data.ok_or_else(|| {
            io::Error::other("the host file system's `read` succeeded without an answer")
        })
    }
}

impl FileSystem for FfiFileSystem {
    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
        match self.read {
            Some(f) => self.read_with(f, path, READ_ALL),
            None => LocalFileSystem.read_bytes(path),
        }
    }

    fn read_partial(&self, path: &Path, n: usize) -> io::Result<Vec<u8>> {
        match self.read {
            Some(f) => self.read_with(f, path, n as u64),
            None => LocalFileSystem.read_partial(path, n),
        }
    }

    fn write_bytes(&self, path: &Path, data: &[u8], append: bool) -> io::Result<()> {
        let Some(f) = self.write else {
            return LocalFileSystem.write_bytes(path, data, append);
        };
        let p = c_path(path)?;
        // SAFETY: as above; `data` is borrowed for the call.
        let code = in_callback(|| unsafe {
            f(
                self.data.ptr(),
                p.as_ptr(),
                data.as_ptr(),
                data.len(),
                append,
            )
        });
        self.call("write", None, code)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<FileEntry>> {
        let Some(f) = self.list_dir else {
            return LocalFileSystem.list_dir(path);
        };
        let p = c_path(path)?;
        // SAFETY: as above.
        let out = self.ask(FsOp::ListDir, 0, |out| unsafe {
            f(self.data.ptr(), p.as_ptr(), out)
        })?;
        Ok(out.entries)
    }

    fn walk(
        &self,
        base: &Path,
        max_depth: Option<usize>,
        should_stop: &dyn Fn() -> bool,
    ) -> io::Result<Vec<WalkEntry>> {
        let Some(f) = self.walk else {
            return LocalFileSystem.walk(base, max_depth, should_stop);
        };
        let p = c_path(base)?;
        let depth = max_depth.map_or(-1, |d| i32::try_from(d).unwrap_or(i32::MAX));
        // SAFETY: as above.
        let out = self.ask(FsOp::Walk, 0, |out| unsafe {
            f(self.data.ptr(), p.as_ptr(), depth, out)
        })?;
        // The host's list is trusted for kinds, not for where it points: only descendants of
        // the walked directory, re-rooted at the caller's spelling of it.
        let host_base = normalize(base);
        Ok(out
            .paths
            .into_iter()
            .filter_map(|e| {
                let rel = e.path.strip_prefix(&host_base).ok()?;
                let plain = rel
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
                (plain && !rel.as_os_str().is_empty()).then(|| WalkEntry {
                    path: base.join(rel),
                    ..e
                })
            })
            .collect())
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        let Some(f) = self.stat else {
            return LocalFileSystem.stat(path);
        };
        let p = c_path(path)?;
        // SAFETY: as above.
        let out = self.ask(FsOp::Stat, 0, |out| unsafe {
            f(self.data.ptr(), p.as_ptr(), out)
        })?;
        out.stat.ok_or_else(|| {
            io::Error::other("the host file system's `stat` succeeded without an answer")
        })
    }

    fn exists(&self, path: &Path) -> bool {
        match (self.exists, self.stat) {
            (Some(f), _) => match c_path(path) {
                // SAFETY: as above.
                Ok(p) => in_callback(|| unsafe { f(self.data.ptr(), p.as_ptr()) }),
                Err(_) => false,
            },
            (None, Some(_)) => self.stat(path).is_ok(),
            (None, None) => LocalFileSystem.exists(path),
        }
    }
}

/// Installs a host file system on `agent` (see `agentao_file_system`); the vtable is copied.
/// NULL `fs` restores the local file system. Call it right after `agentao_agent_new` or between
/// turns: while a turn runs it is refused with `AGENTAO_STATUS_TURN_IN_PROGRESS`.
///
/// Ownership: on success the library owns `fs->userdata` and calls `fs->userdata_free` once
/// when it lets go (replaced, or agent freed and its last call ended). On any failure
/// (`_NULL_ARGUMENT` for a NULL agent, `_INVALID_ARGUMENT` for a `struct_size` below the
/// `userdata_free` slot, `_TURN_IN_PROGRESS`) `userdata_free` has already been called and the
/// previous file system stays. Any thread; not from inside a callback of this agent's turn.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_set_file_system(
    agent: *mut agentao_agent,
    fs: *const agentao_file_system,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        // Owned from here: every failure below releases the userdata.
        let adopted = adopt_opt(fs)?;
        let agent = agent_ref(agent)?;
        let deadline = agent.reply_timeout().unwrap_or(answer::DEFAULT_DEADLINE);
        let installed = adopted.map(|(data, v)| {
            Arc::new(FfiFileSystem {
                data: Arc::new(data),
                deadline,
                read: v.read,
                write: v.write,
                list_dir: v.list_dir,
                walk: v.walk,
                stat: v.stat,
                exists: v.exists,
            }) as Arc<dyn FileSystem>
        });
        agent.set_file_system(installed)?;
        Ok(())
    })
}
