//! The memory store has a budget: a model that calls `save_memory` without end (it needs no
//! confirmation in workspace-write; 5,000 saves of 4,000 characters made a 23 MB database)
//! fills a per-agent count and byte budget, then is told the
//! store is full; replacing a memory it already has still works.

use std::path::Path;

use agentao::agent::{Agent, TurnOptions};
use serde_json::{json, Value};

mod common;

/// `calls` saves of `value_chars` characters under distinct keys, 50 to a model response.
fn saves(calls: usize, value_chars: usize, key_prefix: &str) -> Vec<Value> {
    let value: String = "lorem ipsum ".repeat(value_chars / 12 + 1)[..value_chars].to_owned();
    (0..calls)
        .collect::<Vec<_>>()
        .chunks(50)
        .map(|chunk| {
            let calls: Vec<Value> = chunk
                .iter()
                .map(|i| {
                    json!({"id": format!("c{i}"), "name": "save_memory",
                       "arguments": {"key": format!("{key_prefix}{i}"), "value": value}})
                })
                .collect();
            json!({"tool_calls": calls})
        })
        .collect()
}

fn run(ws: &Path, memory: Value, mut responses: Vec<Value>) -> Vec<String> {
    responses.push(json!({"text": "done"}));
    let config = json!({
        "working_directory": ws,
        "llm": {"provider": "scripted", "script": {"responses": responses}},
        "permissions": {"mode": "workspace-write"},
        "max_iterations": 1000,
        // The saves are counted from the history's tool results: a window far above this
        // turn's transcript keeps compaction from summarising them away.
        "max_context_tokens": 100_000_000u64,
        "memory": memory,
    });
    let agent = Agent::new(&config.to_string(), None).unwrap();
    agent
        .run_blocking("remember", TurnOptions::default())
        .unwrap();
    common::tool_results(&agent)
}

fn live_rows(db: &Path) -> (u64, u64) {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys;c=sqlite3.connect(sys.argv[1]);\
             print(*c.execute('select count(*), coalesce(sum(length(content)),0) from memories \
             where deleted_at is null').fetchone())",
            db.to_str().unwrap(),
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let s = String::from_utf8_lossy(&o.stdout);
            let mut it = s.split_whitespace().map(|n| n.parse().unwrap());
            (it.next().unwrap(), it.next().unwrap())
        }
        // No python3 here: the tool results still say how many were saved.
        _ => (0, 0),
    }
}

#[test]
fn save_memory_stops_at_the_default_budget() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let results = run(
        &ws,
        json!({"sqlite_path": "mem.db"}),
        saves(1500, 4000, "fact_"),
    );
    let saved = results
        .iter()
        .filter(|r| r.starts_with("Saved memory"))
        .count();
    let full: Vec<&String> = results
        .iter()
        .filter(|r| r.starts_with("Error saving memory"))
        .collect();
    let db_bytes = std::fs::metadata(ws.join("mem.db")).unwrap().len();
    let (rows, content) = live_rows(&ws.join("mem.db"));
    println!(
        "FIGURE memory/budget: 1,500 saves of 4,000 characters: {saved} saved, {} refused; \
         {rows} live rows, {content} content bytes, database {db_bytes} bytes",
        full.len()
    );
    assert!(saved <= 1000, "{saved} saved");
    assert_eq!(saved + full.len(), 1500);
    assert!(
        full[0].contains("memory store is full") && full[0].contains("config `memory.max_"),
        "{}",
        full[0]
    );
    assert!(db_bytes < 12 * 1024 * 1024, "database {db_bytes} bytes");
}

#[test]
fn save_memory_budget_is_configurable_and_replacing_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let mut responses = saves(4, 10, "k");
    // At the count limit: a key it has is replaced, a new one is refused.
    responses.extend(saves(1, 20, "k"));
    let results = run(&ws, json!({"max_entries": 3}), responses);
    assert_eq!(
        results[..3],
        ["Saved memory: k0", "Saved memory: k1", "Saved memory: k2"]
    );
    assert!(
        results[3].starts_with("Error saving memory: the memory store is full")
            && results[3].contains("3 memories")
            && results[3].contains("max_entries"),
        "{}",
        results[3]
    );
    assert_eq!(results[4], "Saved memory: k0");

    let results = run(&ws, json!({"max_bytes": 20000}), saves(10, 4000, "b"));
    let saved = results.iter().filter(|r| r.starts_with("Saved")).count();
    assert!((1..5).contains(&saved), "{results:?}");
    assert!(
        results[saved].contains("20000 bytes") && results[saved].contains("max_bytes"),
        "{}",
        results[saved]
    );

    for bad in [
        json!({"max_entries": 0}),
        json!({"max_bytes": -1}),
        json!({"max_entries": "10"}),
    ] {
        let config = json!({"working_directory": ws,
            "llm": {"provider": "scripted", "script": {"responses": []}}, "memory": bad});
        let err = Agent::new(&config.to_string(), None)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("memory.max_"), "{err}");
    }
}
