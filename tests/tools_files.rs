//! File tools, registry/config and result formatting: spec conformance and hostile inputs.

mod tools_support;

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::time::{Duration, Instant, SystemTime};

use agentao::config::ToolsConfig;
use agentao::tools::{ToolRegistry, ToolServices, BUILTIN_TOOL_NAMES};
use serde_json::json;
use tools_support::{parse_settings, settings, Env};

// ---------------------------------------------------------------- read_file

#[test]
fn read_file_layout_window_and_errors() {
    let env = Env::new();
    env.write("notes.txt", "Project notes\nline 2\nline 3\n");
    assert_eq!(
        env.call("read_file", json!({"file_path": "notes.txt"})),
        "File: notes.txt (3 lines)\nShowing lines 1-3\n     1\tProject notes\n     2\tline 2\n     3\tline 3"
    );
    assert_eq!(
        env.call(
            "read_file",
            json!({"file_path": "notes.txt", "offset": 2, "limit": 1})
        ),
        "File: notes.txt (3 lines)\nShowing lines 2-2\n     2\tline 2"
    );
    // Past the end: the reference's own (odd) range.
    assert_eq!(
        env.call("read_file", json!({"file_path": "notes.txt", "offset": 10})),
        "File: notes.txt (3 lines)\nShowing lines 10-3\n"
    );
    assert_eq!(
        env.call("read_file", json!({"file_path": "nope.txt"})),
        "Error: File nope.txt does not exist"
    );
    std::fs::create_dir(env.path("d")).unwrap();
    assert_eq!(
        env.call("read_file", json!({"file_path": "d"})),
        "Error: File d does not exist"
    );
    let err = env.try_call("read_file", json!({})).unwrap_err();
    assert_eq!(
        err.message,
        "read_file() missing 1 required positional argument: 'file_path'"
    );
}

#[test]
fn read_file_caps_lines_and_line_length() {
    let env = Env::new();
    let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    env.write("big.txt", &text);
    let out = env.call("read_file", json!({"file_path": "big.txt"}));
    assert!(out.starts_with("File: big.txt (2500 lines)\nShowing lines 1-2000\n"));
    assert!(out.ends_with(
        "\n\n[Truncated: showing lines 1–2000 of 2500 total. Use offset=2001 to continue reading.]"
    ));
    // An explicit limit is not capped at 2000 and adds no note.
    let out = env.call("read_file", json!({"file_path": "big.txt", "limit": 2400}));
    assert!(out.contains("Showing lines 1-2400\n") && !out.contains("[Truncated"));

    let long = "x".repeat(1_000_000);
    env.write("long.txt", format!("short\n{long}\n"));
    let out = env.call("read_file", json!({"file_path": "long.txt"}));
    assert!(out.contains(&format!("     2\t{}[+998000 chars]", "x".repeat(2000))));
    assert!(out.ends_with("\n[1 line(s) truncated to 2000 chars per line]"));
}

#[test]
fn read_file_hostile_contents() {
    let env = Env::new();
    env.write("empty.txt", "");
    assert_eq!(
        env.call("read_file", json!({"file_path": "empty.txt"})),
        "File: empty.txt (0 lines)\nShowing lines 1-0\n"
    );

    env.write("nul.bin", b"abc\0def");
    assert_eq!(
        env.call("read_file", json!({"file_path": "nul.bin"})),
        "Binary file: nul.bin (7 bytes)"
    );

    // Invalid UTF-8 beyond the sniff window is still binary.
    let mut late = vec![b'a'; 10_000];
    late.push(b'\n');
    late.extend_from_slice(&[0xff, 0xfe, b'\n']);
    env.write("late.txt", &late);
    assert_eq!(
        env.call("read_file", json!({"file_path": "late.txt"})),
        "Binary file: late.txt (10004 bytes)"
    );

    // CRLF and lone CR end lines the way Python's text mode does.
    env.write("crlf.txt", "a\r\nb\r\nc\rd");
    assert_eq!(
        env.call("read_file", json!({"file_path": "crlf.txt"})),
        "File: crlf.txt (4 lines)\nShowing lines 1-4\n     1\ta\n     2\tb\n     3\tc\n     4\td"
    );

    // 100 MB sparse file of zeros: detected from the first 8 KiB, never read whole.
    let big = env.path("sparse.bin");
    File::create(&big)
        .unwrap()
        .set_len(100 * 1024 * 1024)
        .unwrap();
    let t = Instant::now();
    assert_eq!(
        env.call("read_file", json!({"file_path": "sparse.bin"})),
        "Binary file: sparse.bin (104857600 bytes)"
    );
    assert!(t.elapsed() < Duration::from_secs(2));

    // A NUL byte in the path finds nothing (as Python's is_file() does).
    assert_eq!(
        env.call("read_file", json!({"file_path": "a\u{0}b"})),
        "Error: File a\u{0}b does not exist"
    );

    // A symlink loop is not a file.
    symlink(env.path("loop2"), env.path("loop1")).unwrap();
    symlink(env.path("loop1"), env.path("loop2")).unwrap();
    assert_eq!(
        env.call("read_file", json!({"file_path": "loop1"})),
        "Error: File loop1 does not exist"
    );
}

#[test]
fn read_file_100mb_text_is_streamed() {
    let env = Env::new();
    let path = env.path("huge.txt");
    let mut f = std::io::BufWriter::new(File::create(&path).unwrap());
    let line = format!("{}\n", "y".repeat(1023));
    for _ in 0..(100 * 1024) {
        f.write_all(line.as_bytes()).unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let t = Instant::now();
    let out = env.call(
        "read_file",
        json!({"file_path": "huge.txt", "offset": 102_400, "limit": 5}),
    );
    assert!(
        out.starts_with("File: huge.txt (102400 lines)\nShowing lines 102400-102400\n102400\ty"),
        "{}",
        &out[..80]
    );
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
}

#[test]
fn reads_outside_workspace_are_refused_unless_allowed() {
    let env = Env::new();
    let outside = tempfile::tempdir().unwrap();
    let outside = std::fs::canonicalize(outside.path()).unwrap();
    std::fs::write(outside.join("secret.txt"), "s\n").unwrap();
    let raw = outside.join("secret.txt").display().to_string();
    assert_eq!(
        env.call("read_file", json!({"file_path": raw})),
        format!(
            "Error: PathPolicy: refused '{raw}' — resolves to '{raw}', outside project_root '{}'",
            env.root.display()
        )
    );
    symlink(&outside, env.path("link")).unwrap();
    assert!(env
        .call("read_file", json!({"file_path": "link/secret.txt"}))
        .starts_with("Error: PathPolicy: refused"));
    assert!(env
        .call("list_directory", json!({"directory_path": ".."}))
        .starts_with("Error: PathPolicy: refused"));

    let open = Env::with_config(ToolsConfig {
        allow_reads_outside_workspace: true,
        ..ToolsConfig::default()
    });
    assert_eq!(
        open.call("read_file", json!({"file_path": raw})),
        format!("File: {raw} (1 lines)\nShowing lines 1-1\n     1\ts")
    );
}

// ---------------------------------------------------------------- write_file

#[test]
fn write_file_creates_overwrites_appends() {
    let env = Env::new();
    assert_eq!(
        env.call(
            "write_file",
            json!({"file_path": "a/b/c.txt", "content": "x\r\ny\n"})
        ),
        "Successfully wrote to a/b/c.txt"
    );
    assert_eq!(std::fs::read(env.path("a/b/c.txt")).unwrap(), b"x\r\ny\n");
    std::fs::set_permissions(
        env.path("a/b/c.txt"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert_eq!(
        env.call(
            "write_file",
            json!({"file_path": "a/b/c.txt", "content": "new"})
        ),
        "Successfully wrote to a/b/c.txt"
    );
    let meta = std::fs::metadata(env.path("a/b/c.txt")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);
    assert_eq!(
        env.call(
            "write_file",
            json!({"file_path": "a/b/c.txt", "content": "+", "append": true})
        ),
        "Successfully appended to a/b/c.txt"
    );
    assert_eq!(
        std::fs::read_to_string(env.path("a/b/c.txt")).unwrap(),
        "new+"
    );
    // No temp files left behind.
    assert_eq!(std::fs::read_dir(env.path("a/b")).unwrap().count(), 1);
    assert_eq!(
        env.call("write_file", json!({"file_path": "empty", "content": ""})),
        "Successfully wrote to empty"
    );
    assert_eq!(std::fs::metadata(env.path("empty")).unwrap().len(), 0);
}

#[test]
fn write_file_containment() {
    let env = Env::new();
    let root = env.root.display().to_string();
    let parent = env.root.parent().unwrap().display().to_string();
    assert_eq!(
        env.call("write_file", json!({"file_path": "../x.txt", "content": "no"})),
        format!("Error: PathPolicy: refused '../x.txt' — resolves to '{parent}/x.txt', outside project_root '{root}'")
    );
    assert!(!tools_support::exists(
        &env.root.parent().unwrap().join("x.txt")
    ));
    assert_eq!(
        env.call("write_file", json!({"file_path": "/etc/agentao-test", "content": "no"})),
        format!("Error: PathPolicy: refused '/etc/agentao-test' — resolves to '/etc/agentao-test', outside project_root '{root}'")
    );
    let outside = tempfile::tempdir().unwrap();
    let outside = std::fs::canonicalize(outside.path()).unwrap();
    symlink(&outside, env.path("out")).unwrap();
    let r = env.call("write_file", json!({"file_path": "out/f", "content": "no"}));
    assert!(
        r.starts_with("Error: PathPolicy: refused 'out/f' — resolves to '"),
        "{r}"
    );
    assert!(!outside.join("f").exists());
    std::fs::write(outside.join("target"), "keep").unwrap();
    symlink(outside.join("target"), env.path("leaf")).unwrap();
    assert!(env
        .call("write_file", json!({"file_path": "leaf", "content": "no"}))
        .starts_with("Error: PathPolicy: refused 'leaf'"));
    assert_eq!(
        std::fs::read_to_string(outside.join("target")).unwrap(),
        "keep"
    );
    // `sub/../..` climbs out even when `sub` exists.
    std::fs::create_dir(env.path("sub")).unwrap();
    assert!(env
        .call(
            "write_file",
            json!({"file_path": "sub/../../y", "content": "no"})
        )
        .starts_with("Error: PathPolicy: refused"));
    let err = env
        .try_call(
            "write_file",
            json!({"file_path": "a\u{0}b", "content": "no"}),
        )
        .unwrap_err();
    assert_eq!(
        (err.kind.as_str(), err.message.as_str()),
        ("ValueError", "embedded null byte")
    );
    // A symlink loop inside the workspace is contained but cannot be written.
    symlink(env.path("l2"), env.path("l1")).unwrap();
    symlink(env.path("l1"), env.path("l2")).unwrap();
    let r = env.call("write_file", json!({"file_path": "l1", "content": "x"}));
    assert!(r.starts_with("Error"), "{r}");
}

// ---------------------------------------------------------------- replace

#[test]
fn replace_tiers_and_messages() {
    let env = Env::new();
    env.write("f.txt", "one two one two\n");
    assert_eq!(
        env.call("replace", json!({"file_path": "f.txt", "old_text": "one", "new_text": "1"})),
        "Replaced the first of 2 occurrences in f.txt. 1 occurrence(s) of old_text remain — if you meant a different \
         one, include more surrounding context to make it unique, or pass replace_all=true to change all."
    );
    assert_eq!(
        std::fs::read_to_string(env.path("f.txt")).unwrap(),
        "1 two one two\n"
    );
    assert_eq!(
        env.call(
            "replace",
            json!({"file_path": "f.txt", "old_text": "two", "new_text": "2", "replace_all": true})
        ),
        "Replaced 2 occurrence(s) in f.txt"
    );
    assert_eq!(
        std::fs::read_to_string(env.path("f.txt")).unwrap(),
        "1 2 one 2\n"
    );
    assert_eq!(
        env.call(
            "replace",
            json!({"file_path": "f.txt", "old_text": "zzz", "new_text": "y"})
        ),
        "Error: Old text not found in f.txt"
    );
    assert_eq!(
        env.call("replace", json!({"file_path": "f.txt", "old_text": "", "new_text": "y"})),
        "Error: old_text is empty. Provide the exact text to replace; to create or overwrite a file use write_file instead."
    );
    let missing = env.path("missing.txt").display().to_string();
    assert_eq!(
        env.call(
            "replace",
            json!({"file_path": "missing.txt", "old_text": "a", "new_text": "b"})
        ),
        format!("Error editing file: [Errno 2] No such file or directory: '{missing}'")
    );
    env.write("bin.txt", [0xffu8, b'a']);
    assert_eq!(
        env.call("replace", json!({"file_path": "bin.txt", "old_text": "a", "new_text": "b"})),
        "Error editing file: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    );
    env.write("crlf.txt", "a\r\nb\r\n");
    assert_eq!(
        env.call(
            "replace",
            json!({"file_path": "crlf.txt", "old_text": "a\nb", "new_text": "x\ny"})
        ),
        "Replaced 1 occurrence(s) in crlf.txt"
    );
    assert_eq!(std::fs::read(env.path("crlf.txt")).unwrap(), b"x\r\ny\r\n");
    assert!(env
        .call(
            "replace",
            json!({"file_path": "../f.txt", "old_text": "a", "new_text": "b"})
        )
        .starts_with("Error: PathPolicy: refused '../f.txt'"));
}

// ---------------------------------------------------------------- list_directory

#[test]
fn list_directory_layout() {
    let env = Env::new();
    env.write("B.txt", "abc");
    env.write("c.txt", "");
    env.write("a/inner.txt", "12");
    std::fs::create_dir(env.path("Sub")).unwrap();
    assert_eq!(
        env.call("list_directory", json!({})),
        "Directory: .\n\n[DIR]  a/\n[DIR]  Sub/\n[FILE] B.txt (3 bytes)\n[FILE] c.txt (0 bytes)"
    );
    assert_eq!(
        env.call("list_directory", json!({"directory_path": ".", "recursive": true})),
        "Directory: .\n\n[DIR]  a/\n[DIR]  Sub/\n[FILE] a/inner.txt (2 bytes)\n[FILE] B.txt (3 bytes)\n[FILE] c.txt (0 bytes)"
    );
    assert_eq!(
        env.call("list_directory", json!({"directory_path": "nope"})),
        "Error: Directory nope does not exist"
    );
    assert_eq!(
        env.call("list_directory", json!({"directory_path": "c.txt"})),
        "Error: c.txt is not a directory"
    );
    // A symlink loop neither hangs nor breaks the listing.
    symlink(env.path("a"), env.path("a/back")).unwrap();
    symlink(env.path("x2"), env.path("x1")).unwrap();
    symlink(env.path("x1"), env.path("x2")).unwrap();
    let out = env.call("list_directory", json!({"recursive": true}));
    assert!(
        out.contains("[DIR]  a/back/") && out.contains("[FILE] x1 (0 bytes)"),
        "{out}"
    );
}

// ---------------------------------------------------------------- glob

#[test]
fn glob_matching_and_order() {
    let env = Env::new();
    for f in [
        "a.py",
        "b.py",
        "src/x.rs",
        "src/deep/y.rs",
        "node_modules/m.py",
        ".git/h.py",
        "note.txt",
    ] {
        env.write(f, "");
    }
    let old = SystemTime::now() - Duration::from_secs(3 * 86_400);
    for f in [
        "a.py",
        "b.py",
        "src/x.rs",
        "src/deep/y.rs",
        "node_modules/m.py",
        ".git/h.py",
    ] {
        File::options()
            .write(true)
            .open(env.path(f))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    assert_eq!(
        env.call("glob", json!({"pattern": "*.py"})),
        "Found 2 file(s):\n\na.py\nb.py"
    );
    assert_eq!(
        env.call("glob", json!({"pattern": "**/*.py"})),
        "Found 4 file(s):\n\n.git/h.py\na.py\nb.py\nnode_modules/m.py"
    );
    assert_eq!(
        env.call("glob", json!({"pattern": "src/**/*.rs"})),
        "Found 2 file(s):\n\nsrc/deep/y.rs\nsrc/x.rs"
    );
    assert_eq!(
        env.call("glob", json!({"pattern": "*.rs", "directory": "src"})),
        "Found 1 file(s):\n\nx.rs"
    );
    // Recently modified files first, newest first.
    env.write("fresh.py", "");
    let out = env.call("glob", json!({"pattern": "**/*"}));
    assert!(out.starts_with("Found 8 file(s):\n\n"), "{out}");
    let lines: Vec<&str> = out.lines().skip(2).collect();
    assert_eq!(&lines[..2], &["fresh.py", "note.txt"]);
    assert_eq!(
        env.call("glob", json!({"pattern": "*.java"})),
        "No files found matching pattern: *.java"
    );
    assert_eq!(
        env.call("glob", json!({"pattern": "*", "directory": "gone"})),
        "Error: Directory gone does not exist"
    );
    assert_eq!(
        env.call("glob", json!({"pattern": "/etc/*"})),
        "Error finding files: Non-relative patterns are unsupported"
    );
}

// ---------------------------------------------------------------- 100,000 entries

#[test]
fn hundred_thousand_entries() {
    let env = Env::on_tmpfs();
    let dir = env.path("many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..100_000 {
        File::create(dir.join(format!("f{i:06}.txt"))).unwrap();
    }
    std::fs::write(dir.join("f050000.txt"), "needle here\n").unwrap();

    let t = Instant::now();
    let out = env.call("list_directory", json!({"directory_path": "many"}));
    assert!(out.starts_with("Directory: many\n\n[FILE] f000000.txt (0 bytes)\n"));
    assert_eq!(out.lines().count(), 100_002);
    let t_list = t.elapsed();

    let t = Instant::now();
    let out = env.call("glob", json!({"pattern": "many/f09999*.txt"}));
    assert!(out.starts_with("Found 10 file(s):"), "{}", &out[..60]);
    let t_glob = t.elapsed();

    let t = Instant::now();
    let out = env.call("search_file_content", json!({"pattern": "needle"}));
    assert_eq!(out, "Found 1 match(es):\n\nmany/f050000.txt:1:needle here");
    let t_search = t.elapsed();
    assert!(
        t_list < Duration::from_secs(5)
            && t_glob < Duration::from_secs(5)
            && t_search < Duration::from_secs(10),
        "list {t_list:?} glob {t_glob:?} search {t_search:?}"
    );
}

// ---------------------------------------------------------------- ask_user, todo_write

#[test]
fn ask_user_passes_every_hint() {
    let env = Env::new();
    assert_eq!(
        env.call(
            "ask_user",
            json!({"question": "Which?", "options": ["a", "b"]})
        ),
        "yes"
    );
    let asked = env.host.asked.lock().unwrap().clone();
    assert_eq!(asked[0].0, "Which?");
    assert_eq!(
        asked[0].1,
        json!({"header": null, "options": ["a", "b"], "multiple": false, "allow_custom": true})
    );
    let mut failing = Env::new();
    failing.host.answer = Some(Err("host went away".to_owned()));
    let err = failing
        .try_call(
            "ask_user",
            json!({"question": "q", "header": "H", "multiple": true, "allow_custom": false}),
        )
        .unwrap_err();
    assert_eq!(err.message, "host went away");
    assert_eq!(
        failing.host.asked.lock().unwrap()[0].1,
        json!({"header": "H", "options": null, "multiple": true, "allow_custom": false})
    );
}

#[test]
fn todo_write_replaces_the_list() {
    let env = Env::new();
    let out = env.call(
        "todo_write",
        json!({"todos": [
            {"content": "a", "status": "completed"},
            {"content": "b", "status": "in_progress"},
            {"content": "c", "status": "pending"},
            {"content": "d", "status": "pending"}]}),
    );
    assert_eq!(
        out,
        "Todo list updated: 4 task(s) (1 completed, 1 in progress, 2 pending)"
    );
    assert_eq!(env.services.todos().len(), 4);
    assert_eq!(
        env.call("todo_write", json!({"todos": []})),
        "Todo list updated: 0 task(s) (0 completed, 0 in progress, 0 pending)"
    );
    assert!(env.services.todos().is_empty());
    let err = env
        .try_call("todo_write", json!({"todos": [{"status": "pending"}]}))
        .unwrap_err();
    assert_eq!(
        (err.kind.as_str(), err.message.as_str()),
        ("KeyError", "'content'")
    );
}

// ---------------------------------------------------------------- registry and config

#[test]
fn registry_catalogue_and_flags() {
    let reg = ToolRegistry::builtin(&ToolsConfig::default()).unwrap();
    let names: Vec<&str> = reg.names().collect();
    assert_eq!(names, BUILTIN_TOOL_NAMES);
    let flags: Vec<(String, bool, bool)> = names
        .iter()
        .map(|n| {
            let t = reg.get(n).unwrap();
            (n.to_string(), t.is_read_only(), t.requires_confirmation())
        })
        .collect();
    let expect = [
        ("ask_user", true, false),
        ("glob", true, false),
        ("list_directory", true, false),
        ("read_file", true, false),
        ("replace", false, true),
        ("run_shell_command", false, true),
        ("save_memory", false, false),
        ("search_file_content", true, false),
        ("todo_write", true, false),
        ("web_fetch", true, true),
        ("write_file", false, true),
    ];
    assert_eq!(flags, expect.map(|(n, r, c)| (n.to_owned(), r, c)));
    let schemas = reg.schemas();
    for s in schemas.iter() {
        assert_eq!(s["type"], "function");
        assert_eq!(s["function"]["parameters"]["type"], "object");
    }
    let shell = reg.get("run_shell_command").unwrap();
    assert!(shell
        .description()
        .starts_with("Run a shell command as `/bin/bash -c <command>`."));

    let err = ToolRegistry::builtin(&ToolsConfig {
        disabled: vec!["rm_rf".into()],
        ..ToolsConfig::default()
    })
    .err()
    .unwrap();
    assert!(
        err.starts_with("config field `tools`: unknown tool 'rm_rf'"),
        "{err}"
    );
    let only = ToolRegistry::builtin(&ToolsConfig {
        enabled: Some(vec!["read_file".into(), "glob".into()]),
        ..ToolsConfig::default()
    })
    .unwrap();
    assert_eq!(only.names().collect::<Vec<_>>(), ["glob", "read_file"]);
}

#[test]
fn settings_are_validated_with_field_names() {
    let root = std::env::temp_dir();
    let bad = |v| parse_settings(v).err().unwrap();
    assert_eq!(
        bad(json!({"bogus": 1})),
        "config field `tools.settings.bogus`: unknown setting (known: shell, tool_outputs_dir, web_fetch)"
    );
    assert_eq!(
        bad(json!({"shell": {"timeout_s": -1}})),
        "config field `tools.settings.shell.timeout_s`: must be a positive number of seconds"
    );
    assert_eq!(
        bad(json!({"web_fetch": {"allow_private": ["127.0.0.1", "nope"]}})),
        "config field `tools.settings.web_fetch.allow_private`: 'nope' is not an IP address or CIDR"
    );
    assert!(bad(json!({"web_fetch": {"x": 1}}))
        .starts_with("config field `tools.settings.web_fetch.x`: unknown setting"));
    assert!(bad(json!({"tool_outputs_dir": 3}))
        .starts_with("config field `tools.settings.tool_outputs_dir`"));
    let ok = ToolServices::new(
        &settings(
            json!({"shell": {"timeout_s": 5, "scrub_env": false}, "web_fetch": {"allow_private": "10.0.0.0/8 127.0.0.1"}, "tool_outputs_dir": "out"}),
        ),
        &root,
    );
    assert_eq!(ok.shell_settings.timeout_s, 5.0);
    assert_eq!(ok.web.allow.len(), 2);
    assert_eq!(ok.tool_outputs.path(), root.join("out"));
}

#[test]
fn spill_to_configured_dir_and_prune() {
    let env = Env::with_config(settings(json!({"tool_outputs_dir": "spill"})));
    let dir = env.path("spill");
    std::fs::create_dir_all(&dir).unwrap();
    let stale = dir.join("old_1_abcdef.txt");
    std::fs::write(&stale, "old").unwrap();
    File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(8 * 86_400))
        .unwrap();
    let raw = format!(
        "{} ghp_{}{}",
        "h".repeat(9_000),
        "A".repeat(40),
        " t".repeat(20_000)
    );
    let r = env.services.format_result("list_directory", &raw);
    assert!(r.saved_to_disk);
    let path = r.disk_path.unwrap();
    assert!(path.starts_with(&dir));
    assert!(!stale.exists(), "stale spill pruned");
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.contains("[REDACTED:github_token]") && !saved.contains("ghp_AAAA"));
    // The model's excerpt is verbatim (not redacted) and bounded.
    assert!(
        r.model_text.contains("[… 9,045 chars omitted …]"),
        "{}",
        &r.model_text[..300]
    );
    assert_eq!(r.original_chars, 49_045);
    let small = env.services.format_result("read_file", "tiny");
    assert!(!small.saved_to_disk && &*small.model_text == "tiny");
}

#[test]
fn replace_and_append_on_a_fifo_fail_instead_of_blocking() {
    // A checkout's FIFO named like a file: opening it waits for a peer that never comes, so
    // the call (and a turn without a cancel) never ended.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let env = Env::new();
        nix::unistd::mkfifo(&env.path("CHANGELOG.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let replaced = env.call(
            "replace",
            json!({"file_path": "CHANGELOG.md", "old_text": "a", "new_text": "b"}),
        );
        let appended = env.call(
            "write_file",
            json!({"file_path": "CHANGELOG.md", "content": "x", "append": true}),
        );
        let _ = tx.send((replaced, appended));
    });
    let (replaced, appended) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a file tool blocked on a FIFO");
    assert!(replaced.contains("not a regular file"), "{replaced}");
    assert!(appended.contains("not a regular file"), "{appended}");
}

#[test]
fn save_memory_refuses_more_tags_than_a_memory_needs() {
    // Tags are matched against every later user message: 30,000 of them (a hostile model's
    // save) made every turn of every later session scan them all.
    let env = Env::new();
    let many: Vec<String> = (0..30_000).map(|i| format!("tag{i}")).collect();
    let out = env.call(
        "save_memory",
        json!({"key": "k", "value": "v", "tags": many}),
    );
    assert!(out.contains("at most 32 tags"), "{out}");
    let long = "t".repeat(65);
    let out = env.call(
        "save_memory",
        json!({"key": "k", "value": "v", "tags": [long]}),
    );
    assert!(out.contains("at most 64 characters"), "{out}");
    let out = env.call(
        "save_memory",
        json!({"key": "k", "value": "v", "tags": ["a", "b"]}),
    );
    assert_eq!(out, "Saved memory: k");
}
