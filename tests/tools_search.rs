//! search_file_content semantics, and the FileSystem seam with an in-memory implementation.

mod tools_support;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentao::tools::{FileEntry, FileStat, FileSystem, WalkEntry};
use serde_json::json;
use tools_support::Env;

fn search(env: &Env, args: serde_json::Value) -> String {
    env.call("search_file_content", args)
}

#[test]
fn literal_regex_case_and_format() {
    let env = Env::new();
    env.write("a.py", "foo = 1\nbar = 2\n");
    env.write("sub/b.py", "x\r\ny\r\n  foo()\r\n");
    env.write("c.txt", "a.b\naxb\nFOO\n");
    assert_eq!(
        search(&env, json!({"pattern": "foo"})),
        "Found 2 match(es):\n\na.py:1:foo = 1\nsub/b.py:3:  foo()"
    );
    assert_eq!(
        search(&env, json!({"pattern": "foo", "case_sensitive": false})),
        "Found 3 match(es):\n\na.py:1:foo = 1\nc.txt:3:FOO\nsub/b.py:3:  foo()"
    );
    // Literal by default: the dot is not a wildcard.
    assert_eq!(
        search(&env, json!({"pattern": "a.b"})),
        "Found 1 match(es):\n\nc.txt:1:a.b"
    );
    assert_eq!(
        search(&env, json!({"pattern": "a.b", "regex": true})),
        "Found 2 match(es):\n\nc.txt:1:a.b\nc.txt:2:axb"
    );
    assert_eq!(
        search(&env, json!({"pattern": "fo+\\(", "regex": true})),
        "Found 1 match(es):\n\nsub/b.py:3:  foo()"
    );
    assert!(search(&env, json!({"pattern": "(", "regex": true}))
        .starts_with("Error: Invalid regex pattern: "));
    assert_eq!(
        search(&env, json!({"pattern": "zzz"})),
        "No matches found for pattern: zzz"
    );
    assert_eq!(
        search(&env, json!({"pattern": "x", "directory": "nope"})),
        "Error: Directory nope does not exist"
    );
    // file_pattern: a bare glob matches names at any depth; one with a slash is anchored.
    assert_eq!(
        search(&env, json!({"pattern": "foo", "file_pattern": "*.py"})),
        "Found 2 match(es):\n\na.py:1:foo = 1\nsub/b.py:3:  foo()"
    );
    assert_eq!(
        search(&env, json!({"pattern": "foo", "file_pattern": "sub/*.py"})),
        "Found 1 match(es):\n\nsub/b.py:3:  foo()"
    );
    assert_eq!(
        search(&env, json!({"pattern": "foo", "directory": "sub"})),
        "Found 1 match(es):\n\nb.py:3:  foo()"
    );
}

#[test]
fn match_cap_binary_and_invalid_utf8() {
    let env = Env::new();
    let text: String = (0..250).map(|i| format!("hit {i}\n")).collect();
    env.write("many.txt", &text);
    let out = search(&env, json!({"pattern": "hit"}));
    assert!(out.starts_with("Found 250 match(es):\n\nmany.txt:1:hit 0\n"));
    assert!(
        out.ends_with("many.txt:100:hit 99\n\n... and 150 more matches"),
        "{}",
        &out[out.len() - 80..]
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("many.txt:")).count(),
        100
    );

    let env = Env::new();
    env.write("bin.dat", b"hit\0hit\n");
    env.write("latin1.txt", b"caf\xe9 hit\n");
    assert_eq!(
        search(&env, json!({"pattern": "hit"})),
        "Found 1 match(es):\n\nlatin1.txt:1:caf\u{fffd} hit"
    );
}

/// The process's peak resident size, in KiB, after resetting it to the current size.
fn reset_peak_rss() -> Option<u64> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    peak_rss()
}

fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_file_of_one_enormous_line_is_skipped_not_held_in_memory() {
    // A repository file of one 96 MiB line: searching it held the whole line (the searcher's
    // buffer grows to the line), so a big enough file exhausted the host.
    let env = Env::new();
    env.write("a.txt", "needle here\n");
    let mut line = vec![b'x'; 96 << 20];
    line[1000..1006].copy_from_slice(b"needle");
    env.write("huge.min.js", &line);
    drop(line);
    env.write("z.txt", "and a needle\n");
    let Some(before) = reset_peak_rss() else {
        eprintln!("SKIPPED: no /proc/self/clear_refs here; the search's memory is not measured");
        return;
    };
    let out = search(&env, json!({"pattern": "needle"}));
    let grew_mib = (peak_rss().unwrap() - before) / 1024;
    println!("FIGURE tools/search-enormous-line: peak RSS grew {grew_mib} MiB for a 96 MiB line");
    assert!(
        out == "Found 2 match(es):\n\na.txt:1:needle here\nz.txt:1:and a needle",
        "{} bytes: {}…",
        out.len(),
        &out[..out.len().min(200)]
    );
    assert!(grew_mib < 48, "the search held {grew_mib} MiB");
}

#[test]
fn skip_dirs_and_gitignore() {
    let env = Env::new();
    std::fs::create_dir(env.path(".git")).unwrap();
    env.write(".git/config", "needle\n");
    env.write(".gitignore", "*.log\ndata/\n");
    env.write("src/main.rs", "needle\n");
    env.write("node_modules/lib/x.js", "needle\n");
    env.write("build/out.txt", "needle\n");
    env.write("debug.log", "needle\n");
    env.write("data/set.csv", "needle\n");
    env.write(".hidden/h.txt", "needle\n");
    assert_eq!(
        search(&env, json!({"pattern": "needle"})),
        "Found 2 match(es):\n\n.hidden/h.txt:1:needle\nsrc/main.rs:1:needle"
    );
    // Naming a skipped directory opts back in.
    assert_eq!(
        search(
            &env,
            json!({"pattern": "needle", "directory": "node_modules"})
        ),
        "Found 1 match(es):\n\nlib/x.js:1:needle"
    );
    assert_eq!(
        search(
            &env,
            json!({"pattern": "needle", "file_pattern": "node_modules/**/*.js"})
        ),
        "Found 1 match(es):\n\nnode_modules/lib/x.js:1:needle"
    );
    // An ignored file stays ignored even when file_pattern names it.
    assert_eq!(
        search(&env, json!({"pattern": "needle", "file_pattern": "*.log"})),
        "No matches found for pattern: needle"
    );
    // An ignored directory named as `directory` is searched.
    assert_eq!(
        search(&env, json!({"pattern": "needle", "directory": "data"})),
        "Found 1 match(es):\n\nset.csv:1:needle"
    );
}

/// An in-memory file system: the tools must work through the seam alone.
#[derive(Default)]
struct MemFs {
    files: Mutex<BTreeMap<PathBuf, Vec<u8>>>,
}

impl MemFs {
    fn is_dir_path(&self, p: &Path) -> bool {
        self.files
            .lock()
            .unwrap()
            .keys()
            .any(|f| f.starts_with(p) && f != p)
    }
}

fn not_found() -> io::Error {
    io::Error::from_raw_os_error(2)
}

impl FileSystem for MemFs {
    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.files
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .ok_or_else(not_found)
    }
    fn read_partial(&self, path: &Path, n: usize) -> io::Result<Vec<u8>> {
        let mut b = self.read_bytes(path)?;
        b.truncate(n);
        Ok(b)
    }
    fn write_bytes(&self, path: &Path, data: &[u8], append: bool) -> io::Result<()> {
        let mut files = self.files.lock().unwrap();
        let entry = files.entry(path.to_path_buf()).or_default();
        if !append {
            entry.clear();
        }
        entry.extend_from_slice(data);
        Ok(())
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<FileEntry>> {
        let files = self.files.lock().unwrap();
        let mut names = BTreeMap::new();
        for (f, data) in files.iter() {
            if let Ok(rest) = f.strip_prefix(path) {
                let mut comps = rest.components();
                let first = comps
                    .next()
                    .unwrap()
                    .as_os_str()
                    .to_string_lossy()
                    .into_owned();
                let is_dir = comps.next().is_some();
                names.entry(first.clone()).or_insert(FileEntry {
                    name: first,
                    is_dir,
                    is_file: !is_dir,
                    size: if is_dir { 0 } else { data.len() as u64 },
                });
            }
        }
        Ok(names.into_values().collect())
    }
    fn walk(
        &self,
        base: &Path,
        _max_depth: Option<usize>,
        _stop: &dyn Fn() -> bool,
    ) -> io::Result<Vec<WalkEntry>> {
        Ok(self
            .files
            .lock()
            .unwrap()
            .keys()
            .filter(|f| f.starts_with(base))
            .map(|f| WalkEntry {
                path: f.clone(),
                is_dir: false,
                is_file: true,
            })
            .collect())
    }
    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        if let Some(data) = self.files.lock().unwrap().get(path) {
            return Ok(FileStat {
                size: data.len() as u64,
                mtime: 0.0,
                is_dir: false,
                is_file: true,
            });
        }
        if self.is_dir_path(path) {
            return Ok(FileStat {
                size: 0,
                mtime: 0.0,
                is_dir: true,
                is_file: false,
            });
        }
        Err(not_found())
    }
}

#[test]
fn tools_work_through_an_injected_file_system() {
    let mut env = Env::new();
    let mem = Arc::new(MemFs::default());
    let root = env.root.clone();
    let services = std::mem::take(&mut env.services).with_file_system(mem.clone());
    env.services = services;
    assert_eq!(
        env.call(
            "write_file",
            json!({"file_path": "m/a.txt", "content": "hello\nneedle\n"})
        ),
        "Successfully wrote to m/a.txt"
    );
    assert!(!root.join("m").exists(), "nothing reached the real disk");
    assert_eq!(
        env.call("read_file", json!({"file_path": "m/a.txt"})),
        "File: m/a.txt (2 lines)\nShowing lines 1-2\n     1\thello\n     2\tneedle"
    );
    assert_eq!(
        env.call(
            "replace",
            json!({"file_path": "m/a.txt", "old_text": "hello", "new_text": "bye"})
        ),
        "Replaced 1 occurrence(s) in m/a.txt"
    );
    assert_eq!(
        mem.read_bytes(&root.join("m/a.txt")).unwrap(),
        b"bye\nneedle\n"
    );
    assert_eq!(
        env.call("list_directory", json!({"directory_path": "m"})),
        "Directory: m\n\n[FILE] a.txt (11 bytes)"
    );
    assert_eq!(
        env.call("glob", json!({"pattern": "**/*.txt"})),
        "Found 1 file(s):\n\nm/a.txt"
    );
    assert_eq!(
        env.call("search_file_content", json!({"pattern": "needle"})),
        "Found 1 match(es):\n\nm/a.txt:2:needle"
    );
}
