//! Persistence: writes, merges, recovery, and what it never writes through.

use super::*;

#[test]
fn persistence_writes_merges_and_recovers() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".agentao/background_tasks.json");
    // A sibling's record already on disk, and an earlier process's running task.
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let orphan = json!({"agent_name": "old", "task": "t", "status": "running", "result": null,
        "error": null, "incomplete_reason": null, "created_at": 1.0, "started_at": 2.0,
        "finished_at": null, "turns": 0, "tool_calls": 0, "tokens": 0, "duration_ms": 0});
    std::fs::write(
        &file,
        json!({"version": 1, "tasks": {"0badc0de": orphan, "bad": "not a record"}}).to_string(),
    )
    .unwrap();
    let s = BackgroundStore::new(rt.handle().clone(), Some(dir.path().to_owned()));
    let rec = s.get("0badc0de").expect("recovered").rec;
    assert_eq!(rec.status, TaskStatus::Failed);
    assert_eq!(
        rec.error.as_deref(),
        Some("process exited before task finished")
    );
    assert!(
        s.list().is_empty(),
        "recovered records are history, not this session's"
    );

    let id = s
        .launch("writer", "persist me", |_, _| async {
            completed("secret result")
        })
        .unwrap();
    assert_eq!(settle_wait(&s, &id), TaskStatus::Completed);
    // The flush after settling runs right after the wake-up: poll for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let doc = loop {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        if doc["tasks"][&id]["status"] == "completed" {
            break doc;
        }
        assert!(Instant::now() < deadline, "never flushed: {doc}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["tasks"][&id]["result"], "secret result");
    assert_eq!(doc["tasks"]["0badc0de"]["status"], "failed");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "unredacted: owner only");
    }

    // A second store on the same file in this process does not take the records over, and
    // its flush keeps them.
    let s2 = BackgroundStore::new(rt.handle().clone(), Some(dir.path().to_owned()));
    assert!(s2.get(&id).is_none());
    let id2 = s2
        .launch("other", "o", |_, _| async { completed("two") })
        .unwrap();
    assert_eq!(settle_wait(&s2, &id2), TaskStatus::Completed);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let tasks = doc["tasks"].as_object().unwrap();
        if tasks.get(&id2).is_some_and(|t| t["status"] == "completed") {
            assert!(tasks.contains_key(&id) && tasks.contains_key("0badc0de"));
            break;
        }
        assert!(Instant::now() < deadline, "never flushed: {doc}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(unix)]
#[test]
fn persistence_never_writes_through_a_planted_symlink() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(".agentao")).unwrap();
    let s = BackgroundStore::new(rt.handle().clone(), Some(dir.path().to_owned()));
    let id = s.launch("w", "t", |_, _| async { completed("r") }).unwrap();
    assert_eq!(settle_wait(&s, &id), TaskStatus::Completed);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        std::fs::read_dir(elsewhere.path()).unwrap().count(),
        0,
        "nothing written through the symlink"
    );
}

#[test]
fn persistence_never_replaces_a_file_it_cannot_read() {
    // A file over the read bound (or of another version) held records this store could not
    // see; merging into "nothing" and writing replaced them all.
    let rt = runtime();
    for (name, text) in [
        (
            "too big",
            format!(
                "{{\"version\": 1, \"tasks\": {{}}, \"pad\": \"{}\"}}",
                "x".repeat(17 << 20)
            ),
        ),
        (
            "another version",
            "{\"version\": 2, \"tasks\": {\"keep\": {}}}".to_owned(),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".agentao")).unwrap();
        let file = dir.path().join(".agentao/background_tasks.json");
        std::fs::write(&file, &text).unwrap();
        let s = BackgroundStore::new(rt.handle().clone(), Some(dir.path().to_owned()));
        let id = s.launch("w", "t", |_, _| async { completed("r") }).unwrap();
        assert_eq!(settle_wait(&s, &id), TaskStatus::Completed);
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            std::fs::read_to_string(&file).unwrap() == text,
            "{name}: the file was replaced"
        );
    }
}
