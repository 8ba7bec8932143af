//! What one client can make the server hold: a prompt's size, a session's history (in memory
//! and on disk), and which directories may be a session's workspace.

mod common;

use std::path::Path;

use common::Client;
use serde_json::{json, Value};

fn text_script(text: &str) -> Value {
    json!({"responses": [{"repeat": 1000, "text": text}]})
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The file's size once it has not changed for 300 ms.
fn settled_len(file: &Path) -> u64 {
    let mut last = u64::MAX;
    for _ in 0..50 {
        let now = std::fs::metadata(file).map_or(0, |m| m.len());
        if now == last {
            return now;
        }
        last = now;
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    last
}

/// The file's length once the history saved in it holds `prompts` user prompts. A prompt's save
/// follows its response, and on a busy machine (or a slow disk) by more than the 300 ms in
/// which [`settled_len`] sees the length stay put.
fn len_once_saved(file: &Path, prompts: usize) -> u64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let saved = std::fs::read(file).unwrap_or_default();
        let users = serde_json::from_slice::<Value>(&saved).map_or(0, |doc| {
            doc["history"]
                .as_array()
                .map_or(0, |h| h.iter().filter(|m| m["role"] == "user").count())
        });
        if users >= prompts {
            return saved.len() as u64;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the history of {prompts} prompts was not saved within 60 s ({users} saved)"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn error_of(r: &Value) -> (i64, String) {
    (
        r["error"]["code"].as_i64().unwrap_or_else(|| panic!("{r}")),
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[test]
fn huge_prompts_are_refused_naming_the_limit_and_nothing_grows() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Client::scripted(dir.path(), &text_script("ok"), &[]);
    c.initialize();
    let s = c.new_session(dir.path());
    let before = c.rss_bytes();
    let big = "p".repeat(15 * 1024 * 1024);
    let mut peak = before;
    for _ in 0..4 {
        let id = c.prompt(&s, &big);
        let r = c.until_response(id, |_, _| {});
        let (code, message) = error_of(&r);
        assert_eq!(code, -32602, "{r}");
        assert!(message.contains("--max-prompt-bytes"), "{message}");
        peak = peak.max(c.rss_bytes());
    }
    // The session still works.
    let id = c.prompt(&s, "small");
    let r = c.until_response(id, |_, _| {});
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let after = c.rss_bytes();
    let files = dir_bytes(&dir.path().join("sessions"));
    println!(
        "FIGURE acp/prompt-bound: 4 prompts of 15 MiB refused; RSS {} -> {} MiB (peak {} MiB); \
         session files {files} bytes",
        before >> 20,
        after >> 20,
        peak >> 20
    );
    assert!(files < 64 * 1024, "session files: {files} bytes");
    assert!(
        after < before + 64 * 1024 * 1024,
        "RSS grew from {before} to {after}"
    );
}

#[test]
fn a_session_history_stops_at_its_limit_in_memory_and_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    // A window no history here reaches: compaction would keep it under the byte limit.
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"max_context_tokens": 100000000}"#).unwrap();
    let mut c = Client::scripted(
        dir.path(),
        &text_script("ok"),
        &[
            "--config",
            config.to_str().unwrap(),
            "--max-prompt-bytes",
            "200000",
            "--max-history-bytes",
            "1000000",
        ],
    );
    c.initialize();
    let s = c.new_session(dir.path());
    let over = "q".repeat(200_001);
    let id = c.prompt(&s, &over);
    let (code, message) = error_of(&c.until_response(id, |_, _| {}));
    assert_eq!(code, -32602);
    assert!(message.contains("200000"), "{message}");

    let chunk = "h".repeat(150_000);
    let mut accepted = 0;
    let mut refusal = None;
    for _ in 0..20 {
        let id = c.prompt(&s, &chunk);
        let r = c.until_response(id, |_, _| {});
        if r.get("error").is_some() {
            refusal = Some(r);
            break;
        }
        accepted += 1;
    }
    let r = refusal.expect("the history limit refuses a prompt");
    let (code, message) = error_of(&r);
    assert_eq!(code, -32600, "{r}");
    assert!(
        message.contains("--max-history-bytes") && message.contains("1000000"),
        "{message}"
    );
    let file = dir.path().join("sessions").join(format!("{s}.json"));
    // The last accepted prompt's save follows its response.
    let on_disk = len_once_saved(&file, accepted);
    println!(
        "FIGURE acp/history-bound: limit 1000000 bytes: {accepted} prompts of 150,000 accepted, \
         history file {on_disk} bytes"
    );
    assert!(accepted <= 6, "{accepted} prompts accepted");
    assert!(on_disk <= 1_000_000, "{on_disk} bytes on disk");
    // Refused again, and the file does not grow.
    let id = c.prompt(&s, &chunk);
    assert_eq!(error_of(&c.until_response(id, |_, _| {})).0, -32600);
    assert_eq!(settled_len(&file), on_disk);
    // A new session is not affected.
    let s2 = c.new_session(dir.path());
    let id = c.prompt(&s2, "tiny");
    assert_eq!(
        c.until_response(id, |_, _| {})["result"]["stopReason"],
        "end_turn"
    );
    drop(c);

    // A saved history over the limit is not loaded into memory.
    let mut c = Client::scripted(
        dir.path(),
        &text_script("ok"),
        &["--max-history-bytes", "100000"],
    );
    c.initialize();
    let id = c.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir.path(), "mcpServers": []}),
    );
    let r = c.until_response(id, |_, v| panic!("replayed {v}"));
    let (_, message) = error_of(&r);
    assert!(message.contains("--max-history-bytes"), "{message}");
}

#[test]
fn flags_are_checked() {
    for flag in ["--max-prompt-bytes", "--max-history-bytes"] {
        let out = std::process::Command::new(common::bin())
            .args([flag, "0"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
    }
    let out = std::process::Command::new(common::bin())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--max-prompt-bytes",
        "--max-history-bytes",
        "--allow-broad-cwd",
    ] {
        assert!(help.contains(flag), "{flag} in --help");
    }
}

#[test]
fn a_root_or_home_workspace_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let home = base.join("home").join("me");
    std::fs::create_dir_all(home.join("project")).unwrap();
    let home_s = home.to_str().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, text_script("ok").to_string()).unwrap();
    let args = ["--script", script.to_str().unwrap(), "--no-persist"];
    let mut c = Client::spawn_env(&args, &[("HOME", home_s)]);
    c.initialize();
    let refused = [
        "/".to_owned(),
        "/..".to_owned(),
        home.display().to_string(),
        format!("{home_s}/project/.."),
        base.join("home").display().to_string(),
    ];
    for cwd in &refused {
        let id = c.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        let r = c.until_response(id, |_, v| panic!("{v}"));
        let (code, message) = error_of(&r);
        assert_eq!(code, -32602, "{cwd}: {r}");
        assert!(message.contains("--allow-broad-cwd"), "{cwd}: {message}");
    }
    let id = c.request(
        "session/load",
        json!({"sessionId": "abc", "cwd": "/", "mcpServers": []}),
    );
    assert_eq!(error_of(&c.until_response(id, |_, _| {})).0, -32602);
    // A project inside the home directory is fine.
    c.new_session(&home.join("project"));
    drop(c);

    let mut args = args.to_vec();
    args.push("--allow-broad-cwd");
    let mut c = Client::spawn_env(&args, &[("HOME", home_s)]);
    c.initialize();
    c.new_session(Path::new("/"));
    c.new_session(&home);
}
