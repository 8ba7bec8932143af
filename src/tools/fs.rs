//! The `FileSystem` seam (spec §5.1): every file tool reaches the disk through it, so a host can
//! inject an in-memory or remote implementation. Paths passed in are absolute; failures are
//! `io::Error`s, which the tools turn into their error strings.

use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

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
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if append || std::fs::symlink_metadata(path).is_err() {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(append)
                .truncate(!append)
                .open(path)?;
            return f.write_all(data);
        }
        // Overwrite atomically: a sibling temp file renamed over the (symlink-resolved) target,
        // old mode kept; a target that is not writable is refused like the reference does.
        let target = std::fs::canonicalize(path)?;
        let meta = std::fs::metadata(&target)?;
        if nix::unistd::access(&target, nix::unistd::AccessFlags::W_OK).is_err() {
            return Err(std::io::Error::from_raw_os_error(libc::EACCES));
        }
        let dir = target.parent().unwrap_or(Path::new("/"));
        let tmp = dir.join(format!(
            ".agentao-write-{}.tmp",
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
                return std::fs::write(&target, data);
            }
            Err(e) => return Err(e),
        };
        let result = (|| {
            file.write_all(data)?;
            drop(file);
            std::fs::set_permissions(&tmp, meta.permissions())?;
            std::fs::rename(&tmp, &target)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
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

/// Python's `str(OSError)` layout, which the model-visible error strings carry:
/// `[Errno 2] No such file or directory: '/x'`.
pub fn os_error(e: &std::io::Error, path: &Path) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let full = e.to_string();
            let text = full.split(" (os error").next().unwrap_or(&full);
            format!("[Errno {code}] {text}: '{}'", path.display())
        }
        None => e.to_string(),
    }
}
