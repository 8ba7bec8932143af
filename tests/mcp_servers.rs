//! The MCP client against real servers nobody here wrote: `@modelcontextprotocol/server-everything`
//! (stdio and Streamable HTTP) and `@modelcontextprotocol/server-filesystem` (stdio), installed
//! from npm by `scripts/test.d/87-mcp.sh`, which runs these tests with `--ignored` and
//! `AGENTAO_MCP_NODE` set to the install (they need Node and the packages, so a plain
//! `cargo test` lists them as ignored).

use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentao::agent::TurnOptions;
use agentao::turn::TurnStatus;
use serde_json::{json, Value};

mod mcp_support;
use mcp_support::agent;

fn node_modules() -> PathBuf {
    let dir = std::env::var("AGENTAO_MCP_NODE")
        .expect("AGENTAO_MCP_NODE must name the npm install (scripts/test.sh mcp sets it)");
    let p = PathBuf::from(dir).join("node_modules/@modelcontextprotocol");
    assert!(p.is_dir(), "{} is missing", p.display());
    p
}

fn everything_stdio() -> Value {
    let js = node_modules().join("server-everything/dist/index.js");
    json!({"command": "node", "args": [js, "stdio"], "timeout": {"startup": 60, "request": 60}})
}

fn calls(calls: Vec<(&str, Value)>) -> Vec<Value> {
    let tool_calls: Vec<Value> = calls
        .into_iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("c{i}"), "name": name, "arguments": args}))
        .collect();
    vec![json!({"tool_calls": tool_calls}), json!({"text": "done"})]
}

#[test]
#[ignore = "needs Node and the npm MCP servers: scripts/test.sh mcp"]
fn everything_over_stdio() {
    let run = agent(
        calls(vec![
            ("mcp_ev_echo", json!({"message": "hello MCP"})),
            ("mcp_ev_get_sum", json!({"a": 2, "b": 40})),
            (
                "mcp_ev_trigger_long_running_operation",
                json!({"duration": 1, "steps": 4}),
            ),
            ("mcp_ev_get_sum", json!({"a": "two", "b": 1})),
            ("mcp_ev_get_tiny_image", json!({})),
            ("list_mcp_resources", json!({"server": "ev"})),
            (
                "read_mcp_resource",
                json!({"server": "ev", "uri": "demo://resource/static/document/features.md"}),
            ),
        ]),
        json!({"ev": everything_stdio()}),
        Value::Null,
    );
    let out = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(out.status, TurnStatus::Ok);
    let m = run.tool_messages();
    println!("{m:#?}");
    assert_eq!(m[0], "Echo: hello MCP");
    assert!(m[1].contains("42"), "{}", m[1]);
    assert!(
        m[2].starts_with("Long running operation completed."),
        "{}",
        m[2]
    );
    assert!(
        m[3].starts_with("Error executing mcp_ev_get_sum: MCP tool error: "),
        "a bad argument is the server's isError: {}",
        m[3]
    );
    assert!(m[4].contains("[image: image/png, "), "{}", m[4]);
    let listing: Value = serde_json::from_str(&m[5]).unwrap();
    assert_eq!(listing["server"], "ev");
    assert!(
        !listing["resources"].as_array().unwrap().is_empty(),
        "{listing}"
    );
    assert!(m[6].starts_with('#'), "the markdown document: {}", m[6]);
    // Progress notifications reached the host as the call's output.
    let progress: Vec<Value> = run
        .events_of("tool_output")
        .into_iter()
        .filter(|e| e["data"]["tool"] == "mcp_ev_trigger_long_running_operation")
        .collect();
    let text: String = progress
        .iter()
        .map(|e| e["data"]["chunk"].as_str().unwrap())
        .collect();
    assert!(text.contains("progress 4/4"), "{progress:?}");
    // Untrusted: every call was confirmed (the resource listing needs none).
    assert_eq!(run.host.confirms.lock().unwrap().len(), 5);
    let st = run.server_status("ev");
    assert_eq!(st["status"], "connected");
    assert_eq!(st["resources"], true);
}

#[test]
#[ignore = "needs Node and the npm MCP servers: scripts/test.sh mcp"]
fn filesystem_over_stdio_reads_a_file() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "line one\nline two\n").unwrap();
    let js = node_modules().join("server-filesystem/dist/index.js");
    let file = root.join("notes.txt");
    let run = agent(
        calls(vec![
            ("mcp_fs_read_text_file", json!({"path": file})),
            ("mcp_fs_read_text_file", json!({"path": "/etc/hostname"})),
        ]),
        json!({"fs": {"command": "node", "args": [js, root], "trust": true}}),
        Value::Null,
    );
    let out = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(out.status, TurnStatus::Ok);
    let m = run.tool_messages();
    println!("{m:#?}");
    assert_eq!(m[0], "line one\nline two\n");
    assert!(
        m[1].contains("Access denied"),
        "outside the server's root: {}",
        m[1]
    );
    // Trusted and read-only: no confirmation.
    assert!(run.host.confirms.lock().unwrap().is_empty());
}

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs Node and the npm MCP servers: scripts/test.sh mcp"]
fn everything_over_streamable_http() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let js = node_modules().join("server-everything/dist/index.js");
    let _server = Server(
        std::process::Command::new("node")
            .arg(js)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the HTTP server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let run = agent(
        calls(vec![
            ("mcp_web_echo", json!({"message": "over http"})),
            ("mcp_web_get_sum", json!({"a": 1.5, "b": 2})),
            (
                "mcp_web_trigger_long_running_operation",
                json!({"duration": 0.5, "steps": 2}),
            ),
        ]),
        json!({"web": {"url": format!("http://127.0.0.1:{port}/mcp")}}),
        Value::Null,
    );
    let out = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(out.status, TurnStatus::Ok);
    let m = run.tool_messages();
    println!("{m:#?}");
    assert_eq!(m[0], "Echo: over http");
    assert!(m[1].contains("3.5"), "{}", m[1]);
    assert!(
        m[2].starts_with("Long running operation completed."),
        "{}",
        m[2]
    );
    let st = run.server_status("web");
    assert_eq!(st["status"], "connected");
    assert_eq!(st["transport"], "http");
}
