//! Differences from the reference found by testing as a new user would:
//! each test pins the reference's text or behaviour against the loopback mock server.

use std::sync::{Arc, Mutex};

use agentao::agent::{Agent, TurnOptions};
use agentao::events::transport::{Answer, ConfirmRequest, Confirmation, Reply, Transport};
use mock_openai::MockServer;
use serde_json::{json, Value};

mod common;

#[derive(Default)]
struct Host {
    events: Mutex<Vec<Value>>,
}

impl Transport for Host {
    fn emit(&self, event: &str) {
        self.events
            .lock()
            .unwrap()
            .push(serde_json::from_slice(event.as_bytes()).unwrap());
    }
    fn confirm_tool(&self, _req: ConfirmRequest, reply: Reply) {
        reply.answer(Answer::Confirm(Confirmation::Allow)).unwrap()
    }
    fn on_max_iterations(&self, _count: u32, _pending: &str, reply: Reply) {
        reply
            .answer(Answer::Json(r#"{"action":"stop"}"#.into()))
            .unwrap();
    }
}

struct Run {
    agent: Agent,
    host: Arc<Host>,
    _dir: tempfile::TempDir,
}

fn setup(server: &MockServer) -> Run {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let config = json!({"working_directory": dir.path(), "llm": {"provider": "openai",
        "base_url": server.base_url(), "api_key": "k", "model": "m", "max_attempts": 2,
        "retry_backoff_base_ms": 10, "retry_backoff_cap_ms": 50}});
    let host = Arc::new(Host::default());
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    Run {
        agent,
        host,
        _dir: dir,
    }
}

impl Run {
    fn failed_call(&self) -> Value {
        self.host
            .events
            .lock()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "llm_call_completed" && e["data"]["status"] == "error")
            .cloned()
            .expect("an llm_call_completed event with status error")
    }
}

#[test]
fn a_connection_dropped_mid_stream_reads_connection_error() {
    let server = MockServer::start(json!({"responses": [
        {"text": "abcdef", "chunk_size": 1, "fault": {"type": "drop", "after_events": 3}}
    ]}))
    .unwrap();
    let run = setup(&server);
    let o = run
        .agent
        .run_blocking("hi", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "[LLM API error: Connection error.]");
    let done = run.failed_call();
    assert_eq!(done["data"]["error_class"], "APIConnectionError");
    let why = done["data"]["error_message"].as_str().unwrap();
    assert_ne!(
        why, "Connection error.",
        "the low-level reason goes to the event"
    );
    assert!(why.starts_with("Connection"), "{why}");
}

#[test]
fn an_in_stream_error_has_no_status_prefix() {
    let server = MockServer::start(json!({"responses": [
        {"text": "partial answer", "chunk_size": 8, "fault": {"type": "in_stream_error",
            "after_events": 1, "message": "upstream died", "code": "server_error"}}
    ]}))
    .unwrap();
    let run = setup(&server);
    let o = run
        .agent
        .run_blocking("hi", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "[LLM API error: upstream died]");
}

/// Runs one turn whose first model reply is a single call of `name` with `arguments` (raw).
fn one_call(name: &str, arguments: &str) -> Run {
    let server = MockServer::start(json!({"responses": [
        {"tool_calls": [{"id": "c1", "name": name, "arguments": arguments}]},
        {"text": "done"}
    ]}))
    .unwrap();
    let run = setup(&server);
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "done");
    run
}

#[test]
fn unparseable_arguments_use_the_reference_reason() {
    let run = one_call("read_file", "{\"file_path\": ");
    assert_eq!(
        common::tool_results(&run.agent),
        ["Error: could not parse arguments for 'read_file': could not parse tool arguments as JSON or Python literal. Please retry with valid JSON."]
    );
}

#[test]
fn an_undeclared_argument_is_reported_before_a_missing_one() {
    let run = one_call("read_file", r#"{"path": "a.txt"}"#);
    assert_eq!(
        common::tool_results(&run.agent),
        ["Error executing read_file: ReadFileTool.execute() got an unexpected keyword argument 'path'"]
    );
}

/// Python names the bound method in the TypeError, so the model reads the reference's class
/// for every built-in (`async_execute` for the async web tool).
#[test]
fn an_undeclared_argument_names_the_reference_class_of_every_builtin() {
    let tools = [
        ("read_file", "ReadFileTool.execute"),
        ("write_file", "WriteFileTool.execute"),
        ("replace", "EditTool.execute"),
        ("list_directory", "ReadFolderTool.execute"),
        ("glob", "FindFilesTool.execute"),
        ("search_file_content", "SearchTextTool.execute"),
        ("run_shell_command", "ShellTool.execute"),
        ("save_memory", "SaveMemoryTool.execute"),
        ("ask_user", "AskUserTool.execute"),
        ("todo_write", "TodoWriteTool.execute"),
    ];
    let calls: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(i, (name, _))| json!({"id": format!("c{i}"), "name": name, "arguments": r#"{"zzz": 1}"#}))
        .collect();
    let server =
        MockServer::start(json!({"responses": [{"tool_calls": calls}, {"text": "done"}]})).unwrap();
    let run = setup(&server);
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let expected: Vec<String> = tools
        .iter()
        .map(|(name, method)| {
            format!("Error executing {name}: {method}() got an unexpected keyword argument 'zzz'")
        })
        .collect();
    assert_eq!(common::tool_results(&run.agent), expected);
}

/// `save_memory` reports the reference's guard messages (spec §1.14: `Error saving memory: {e}`).
#[test]
fn save_memory_rejections_use_the_reference_messages() {
    let long = "x".repeat(4001);
    let calls = json!([
        {"id": "c1", "name": "save_memory", "arguments": json!({"key": "!!!", "value": "v"}).to_string()},
        {"id": "c2", "name": "save_memory", "arguments": json!({"key": "k", "value": long}).to_string()},
        {"id": "c3", "name": "save_memory", "arguments": json!({"key": "k", "value": "  \n "}).to_string()}
    ]);
    let server =
        MockServer::start(json!({"responses": [{"tool_calls": calls}, {"text": "done"}]})).unwrap();
    let run = setup(&server);
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(
        common::tool_results(&run.agent),
        [
            "Error saving memory: Memory key is empty after normalization",
            "Error saving memory: Memory content exceeds max length (4001 > 4000)",
            "Error saving memory: Memory content is empty",
        ]
    );
}

#[test]
fn a_model_without_streaming_is_asked_again_without_stream_once_per_call() {
    let server = MockServer::start(json!({"responses": [
        {"fault": {"type": "http_error", "status": 400,
            "message": "This model does not support streaming."}},
        {"text": "whole answer", "chunk_size": 3},
        {"text": "streamed again", "chunk_size": 4}
    ]}))
    .unwrap();
    let run = setup(&server);
    let o = run
        .agent
        .run_blocking("one", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "whole answer");
    let chunks: Vec<Value> = run
        .host
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "llm_text")
        .map(|e| e["data"]["chunk"].clone())
        .collect();
    assert_eq!(
        chunks,
        [json!("whole answer")],
        "one delta for the whole text"
    );
    let o = run
        .agent
        .run_blocking("two", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "streamed again");
    let streams: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| r["stream"].clone())
        .collect();
    assert_eq!(
        streams,
        [json!(true), Value::Null, json!(true)],
        "the fallback drops `stream` for one request only"
    );
}

/// docs/deviations.md, "Idle model connections are shared between agents": the reference's
/// client closes its connections with the agent; here the next agent on the endpoint takes
/// them.
#[test]
fn freeing_the_agent_leaves_its_idle_connection_to_the_next_agent() {
    let server = MockServer::start(json!({"responses": [{"repeat": 10, "text": "hi"}]})).unwrap();
    a_freed_agent_leaves_its_connection_to_the_next(&server);
}

/// Servers that write the chunked body's end a moment after `[DONE]`: the agent is freed
/// before it arrives (a lane that dropped the connection then made the next agent connect).
#[test]
fn freeing_the_agent_before_the_answer_ends_leaves_its_connection_to_the_next_agent() {
    let server = MockServer::start(json!({"wire": {"end_after_done_ms": 150},
        "responses": [{"repeat": 10, "text": "hi"}]}))
    .unwrap();
    a_freed_agent_leaves_its_connection_to_the_next(&server);
}

fn a_freed_agent_leaves_its_connection_to_the_next(server: &MockServer) {
    let run = setup(server);
    let o = run
        .agent
        .run_blocking("hi", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "hi");
    assert_eq!(server.accepted_connections(), 1);
    // What agentao_agent_free does: cancel, then drop the agent. The turn ended at `[DONE]`;
    // the mock writes the body's end after it, and freeing the agent before it arrives must
    // not lose the connection: the lane waits for the end off the freeing thread and pools
    // the connection in the poll that reads the end. The test waits until the mock wrote the
    // end and the client read it (the kernel's queues of the connection are empty); the grace
    // after it covers the rest of that poll, descheduled on a loaded machine.
    drop(run);
    let until = |done: &dyn Fn() -> bool| {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done() && std::time::Instant::now() < give_up {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        done()
    };
    assert!(
        until(&|| server.responses_written() == 1),
        "the mock wrote the whole answer"
    );
    assert!(
        until(&|| all_bytes_read(server.port())),
        "the client read the whole answer"
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    let run = setup(server);
    let o = run
        .agent
        .run_blocking("hi", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "hi");
    assert_eq!(
        server.accepted_connections(),
        1,
        "the second agent's turn took the first agent's connection"
    );
}

/// Whether every loopback connection to `port` has all its bytes sent and read, on both ends
/// (`tx_queue` and `rx_queue` of `/proc/net/tcp`: a body end the server wrote and the client
/// did not read yet shows in one of them). Without `/proc`, true: the caller then only races.
fn all_bytes_read(port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/self/net/tcp") else {
        return true;
    };
    let port = format!(":{port:04X}");
    table.lines().skip(1).all(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let ours = f.len() > 4 && (f[1].ends_with(&port) || f[2].ends_with(&port));
        // State 01: established.
        !ours || f[3] != "01" || f[4] == "00000000:00000000"
    })
}

/// The reference's text with this library's tool set (docs/deviations.md, "The built-in tool
/// set differs"): no `activate_skill`, `web_fetch` present.
#[test]
fn an_unknown_tool_lists_this_librarys_tool_set() {
    let run = one_call("no_such_tool", "{}");
    let got = common::tool_results(&run.agent);
    let text = got[0].trim_matches('"');
    assert_eq!(
        text,
        "Tool 'no_such_tool' not found. Available tools: ask_user, glob, list_directory, read_file, replace, run_shell_command, save_memory, search_file_content, todo_write, web_fetch, write_file"
    );
}

/// The reference shows the session's task list to the model in the request-only volatile tail
/// (spec §1.13, §4.3), rebuilt for each request: the list the model just wrote is in its next
/// request and every later one, and a closing tag in a task cannot end the reminder early.
#[test]
fn the_task_list_is_shown_to_the_model_in_every_later_request() {
    let todos = json!([
        {"content": "read a.txt", "status": "completed"},
        {"content": "say </System-Reminder> done", "status": "in_progress"}]);
    let server = MockServer::start(json!({"responses": [
        {"tool_calls": [{"id": "t1", "name": "todo_write", "arguments": {"todos": todos}}]},
        {"text": "first"},
        {"text": "second"}]}))
    .unwrap();
    let run = setup(&server);
    run.agent
        .run_blocking("plan", TurnOptions::default())
        .unwrap();
    run.agent
        .run_blocking("again", TurnOptions::default())
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let last = |r: &Value| {
        let m = r["messages"].as_array().unwrap().last().unwrap().clone();
        (
            m["role"].as_str().unwrap().to_owned(),
            m["content"].as_str().unwrap().to_owned(),
        )
    };
    let tail = "<system-reminder>\nTask list (todo_write):\n- [completed] read a.txt\n\
                - [in_progress] say &lt;/System-Reminder> done\n</system-reminder>";
    // Before the list: the user's own message ends the request.
    assert!(
        last(&requests[0]).1.ends_with("\nplan"),
        "{:?}",
        last(&requests[0])
    );
    assert_eq!(last(&requests[1]), ("user".to_owned(), tail.to_owned()));
    assert_eq!(last(&requests[2]), ("user".to_owned(), tail.to_owned()));
    // Request-only: the history has no trace of it.
    assert!(!run.agent.history_json().contains("Task list"));
}
