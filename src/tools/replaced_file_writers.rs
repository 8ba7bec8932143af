//! Processes that still write to a file an edit replaced. An edit renames its new file over
//! the old one (atomic, as an editor saves); a process that opened the old file before the
//! rename goes on writing into it, where the write would be lost, since the old file has no
//! name any more. Linux lists every process's open files under /proc, so the edit waits for
//! such writers to close the file before its last look at it (docs/reliability.md, the
//! concurrent-edit row). Elsewhere nothing is known and nothing is waited for.

use std::fs::File;
use std::time::{Duration, Instant};

/// How long an edit waits for them: a writer that opened the file just before the rename
/// (a shell's `>>`, a script's log line) writes within moments, even on a loaded machine;
/// one that keeps the file open longer (a daemon's log) writes into the old file however long
/// the edit waits.
pub(crate) const WAIT: Duration = Duration::from_secs(1);

/// Waits, at most `limit`, until no process (this one included) holds `file` open for
/// writing. Returns whether one still does.
pub(crate) fn wait_until_closed(file: &File, limit: Duration) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(meta) = file.metadata() else {
        return false;
    };
    let deadline = Instant::now() + limit;
    while open_for_writing(meta.dev(), meta.ino()) {
        if Instant::now() >= deadline {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Whether any process has the file `(dev, ino)` open for writing. Processes whose open files
/// this one may not see (another user's, without privilege) are not counted.
#[cfg(target_os = "linux")]
fn open_for_writing(dev: u64, ino: u64) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return false;
    };
    processes.flatten().any(|process| {
        if !process
            .file_name()
            .as_encoded_bytes()
            .iter()
            .all(u8::is_ascii_digit)
        {
            return false;
        }
        let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else {
            return false;
        };
        fds.flatten().any(|fd| {
            // The link's target is the open file itself, renamed or unlinked as it may be.
            std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino)
                && opened_for_writing(&process.path().join("fdinfo").join(fd.file_name()))
        })
    })
}

#[cfg(not(target_os = "linux"))]
fn open_for_writing(_dev: u64, _ino: u64) -> bool {
    false
}

/// Reads the `flags:` line (octal) of a /proc fdinfo file: the access mode is its low two bits
/// (O_WRONLY 1, O_RDWR 2). An fdinfo that cannot be read counts as a writer, since the file
/// is open there.
#[cfg(target_os = "linux")]
fn opened_for_writing(fdinfo: &std::path::Path) -> bool {
    let Ok(info) = std::fs::read_to_string(fdinfo) else {
        return true;
    };
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_none_or(|flags| flags & 3 != 0)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn a_writer_is_seen_until_it_closes_and_a_reader_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x").unwrap();
        let reader = File::open(&path).unwrap();
        assert!(!wait_until_closed(&reader, Duration::ZERO));
        let mut writer = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        assert!(wait_until_closed(&reader, Duration::from_millis(20)));
        let closes = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            writer.write_all(b"y").unwrap();
        });
        assert!(!wait_until_closed(&reader, Duration::from_secs(10)));
        closes.join().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "xy");
    }
}
