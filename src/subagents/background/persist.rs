//! Opt-in persistence of the store (`subagents.background.persist`): the reference's
//! `<workspace>/.agentao/background_tasks.json`, `{"version": 1, "tasks": {id: record}}`,
//! unredacted (results are model text; see docs/security.md).
//!
//! Several stores may share one file (two agents on one workspace): each flush is a
//! read-merge-write under a process-wide lock per path that only replaces this store's own
//! records. Only the first store of a process to open a file takes over the earlier process's
//! records; in-flight ones then become failed, since nothing runs them any more.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::{json, Map, Value};

use super::record::{now, TaskRecord, TaskStatus};

const VERSION: u64 = 1;

/// A file larger than this is not read (a hostile workspace cannot make the agent load it).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

const ORPHAN_ERROR: &str = "process exited before task finished";

static PATH_LOCKS: LazyLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> =
    LazyLock::new(Default::default);
static RECOVERED: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(Default::default);

pub(crate) struct Persistence {
    dir: PathBuf,
    path: PathBuf,
    lock: Arc<Mutex<()>>,
}

/// Records to write, and ids to remove.
type Snapshot = (Vec<(String, TaskRecord)>, Vec<String>);

/// What the file holds.
enum OnDisk {
    /// Its tasks (none when there is no file, or nothing in it can be read back).
    Tasks(Map<String, Value>),
    /// A file too large to read, unreadable, not a regular file, or of another version: it is
    /// never replaced (the store then runs without persistence).
    Unusable,
}

impl OnDisk {
    fn tasks(self) -> Map<String, Value> {
        match self {
            OnDisk::Tasks(tasks) => tasks,
            OnDisk::Unusable => Map::new(),
        }
    }
}

impl Persistence {
    pub(crate) fn new(workspace: &Path) -> Self {
        let dir = workspace.join(".agentao");
        let path = dir.join("background_tasks.json");
        let lock = PATH_LOCKS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(path.clone())
            .or_default()
            .clone();
        Persistence { dir, path, lock }
    }

    /// The earlier process's records, once per file per process (in-flight ones failed).
    pub(crate) fn recover(&self) -> Vec<(String, TaskRecord)> {
        if !RECOVERED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.path.clone())
        {
            return Vec::new();
        }
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for (id, v) in self.load().tasks() {
            let Ok(mut rec) = serde_json::from_value::<TaskRecord>(v) else {
                continue;
            };
            if rec.status.in_flight() {
                rec.status = TaskStatus::Failed;
                rec.error = Some(ORPHAN_ERROR.to_owned());
                rec.finished_at.get_or_insert_with(now);
            }
            out.push((id, rec));
        }
        out.sort_by(|a, b| a.1.created_at.total_cmp(&b.1.created_at));
        out
    }

    /// What the file holds.
    fn load(&self) -> OnDisk {
        let Ok(meta) = std::fs::metadata(&self.path) else {
            return OnDisk::Tasks(Map::new());
        };
        if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
            return OnDisk::Unusable;
        }
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return OnDisk::Unusable;
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(mut doc)) if doc.get("version") == Some(&json!(VERSION)) => {
                match doc.remove("tasks") {
                    Some(Value::Object(tasks)) => OnDisk::Tasks(tasks),
                    _ => OnDisk::Tasks(Map::new()),
                }
            }
            // Another version's records are not ours to drop.
            Ok(Value::Object(doc)) if doc.contains_key("version") => OnDisk::Unusable,
            // Not JSON, or not a document of ours: nothing in it can be read back.
            _ => OnDisk::Tasks(Map::new()),
        }
    }

    /// Merges this store's records into the file. `snapshot` is taken under the path lock, so
    /// two flushes never write in the opposite order of their snapshots. Failures are
    /// ignored: persistence must never fail a run.
    pub(crate) fn flush(&self, snapshot: impl FnOnce() -> Snapshot) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let (tasks, dropped) = snapshot();
        // Merging into a file that could not be read would replace the records it holds.
        let OnDisk::Tasks(mut on_disk) = self.load() else {
            return;
        };
        for id in dropped {
            on_disk.remove(&id);
        }
        for (id, rec) in tasks {
            if let Ok(v) = serde_json::to_value(&rec) {
                on_disk.insert(id, v);
            }
        }
        let doc = json!({"version": VERSION, "tasks": on_disk});
        let _ = self.write(&doc);
    }

    /// Atomic replace of the file, owner-only permissions. `.agentao` must be a real directory:
    /// a symlink planted by the repository would redirect the write elsewhere.
    fn write(&self, doc: &Value) -> std::io::Result<()> {
        match std::fs::symlink_metadata(&self.dir) {
            Ok(m) if !m.is_dir() => return Err(std::io::ErrorKind::InvalidInput.into()),
            Ok(_) => {}
            Err(_) => std::fs::create_dir_all(&self.dir)?,
        }
        let mut text = serde_json::to_string_pretty(doc).map_err(std::io::Error::other)?;
        text.push('\n');
        let tmp = self.dir.join(format!(
            ".background_tasks.{}.{}.tmp",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let result = opts
            .open(&tmp)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }
}
