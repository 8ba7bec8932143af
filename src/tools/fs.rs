//! The `FileSystem` seam (spec §5.1): every file tool reaches the disk through it, so a host can
//! inject an in-memory or remote implementation. Paths passed in are absolute; failures are
//! `io::Error`s, which the tools turn into their error strings.

use std::io::{Read, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One directory entry (`list_dir`). `size` is 0 for directories.
#[derive(Debug, Clone, PartialEq)]
pub struct FileEntry {
    pub name: String,
    pub is_dir: bool,
    pub is_file: bool,
    pub size: u64,
}

/// One entry of [`FileSystem::walk`] (kinds follow symlinks).
#[derive(Debug, Clone, PartialEq)]
pub struct WalkEntry {
    pub path: PathBuf,
    pub is_dir: bool,
    pub is_file: bool,
}

/// What the tools need of `stat` (symlinks followed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FileStat {
    pub size: u64,
    /// Seconds since the epoch.
    pub mtime: f64,
    pub is_dir: bool,
    pub is_file: bool,
}

pub trait FileSystem: Send + Sync {
    /// Whether a small read may run on a runtime worker (`read_file` inline on the turn's
    /// task): true only for the local disk; a host's file system is host code, which never
    /// runs on a worker.
    fn is_local_disk(&self) -> bool {
        false
    }
    /// The whole file.
    fn read_bytes(&self, path: &Path) -> std::io::Result<Vec<u8>>;
    /// At most `n` bytes from the start (binary sniffing).
    fn read_partial(&self, path: &Path, n: usize) -> std::io::Result<Vec<u8>>;
    /// A streaming reader over the file (line-oriented tools read through it).
    fn open_read(&self, path: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(std::io::Cursor::new(self.read_bytes(path)?)))
    }
    /// Creates parent directories; replacing existing content is atomic; no newline
    /// translation.
    fn write_bytes(&self, path: &Path, data: &[u8], append: bool) -> std::io::Result<()>;
    /// Reads a file, hands its bytes to `edit`, and replaces the file with what `edit` returns
    /// (as `write_bytes` does; `None` leaves it alone). A change someone else made since the
    /// read fails the call with a [`FileChanged`] error instead of being overwritten. This
    /// default compares `stat` around the read and before the write.
    fn edit_bytes(
        &self,
        path: &Path,
        edit: &mut dyn FnMut(Vec<u8>) -> Option<Vec<u8>>,
    ) -> std::io::Result<()> {
        let before = self.stat(path)?;
        let data = self.read_bytes(path)?;
        if self.stat(path)? != before {
            return Err(FileChanged::BeforeWrite.into());
        }
        let Some(new) = edit(data) else {
            return Ok(());
        };
        if self.stat(path)? != before {
            return Err(FileChanged::BeforeWrite.into());
        }
        self.write_bytes(path, &new, false)
    }
    fn list_dir(&self, path: &Path) -> std::io::Result<Vec<FileEntry>>;
    /// Every descendant of `base` (not `base` itself) down to `max_depth` (1 = the entries of
    /// `base`), as absolute paths with their kinds, without descending into symlinked directories. `should_stop` is polled so a cancelled turn ends a
    /// long walk.
    fn walk(
        &self,
        base: &Path,
        max_depth: Option<usize>,
        should_stop: &dyn Fn() -> bool,
    ) -> std::io::Result<Vec<WalkEntry>>;
    fn stat(&self, path: &Path) -> std::io::Result<FileStat>;
    fn exists(&self, path: &Path) -> bool {
        self.stat(path).is_ok()
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.stat(path).is_ok_and(|s| s.is_dir)
    }
    fn is_file(&self, path: &Path) -> bool {
        self.stat(path).is_ok_and(|s| s.is_file)
    }
    /// True only for [`LocalFileSystem`]: tools may then use fast local paths (the in-process
    /// ripgrep engine walks the real disk).
    fn is_local(&self) -> bool {
        false
    }
}

/// The default: the process's own file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalFileSystem;

fn stat_of(meta: &std::fs::Metadata) -> FileStat {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    FileStat {
        size: meta.len(),
        mtime,
        is_dir: meta.is_dir(),
        is_file: meta.is_file(),
    }
}

impl FileSystem for LocalFileSystem {
    fn is_local_disk(&self) -> bool {
        true
    }

    fn read_bytes(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn read_partial(&self, path: &Path, n: usize) -> std::io::Result<Vec<u8>> {
        let f = std::fs::File::open(path)?;
        let mut buf = Vec::with_capacity(n.min(1 << 20));
        f.take(n as u64).read_to_end(&mut buf)?;
        Ok(buf)
    }

    fn open_read(&self, path: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(std::fs::File::open(path)?))
    }

    fn write_bytes(&self, path: &Path, data: &[u8], append: bool) -> std::io::Result<()> {
        write_local(path, data, append, None)
    }

    fn edit_bytes(
        &self,
        path: &Path,
        edit: &mut dyn FnMut(Vec<u8>) -> Option<Vec<u8>>,
    ) -> std::io::Result<()> {
        let mut file = open_regular(path, std::fs::OpenOptions::new().read(true))?;
        let seen = Version::of(&file.metadata()?);
        let mut data = Vec::with_capacity(usize::try_from(seen.size).unwrap_or(0));
        file.read_to_end(&mut data)?;
        if Version::of(&file.metadata()?) != seen {
            return Err(FileChanged::BeforeWrite.into());
        }
        let Some(new) = edit(data) else {
            return Ok(());
        };
        write_local(path, &new, false, Some(ReadGuard { file: &file, seen }))
    }

    fn list_dir(&self, path: &Path) -> std::io::Result<Vec<FileEntry>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let (is_dir, is_file, size) = match std::fs::metadata(entry.path()) {
                Ok(m) => (
                    m.is_dir(),
                    m.is_file(),
                    if m.is_file() { m.len() } else { 0 },
                ),
                Err(_) => (false, false, 0),
            };
            out.push(FileEntry {
                name,
                is_dir,
                is_file,
                size,
            });
        }
        Ok(out)
    }

    fn walk(
        &self,
        base: &Path,
        max_depth: Option<usize>,
        should_stop: &dyn Fn() -> bool,
    ) -> std::io::Result<Vec<WalkEntry>> {
        std::fs::read_dir(base)?;
        let mut out = Vec::new();
        let walker = ignore::WalkBuilder::new(base)
            .standard_filters(false)
            .hidden(false)
            .follow_links(false)
            .max_depth(max_depth)
            .build();
        for entry in walker {
            if should_stop() {
                break;
            }
            let Ok(entry) = entry else { continue };
            if entry.depth() == 0 {
                continue;
            }
            let file_type = entry.file_type();
            let path = entry.into_path();
            // Follows a symlink for the kind, as `Path.is_file()` does; a dangling one is
            // neither a file nor a directory.
            let (is_dir, is_file) = match file_type {
                Some(t) if !t.is_symlink() => (t.is_dir(), t.is_file()),
                _ => match std::fs::metadata(&path) {
                    Ok(m) => (m.is_dir(), m.is_file()),
                    Err(_) => (false, false),
                },
            };
            out.push(WalkEntry {
                path,
                is_dir,
                is_file,
            });
        }
        Ok(out)
    }

    fn stat(&self, path: &Path) -> std::io::Result<FileStat> {
        Ok(stat_of(&std::fs::metadata(path)?))
    }

    fn is_local(&self) -> bool {
        true
    }
}

/// Why [`FileSystem::edit_bytes`] failed: someone else changed the file under the edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileChanged {
    /// Seen before anything was written: the edit was not applied.
    BeforeWrite,
    /// Seen right after the rename: the edit was applied, and another process wrote to the
    /// file in the moment before it, into the copy the rename replaced. That copy, with the
    /// other write in it, is saved at `kept` (`None` if it could not be saved).
    DuringRename { kept: Option<PathBuf> },
}

impl FileChanged {
    /// The `FileChanged` inside `e`, if that is what `e` is.
    pub(crate) fn of(e: &std::io::Error) -> Option<&FileChanged> {
        e.get_ref()?.downcast_ref::<FileChanged>()
    }
}

impl std::fmt::Display for FileChanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileChanged::BeforeWrite => "the file changed since it was read",
            FileChanged::DuringRename { .. } => "the file changed while it was being replaced",
        })
    }
}

impl std::error::Error for FileChanged {}

impl From<FileChanged> for std::io::Error {
    fn from(c: FileChanged) -> Self {
        std::io::Error::other(c)
    }
}

/// What identifies one state of a file: a write through any name changes the size or the
/// change time; a rename over it changes the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    fn of(m: &std::fs::Metadata) -> Self {
        Version {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// The open file an edit read, and what it was then.
struct ReadGuard<'a> {
    file: &'a std::fs::File,
    seen: Version,
}

impl ReadGuard<'_> {
    /// The name still leads to the file we read, and nobody wrote to it.
    fn unchanged(&self, target: &Path) -> std::io::Result<bool> {
        Ok(Version::of(&std::fs::metadata(target)?) == self.seen
            && Version::of(&self.file.metadata()?) == self.seen)
    }
}

const TEMP_PREFIX: &str = ".agentao-write-";
const TEMP_SUFFIX: &str = ".tmp";
/// A temporary file this old is stale even if its writer's pid is in use (pid reuse, old
/// names without a pid, another machine on a shared file system).
const STALE_TEMP_AGE: Duration = Duration::from_secs(3600);

/// Removes temporary files of our own pattern in `dir` that their writer left behind (it was
/// killed mid-write): the writer's process (its pid is in the name) is gone, or the file is
/// older than [`STALE_TEMP_AGE`]. Runs on every write into `dir`; failures are ignored.
fn remove_stale_temps(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(middle) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TEMP_PREFIX))
            .and_then(|n| n.strip_suffix(TEMP_SUFFIX))
        else {
            continue;
        };
        let (pid, id) = match middle.split_once('-') {
            Some((pid, id)) => (pid.parse::<i32>().ok(), id),
            None => (None, middle),
        };
        if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let old = meta
            .modified()
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > STALE_TEMP_AGE);
        let writer_gone = pid.is_some_and(|pid| {
            pid > 0
                && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                    == Err(nix::errno::Errno::ESRCH)
        });
        if old || writer_gone {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Saves the file an edit replaced (still open) next to `target` as
/// `<name>.agentao-conflict-<pid>-<id>`, so another process's write that landed in it is not
/// lost.
fn keep_replaced_copy(mut replaced: &std::fs::File, target: &Path) -> std::io::Result<PathBuf> {
    use std::io::Seek as _;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let copy = target.with_file_name(format!(
        "{name}.agentao-conflict-{}-{}",
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    ));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&copy)?;
    replaced.seek(std::io::SeekFrom::Start(0))?;
    std::io::copy(&mut replaced, &mut out)?;
    out.sync_all()?;
    Ok(copy)
}

/// Makes a rename or a new name durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Opens `path` without waiting for a peer (a FIFO or a device the checkout placed there
/// would block the call forever) and only when it is a regular file.
fn open_regular(path: &Path, options: &mut std::fs::OpenOptions) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(not_regular(path));
    }
    let file = options.custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular(path));
    }
    Ok(file)
}

fn not_regular(path: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{} is not a regular file", path.display()),
    )
}

/// `write_bytes` of the local file system; with `guard`, the overwrite of an edit, which
/// fails instead of replacing a file someone else changed since the guard's read.
fn write_local(
    path: &Path,
    data: &[u8],
    append: bool,
    guard: Option<ReadGuard<'_>>,
) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(parent)?;
    if append || std::fs::symlink_metadata(path).is_err() {
        if guard.is_some() {
            // The file we read is gone.
            return Err(FileChanged::BeforeWrite.into());
        }
        remove_stale_temps(parent);
        let mut f = open_regular(
            path,
            std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(append)
                .truncate(!append),
        )?;
        f.write_all(data)?;
        f.sync_all()?;
        return sync_dir(parent);
    }
    // Overwrite atomically: a sibling temp file, synced, renamed over the (symlink-resolved)
    // target, old mode kept; a target that is not writable is refused like the reference does.
    let target = std::fs::canonicalize(path)?;
    let meta = std::fs::metadata(&target)?;
    if nix::unistd::access(&target, nix::unistd::AccessFlags::W_OK).is_err() {
        return Err(std::io::Error::from_raw_os_error(libc::EACCES));
    }
    let dir = target.parent().unwrap_or(Path::new("/"));
    remove_stale_temps(dir);
    let tmp = dir.join(format!(
        "{TEMP_PREFIX}{}-{}{TEMP_SUFFIX}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let staged = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp);
    let mut file = match staged {
        Ok(f) => f,
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EPERM | libc::EROFS)
            ) =>
        {
            // A writable file in a read-only directory: the in-place write still works.
            if let Some(g) = &guard {
                if !g.unchanged(&target)? {
                    return Err(FileChanged::BeforeWrite.into());
                }
            }
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&target)?;
            f.write_all(data)?;
            return f.sync_all();
        }
        Err(e) => return Err(e),
    };
    let result = (|| {
        file.write_all(data)?;
        file.sync_all()?;
        drop(file);
        std::fs::set_permissions(&tmp, meta.permissions())?;
        // Checked as late as possible: the slow part (writing, syncing) is done.
        if let Some(g) = &guard {
            if !g.unchanged(&target)? {
                return Err(FileChanged::BeforeWrite.into());
            }
        }
        std::fs::rename(&tmp, &target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    sync_dir(dir)?;
    if let Some(g) = &guard {
        // A process that opened the file before the rename writes into the replaced copy.
        super::replaced_file_writers::wait_until_closed(g.file, super::replaced_file_writers::WAIT);
        // Not the change time: the rename itself changes it (one link less).
        let now = Version::of(&g.file.metadata()?);
        if (now.size, now.mtime) != (g.seen.size, g.seen.mtime) {
            let kept = keep_replaced_copy(g.file, &target).ok();
            return Err(FileChanged::DuringRename { kept }.into());
        }
    }
    Ok(())
}

/// Python's `str(OSError)` layout, which the model-visible error strings carry:
/// `[Errno 2] No such file or directory: '/x'`.
pub(crate) fn os_error(e: &std::io::Error, path: &Path) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let full = e.to_string();
            let text = full.split(" (os error").next().unwrap_or(&full);
            format!("[Errno {code}] {text}: '{}'", path.display())
        }
        None => e.to_string(),
    }
}
