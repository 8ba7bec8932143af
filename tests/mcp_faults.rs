//! The MCP client against `mcp-fault-server` (an in-repo server on rmcp's server side): names,
//! trust rules, a server that starts too slowly, crashes mid-call, never answers, lists 10,000
//! tools or returns 10 MB; concurrent startup; the process group killed when the agent goes.

use std::time::{Duration, Instant};

use agentao::agent::{Agent, TurnOptions};
use agentao::turn::{DeltaSink, TurnStatus};
use serde_json::{json, Value};

mod mcp_support;
use mcp_support::{agent, call, fault, proc_state};

#[test]
fn tools_are_named_called_and_confirmed_by_the_trust_rules() {
    let mut responses = call("mcp_fault_echo", json!({"text": "hi there"}));
    responses.insert(
        1,
        json!({"tool_calls": [{"id": "c2", "name": "mcp_trusted_echo", "arguments": {"text": "x"}},
                              {"id": "c3", "name": "mcp_trusted_spawn_child", "arguments": {}}]}),
    );
    let mut trusted = fault(&[]);
    trusted["trust"] = json!(true);
    let run = agent(
        responses,
        json!({"fault": fault(&[]), "trusted": trusted}),
        Value::Null,
    );
    let out = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(out.status, TurnStatus::Ok);
    let msgs = run.tool_messages();
    assert_eq!(msgs[0], "hi there");
    assert_eq!(msgs[1], "x");
    // Untrusted: always confirmed. Trusted: only the destructive one.
    let confirms = run.host.confirms.lock().unwrap().clone();
    assert_eq!(confirms, vec!["mcp_fault_echo", "mcp_trusted_spawn_child"]);
    let st = run.server_status("fault");
    assert_eq!(st["status"], "connected");
    assert_eq!(st["transport"], "stdio");
    assert_eq!(st["tools"], 8);
    assert_eq!(st["trusted"], false);
    assert!(
        st["stderr"]
            .to_string()
            .contains("mcp-fault-server: starting"),
        "{st}"
    );
    let ev = run.events_of("mcp_server_status");
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert!(ev.iter().all(|e| e["data"]["status"] == "connected"));
}

#[test]
fn read_only_mode_lets_only_trusted_read_only_tools_run() {
    let responses = vec![
        json!({"tool_calls": [{"id": "c1", "name": "mcp_fault_echo", "arguments": {"text": "a"}},
                              {"id": "c2", "name": "mcp_trusted_echo", "arguments": {"text": "b"}}]}),
        json!({"text": "done"}),
    ];
    let mut trusted = fault(&[]);
    trusted["trust"] = json!(true);
    let run = agent(
        responses,
        json!({"fault": fault(&[]), "trusted": trusted}),
        json!({"permissions": {"mode": "read-only"}}),
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let msgs = run.tool_messages();
    assert_ne!(
        msgs[0], "a",
        "an untrusted tool ran in read-only mode: {msgs:?}"
    );
    assert_eq!(msgs[1], "b");
}

#[test]
fn is_error_is_a_tool_error_with_the_server_message() {
    let run = agent(
        call("mcp_fault_fail", json!({})),
        json!({"fault": fault(&[])}),
        Value::Null,
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(
        run.tool_messages()[0],
        "Error executing mcp_fault_fail: MCP tool error: it failed on purpose"
    );
}

#[test]
fn a_server_slower_than_its_startup_timeout_fails_alone() {
    let mut slow = fault(&["--slow-start", "5000"]);
    slow["timeout"] = json!({"startup": 0.5});
    let responses = vec![
        json!({"tool_calls": [{"id": "c1", "name": "mcp_slow_echo", "arguments": {"text": "a"}},
                              {"id": "c2", "name": "mcp_fine_echo", "arguments": {"text": "b"}}]}),
        json!({"text": "done"}),
    ];
    let run = agent(
        responses,
        json!({"slow": slow, "fine": fault(&[])}),
        Value::Null,
    );
    let t0 = Instant::now();
    let out = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    println!(
        "turn with a server past its startup timeout: {:?}",
        t0.elapsed()
    );
    assert_eq!(out.status, TurnStatus::Ok);
    let msgs = run.tool_messages();
    assert!(
        msgs[0].contains("mcp_slow_echo"),
        "the slow server's tool was there: {msgs:?}"
    );
    assert_eq!(msgs[1], "b");
    let st = run.server_status("slow");
    assert_eq!(st["status"], "error");
    assert!(
        st["error"]
            .as_str()
            .unwrap()
            .contains("did not start within the startup timeout (0.5 s)"),
        "{st}"
    );
    let ev = run.events_of("mcp_server_status");
    assert!(ev
        .iter()
        .any(|e| e["data"]["server"] == "slow" && e["data"]["status"] == "error"));
}

#[test]
fn a_crash_mid_call_reports_an_unknown_outcome_and_the_next_turn_reconnects() {
    let mut responses = call("mcp_fault_crash", json!({}));
    responses.extend(call("mcp_fault_echo", json!({"text": "back"})));
    let run = agent(responses, json!({"fault": fault(&[])}), Value::Null);
    let out = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(out.status, TurnStatus::Ok);
    let msg = &run.tool_messages()[0];
    assert!(
        msg.starts_with("MCP tool error: the connection to MCP server 'fault' closed after the call to 'crash' was sent"),
        "{msg}"
    );
    assert_eq!(run.server_status("fault")["status"], "error");
    run.agent
        .run_blocking("again", TurnOptions::default())
        .unwrap();
    assert_eq!(run.tool_messages()[1], "back");
    assert_eq!(run.server_status("fault")["status"], "connected");
}

#[test]
fn a_call_that_never_answers_is_cancelled_by_the_turn_and_the_server_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fault.log");
    let log_s = log.to_str().unwrap();
    let run = agent(
        call("mcp_fault_hang", json!({})),
        json!({"fault": fault(&["--log", log_s])}),
        Value::Null,
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let token = run
        .agent
        .start_turn(
            "go".into(),
            TurnOptions::default(),
            DeltaSink::None,
            move |r| {
                let _ = tx.send(r);
            },
        )
        .unwrap();
    let started = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("started")
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the hang call never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let t0 = Instant::now();
    token.cancel("user stop");
    let result = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the turn did not end");
    let took = t0.elapsed();
    println!("cancel of a call in flight to the end of the turn: {took:?}");
    assert!(took < Duration::from_secs(2), "cancel took {took:?}");
    let outcome = result.unwrap_or_else(|(_, o)| o.unwrap());
    assert_eq!(outcome.status, TurnStatus::Cancelled);
    // The server got notifications/cancelled for the request in flight.
    let t1 = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let started_id = text
            .lines()
            .find_map(|l| l.strip_prefix("started "))
            .map(str::to_owned);
        if let Some(id) = started_id {
            // The call was written by the turn's own task, not through rmcp's service (whose
            // ids count from 0): its cancellation, sent through rmcp, names that id.
            let number: i64 = id.parse().unwrap_or_default();
            assert!(number >= 1 << 32, "the call went through rmcp: id {id}");
            if text.contains(&format!("cancelled {id}")) {
                break;
            }
        }
        assert!(
            t1.elapsed() < Duration::from_secs(5),
            "no cancellation reached the server: {text}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn ten_thousand_tools_hit_the_catalog_limit_and_a_thousand_are_fine() {
    let run = agent(
        vec![json!({"text": "done"})],
        json!({"huge": fault(&["--tools", "10000"]), "big": fault(&["--tools", "1000"])}),
        Value::Null,
    );
    let t0 = Instant::now();
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    println!(
        "first turn with 10,000 + 1,000 tools listed: {:?}",
        t0.elapsed()
    );
    let huge = run.server_status("huge");
    assert_eq!(huge["status"], "error");
    assert_eq!(
        huge["error"],
        "MCP server 'huge' exceeded the 1024-tool catalog limit \
         (stderr: mcp-fault-server: starting)"
    );
    let big = run.server_status("big");
    assert_eq!(big["status"], "connected");
    assert_eq!(big["tools"], 1008);
}

#[test]
fn a_ten_megabyte_result_is_spilled_not_sent_whole() {
    let run = agent(
        call("mcp_fault_big", json!({})),
        json!({"fault": fault(&[])}),
        Value::Null,
    );
    let out = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(out.status, TurnStatus::Ok);
    let msg = &run.tool_messages()[0];
    assert!(msg.len() < 100_000, "the model got {} bytes", msg.len());
    let spilled = std::fs::read_dir(run.dir.path().join(".agentao/tool-outputs"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .max()
        .unwrap();
    assert_eq!(spilled, 10 << 20);
}

/// Time to the first turn with 5 stdio servers starting in 0.4 to 2 s is about the slowest
/// one's startup, not the sum (6 s).
#[test]
fn servers_connect_concurrently() {
    let delays_ms: Vec<u64> = (1..=5).map(|i| i * 400).collect();
    let servers: serde_json::Map<String, Value> = delays_ms
        .iter()
        .enumerate()
        .map(|(i, d)| (format!("s{i}"), fault(&["--slow-start", &d.to_string()])))
        .collect();
    let sum = Duration::from_millis(delays_ms.iter().sum());
    let slowest = Duration::from_millis(*delays_ms.iter().max().unwrap());
    let t0 = Instant::now();
    let run = agent(
        vec![json!({"text": "done"})],
        Value::Object(servers),
        Value::Null,
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let took = t0.elapsed();
    println!(
        "time to the end of the first turn with 5 servers starting in {delays_ms:?} ms: \
         {took:?} (slowest startup {slowest:?}, sum {sum:?})"
    );
    assert!(took >= slowest, "the turn did not wait for the servers");
    assert!(took < sum.mul_f64(0.6), "serial startup? {took:?}");
    let st = run.status();
    assert_eq!(st["servers"].as_array().unwrap().len(), 5);
    assert!(st["servers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["status"] == "connected"));
}

#[test]
fn freeing_the_agent_kills_the_server_with_its_group() {
    let run = agent(
        call("mcp_fault_spawn_child", json!({})),
        json!({"fault": fault(&[])}),
        Value::Null,
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let msg = run.tool_messages()[0].clone();
    let pids: Vec<u32> = msg.split(' ').map(|p| p.parse().unwrap()).collect();
    let (server, grandchild) = (pids[0], pids[1]);
    assert!(proc_state(server).is_some() && proc_state(grandchild).is_some());
    drop(run);
    let t0 = Instant::now();
    loop {
        // Ours to reap: the server must be gone. The grandchild is init's to reap: killed is
        // enough (gone or a zombie).
        let server_gone = proc_state(server).is_none();
        let grandchild_dead = matches!(proc_state(grandchild), None | Some('Z'));
        if server_gone && grandchild_dead {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "server {:?}, grandchild {:?}",
            proc_state(server),
            proc_state(grandchild)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_bad_server_config_is_a_config_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"working_directory": dir.path(),
        "llm": {"provider": "scripted", "script": {"responses": []}},
        "mcp_servers": {"x": {"type": "ws", "url": "http://h"}}});
    let err = Agent::new(&config.to_string(), None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("`mcp_servers.x`") && err.contains("'ws' is not a known transport"),
        "{err}"
    );
}

#[test]
fn call_round_trip_is_measured() {
    use agentao::cancel::CancelToken;
    use agentao::mcp::client::{Connection, StderrTail};
    use agentao::mcp::config::{parse_server, ProcessVars};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cfg = parse_server("f", &fault(&[]), std::path::Path::new("/"), &ProcessVars).unwrap();
    rt.block_on(async {
        let conn = Connection::connect("f", &cfg, std::sync::Arc::new(StderrTail::default()))
            .await
            .unwrap();
        let cancel = CancelToken::new();
        let args = json!({"text": "ping"}).as_object().unwrap().clone();
        let n = 300;
        let t0 = Instant::now();
        for _ in 0..n {
            let r = conn
                .call_tool("echo", &args, &cancel, &|_| {})
                .await
                .unwrap();
            assert_eq!(
                agentao::mcp::render::render_tool_result(r, None, None),
                ("ping".to_owned(), false)
            );
        }
        let per = t0.elapsed() / n;
        let t1 = Instant::now();
        for _ in 0..n {
            let r = json!({"content": [{"type": "text", "text": "ping"}]});
            let _ = agentao::mcp::render::render_call_result(&r, None, None);
        }
        println!(
            "echo over stdio, rendered: {per:?} per call; rendering a result's JSON: {:?} per call",
            t1.elapsed() / n
        );
    });
}

#[test]
fn mcp_json_files_are_read_only_when_the_config_asks() {
    let servers = json!({"mcpServers": {"file": fault(&[])}});
    for (asked, connected) in [(json!(["workspace"]), true), (Value::Null, false)] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".agentao")).unwrap();
        std::fs::write(dir.path().join(".agentao/mcp.json"), servers.to_string()).unwrap();
        let mut config = json!({"working_directory": dir.path(),
            "llm": {"provider": "scripted", "script": {"responses": [{"text": "ok"}]}}});
        if !asked.is_null() {
            config["mcp_config_files"] = asked;
        }
        let agent = Agent::new(&config.to_string(), None).unwrap();
        agent.run_blocking("go", TurnOptions::default()).unwrap();
        let status: Value = serde_json::from_str(&agent.mcp_status_json()).unwrap();
        let servers = status["servers"].as_array().unwrap();
        if connected {
            assert_eq!(servers.len(), 1, "{status}");
            assert_eq!(servers[0]["name"], "file");
            assert_eq!(servers[0]["status"], "connected");
        } else {
            assert!(servers.is_empty(), "read without being asked: {status}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"working_directory": dir.path(), "mcp_config_files": ["elsewhere"],
        "llm": {"provider": "scripted", "script": {"responses": []}}});
    let err = Agent::new(&config.to_string(), None)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("mcp_config_files"), "{err}");
}

#[test]
fn freeing_the_agent_while_a_server_starts_kills_it_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fault.log");
    let mut slow = fault(&["--slow-start", "20000", "--log", log.to_str().unwrap()]);
    slow["timeout"] = json!(60);
    let run = agent(vec![], json!({"slow": slow}), Value::Null);
    let t0 = Instant::now();
    let pid: u32 = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(p) = text.lines().find_map(|l| l.strip_prefix("pid ")) {
            break p.trim().parse().unwrap();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the server never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(run.server_status("slow")["status"], "connecting");
    drop(run);
    let t1 = Instant::now();
    while proc_state(pid).is_some() {
        assert!(
            t1.elapsed() < Duration::from_secs(5),
            "the starting server outlived the agent by {:?}",
            t1.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("a starting server gone {:?} after the agent", t1.elapsed());
}

#[test]
fn permission_rules_name_mcp_tools() {
    let responses = vec![
        json!({"tool_calls": [{"id": "c1", "name": "mcp_fault_echo", "arguments": {"text": "a"}},
                              {"id": "c2", "name": "mcp_other_echo", "arguments": {"text": "b"}}]}),
        json!({"text": "done"}),
    ];
    let run = agent(
        responses,
        json!({"fault": fault(&[]), "other": fault(&[])}),
        json!({"permissions": {"mode": "workspace-write",
            "rules": [{"tool": "mcp_fault_.*", "action": "deny"}]}}),
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let msgs = run.tool_messages();
    assert!(
        msgs[0].starts_with("Tool execution denied: 'mcp_fault_echo'"),
        "{msgs:?}"
    );
    assert_eq!(msgs[1], "b");
}

#[test]
fn a_request_timeout_ends_the_call_and_tells_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fault.log");
    let mut server = fault(&["--log", log.to_str().unwrap()]);
    server["timeout"] = json!({"startup": 30, "request": 0.5});
    let run = agent(
        call("mcp_fault_hang", json!({})),
        json!({"fault": server}),
        Value::Null,
    );
    let t0 = Instant::now();
    let out = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(out.status, TurnStatus::Ok);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(
        run.tool_messages()[0],
        "MCP tool error: 'hang' on MCP server 'fault' did not answer within its request timeout (0.5 s)"
    );
    let t1 = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("cancelled")
    {
        assert!(
            t1.elapsed() < Duration::from_secs(5),
            "the server was not told"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every progress notification the server wrote before its result reaches the host as the
/// call's output, in order, before the call's `tool_complete`: the last ones arrive together
/// with the result (the fault server writes them back to back), and a burst is longer than
/// any per-call queue of notifications.
#[test]
fn progress_sent_just_before_the_result_reaches_the_host_before_tool_complete() {
    let steps: Vec<u64> = (0..24)
        .map(|i| if i % 8 == 7 { 300 + i } else { 1 + i })
        .collect();
    let mut responses: Vec<Value> = steps
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({"tool_calls": [{"id": format!("c{i}"), "name": "mcp_fault_progress",
                                   "arguments": {"steps": n}}]})
        })
        .collect();
    responses.push(json!({"text": "done"}));
    let mut server = fault(&[]);
    server["trust"] = json!(true);
    let run = agent(responses, json!({"fault": server}), Value::Null);
    let out = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(out.status, TurnStatus::Ok);
    let events = run.host.events.lock().unwrap().clone();
    let mut lost = Vec::new();
    for (i, n) in steps.iter().enumerate() {
        let id = format!("c{i}");
        let of_call = |ty: &str| {
            events
                .iter()
                .enumerate()
                .filter(|(_, e)| e["type"] == ty && e["data"]["call_id"] == id.as_str())
                .map(|(k, e)| (k, e.clone()))
                .collect::<Vec<_>>()
        };
        let complete = of_call("tool_complete");
        assert_eq!(complete.len(), 1, "call {id}");
        let outputs = of_call("tool_output");
        assert!(
            outputs.iter().all(|(k, _)| *k < complete[0].0),
            "output of {id} after its tool_complete"
        );
        let text: String = outputs
            .iter()
            .map(|(_, e)| e["data"]["chunk"].as_str().unwrap())
            .collect();
        let want: String = (1..=*n).map(|k| format!("progress {k}/{n}\n")).collect();
        if text != want {
            lost.push(format!(
                "{id}: {} of {n} lines, last {:?}",
                text.lines().count(),
                text.lines().last()
            ));
        }
    }
    assert!(lost.is_empty(), "progress lost: {lost:#?}");
}

/// The tools a turn offered, read from the answer to a call of a tool nobody has.
fn offered_tools(run: &mcp_support::Run, turn: usize) -> Vec<String> {
    let msg = run.tool_messages()[turn].clone();
    let list = msg
        .split_once("Available tools: ")
        .unwrap_or_else(|| panic!("not an unknown-tool answer: {msg}"))
        .1;
    list.split(", ").map(str::to_owned).collect()
}

/// `tools.disabled` and `tools.enabled` name the MCP resource tools as the reference's
/// `disable_tools` / `enabled_tools` do (its `MCP_RESOURCE_TOOL_NAMES`); `enabled` may name
/// MCP tools (never pruned), and `disabled` refuses them as the reference does.
#[test]
fn the_tool_selection_names_mcp_resource_tools_as_the_reference_does() {
    let server = json!({"fault": fault(&["--resources", "1"])});
    let unknown = call("no_such_tool", json!({}));
    let run = agent(
        unknown.clone(),
        server.clone(),
        json!({"tools": {"disabled": ["list_mcp_resource_templates"]}}),
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let offered = offered_tools(&run, 0);
    for want in [
        "list_mcp_resources",
        "read_mcp_resource",
        "mcp_fault_echo",
        "glob",
    ] {
        assert!(offered.iter().any(|t| t == want), "{want}: {offered:?}");
    }
    assert!(
        !offered.iter().any(|t| t == "list_mcp_resource_templates"),
        "{offered:?}"
    );

    let run = agent(
        unknown,
        server.clone(),
        json!({"tools": {"enabled": ["read_file", "read_mcp_resource", "mcp_fault_echo"]}}),
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let offered = offered_tools(&run, 0);
    let mcp: Vec<&String> = offered.iter().filter(|t| t.starts_with("mcp_")).collect();
    assert_eq!(mcp.len(), 8, "MCP tools are never pruned: {offered:?}");
    let rest: Vec<&String> = offered.iter().filter(|t| !t.starts_with("mcp_")).collect();
    assert_eq!(rest, ["read_file", "read_mcp_resource"], "{offered:?}");

    let dir = tempfile::tempdir().unwrap();
    let config = json!({"working_directory": dir.path(), "mcp_servers": server,
        "llm": {"provider": "scripted", "script": {"responses": []}},
        "tools": {"disabled": ["mcp_fault_echo"]}});
    let err = Agent::new(&config.to_string(), None)
        .err()
        .expect("an MCP tool in tools.disabled")
        .to_string();
    assert!(
        err.contains("'mcp_fault_echo'") && err.contains("permission rule"),
        "{err}"
    );
}

/// A host tool added between turns is offered on the next turn when MCP servers are
/// configured too (the MCP tool list is kept while the servers are unchanged).
#[test]
fn a_host_tool_added_between_turns_is_offered_with_mcp_servers() {
    struct Ping;
    impl agentao::tools::Tool for Ping {
        fn name(&self) -> &str {
            "host_ping"
        }
        fn description(&self) -> &str {
            "ping"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {}})
        }
        fn is_read_only(&self) -> bool {
            true
        }
        fn execute(
            &self,
            _: &serde_json::Map<String, Value>,
            _: &agentao::tools::ToolContext<'_>,
        ) -> Result<String, agentao::tools::ToolError> {
            Ok("pong".into())
        }
    }
    let mut responses = call("mcp_fault_echo", json!({"text": "one"}));
    responses.extend(call("host_ping", json!({})));
    let run = agent(responses, json!({"fault": fault(&[])}), Value::Null);
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    run.agent
        .add_tool(std::sync::Arc::new(Ping), false)
        .unwrap();
    run.agent
        .run_blocking("again", TurnOptions::default())
        .unwrap();
    assert_eq!(run.tool_messages(), ["one", "pong"]);
}

/// Permission rules name the MCP resource tools too (they are read-only and never confirmed,
/// so only a rule can stop them).
#[test]
fn permission_rules_name_mcp_resource_tools() {
    let responses = vec![
        json!({"tool_calls": [{"id": "c1", "name": "read_mcp_resource",
                               "arguments": {"server": "fault", "uri": "x://y"}},
                              {"id": "c2", "name": "list_mcp_resources", "arguments": {}}]}),
        json!({"text": "done"}),
    ];
    let run = agent(
        responses,
        json!({"fault": fault(&["--resources", "1"])}),
        json!({"permissions": {"mode": "workspace-write",
            "rules": [{"tool": "read_mcp_resource", "action": "deny"}]}}),
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let msgs = run.tool_messages();
    assert!(
        msgs[0].starts_with("Tool execution denied: 'read_mcp_resource'"),
        "{msgs:?}"
    );
    assert!(!msgs[1].starts_with("Tool execution denied"), "{msgs:?}");
    assert!(run.host.confirms.lock().unwrap().is_empty());
}

/// Runs one turn, failing the test (not hanging it) if the turn has not ended in `limit`.
fn turn_within(run: &mcp_support::Run, limit: Duration) -> TurnStatus {
    let (tx, rx) = std::sync::mpsc::channel();
    let token = run
        .agent
        .start_turn(
            "go".into(),
            TurnOptions::default(),
            DeltaSink::None,
            move |r| {
                let _ = tx.send(r);
            },
        )
        .unwrap();
    let Ok(result) = rx.recv_timeout(limit) else {
        token.cancel("test limit");
        let _ = rx.recv_timeout(Duration::from_secs(10));
        panic!(
            "the turn did not end within {limit:?}; tool messages: {:?}",
            run.tool_messages()
        );
    };
    result.unwrap_or_else(|(_, o)| o.unwrap()).status
}

/// A result line over rmcp's 16 MiB line limit used to be dropped by its stdio transport with
/// only a log line: the call waited for an answer that would never come (the request timeout
/// is unbounded by default). It ends the call with an error naming the limit now, and the next
/// turn reconnects.
#[test]
fn a_result_over_16_mib_ends_the_call_with_an_error_instead_of_a_hang() {
    let mut responses = call("mcp_fault_big", json!({"bytes": 20 << 20}));
    responses.extend(call("mcp_fault_echo", json!({"text": "back"})));
    let run = agent(responses, json!({"fault": fault(&[])}), Value::Null);
    assert_eq!(turn_within(&run, Duration::from_secs(60)), TurnStatus::Ok);
    let msg = &run.tool_messages()[0];
    assert!(
        msg.starts_with(
            "MCP tool error: the connection to MCP server 'fault' closed after the call to \
             'big' was sent (the server sent a message over 16 MiB, the limit of one message)"
        ),
        "{msg}"
    );
    assert_eq!(run.server_status("fault")["status"], "error");
    assert_eq!(turn_within(&run, Duration::from_secs(60)), TurnStatus::Ok);
    assert_eq!(run.tool_messages()[1], "back");
}

/// rmcp answers each server request on tasks of its own; a server that sends requests and never
/// reads the replies piled them up without bound (1 GB at 400,000 pings). Past 64 unanswered
/// requests the connection is closed and the call ends with an error. The flood (10,000) is far
/// past what the pipe holds (a 64 KiB pipe takes ~1,500 replies) plus the cap, so the trip does
/// not depend on timing; before the fix the call succeeded once the server read the replies.
#[test]
fn a_server_that_floods_requests_without_reading_replies_is_disconnected() {
    let run = agent(
        call("mcp_fault_ping_flood", json!({"count": 10_000})),
        json!({"fault": fault(&[])}),
        Value::Null,
    );
    assert_eq!(turn_within(&run, Duration::from_secs(60)), TurnStatus::Ok);
    let msg = &run.tool_messages()[0];
    assert!(
        msg.starts_with(
            "MCP tool error: the connection to MCP server 'fault' closed after the call to \
             'ping_flood' was sent (the server sent more than 64 requests without reading \
             their replies)"
        ),
        "{msg}"
    );
    assert_eq!(run.server_status("fault")["status"], "error");
}

/// A minimal streamable-HTTP MCP server on loopback whose `tools/call` answer is one SSE event
/// of `big` bytes; every other request is answered as a plain JSON response.
fn http_server_answering_big_events(big: usize) -> u16 {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut out = stream;
                loop {
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let reply = |out: &mut std::net::TcpStream,
                                 status: &str,
                                 kind: &str,
                                 data: &[u8]| {
                        let head = format!(
                            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n",
                            data.len()
                        );
                        out.write_all(head.as_bytes())
                            .and_then(|()| out.write_all(data))
                    };
                    if !request_line.starts_with("POST") {
                        let _ = reply(&mut out, "405 Method Not Allowed", "text/plain", b"");
                        continue;
                    }
                    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let Some(id) = msg.get("id").cloned() else {
                        let _ = reply(&mut out, "202 Accepted", "text/plain", b"");
                        continue;
                    };
                    let result = match msg["method"].as_str() {
                        Some("initialize") => json!({
                            "protocolVersion": msg["params"]["protocolVersion"],
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "big", "version": "1"},
                        }),
                        Some("tools/list") => json!({"tools": [
                            {"name": "big", "description": "big", "inputSchema": {"type": "object"}},
                        ]}),
                        Some("tools/call") => {
                            let text = "x".repeat(big);
                            let event = json!({"jsonrpc": "2.0", "id": id,
                                "result": {"content": [{"type": "text", "text": text}]}});
                            let data = format!("event: message\ndata: {event}\n\n");
                            let _ = reply(&mut out, "200 OK", "text/event-stream", data.as_bytes());
                            continue;
                        }
                        _ => json!({}),
                    };
                    let data = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
                    let _ = reply(&mut out, "200 OK", "application/json", data.as_bytes());
                }
            });
        }
    });
    port
}

/// The stdio bound above, over streamable HTTP: rmcp refuses an SSE event over 16 MiB; the call
/// must then end with an error, not wait (its request timeout is unbounded by default).
#[test]
fn an_http_event_over_16_mib_ends_the_call_instead_of_a_hang() {
    for (size, too_big) in [(1 << 10, false), (17 << 20, true)] {
        let port = http_server_answering_big_events(size);
        let run = agent(
            call("mcp_web_big", json!({})),
            json!({"web": {"url": format!("http://127.0.0.1:{port}/mcp"), "trust": true}}),
            json!({"permissions": {"mode": "full-access"}}),
        );
        assert_eq!(turn_within(&run, Duration::from_secs(60)), TurnStatus::Ok);
        let msg = &run.tool_messages()[0];
        if too_big {
            assert!(
                msg.starts_with(
                    "MCP tool error: the connection to MCP server 'web' closed after the call"
                ),
                "{}",
                &msg[..msg.len().min(300)]
            );
        } else {
            // The same server with a small answer works: the size is what ends the call.
            assert_eq!(msg.len(), size, "{}", &msg[..msg.len().min(300)]);
        }
    }
}

/// Trusted server `a`'s `b_c` and untrusted server `a_b`'s `c` both mangle to `mcp_a_b_c`:
/// neither keeps that name, so an allow rule written for one can never run the other; each is
/// offered under the reference's hashed form and the status says so.
#[test]
fn tools_of_two_servers_that_mangle_alike_are_told_apart() {
    let mut a = fault(&["--names", "b_c", "--label", "a"]);
    a["trust"] = json!(true);
    let a_b = fault(&["--names", "c", "--label", "a_b"]);
    let mut responses = vec![json!({"tool_calls": [
        {"id": "c1", "name": "mcp_a_b_c", "arguments": {}},
        {"id": "c2", "name": "mcp_a_b_c_662f0bbb", "arguments": {}},
        {"id": "c3", "name": "mcp_a_b_c_0c1d18f5", "arguments": {}}]})];
    responses.push(json!({"text": "done"}));
    let run = agent(
        responses,
        json!({"a": a, "a_b": a_b}),
        json!({"permissions": {"mode": "workspace-write",
            "rules": [{"tool": "mcp_a_b_c", "action": "allow"}]}}),
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    // By call id: a call that waits for its confirmation answers later in the history.
    let h: Value = serde_json::from_str(&run.agent.history_json()).unwrap();
    let answer = |id: &str| -> String {
        h.as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        answer("c1").starts_with("Tool 'mcp_a_b_c' not found"),
        "the allow rule for the trusted tool reached another: {}",
        answer("c1")
    );
    assert_eq!(answer("c2"), "a:b_c");
    assert_eq!(answer("c3"), "a_b:c");
    // The untrusted one was asked about; the rule named neither.
    let confirms = run.host.confirms.lock().unwrap().clone();
    assert!(
        confirms.contains(&"mcp_a_b_c_0c1d18f5".to_owned()),
        "{confirms:?}"
    );
    let st = run.server_status("a");
    assert_eq!(st["tools"], 9, "{st}");
    assert_eq!(st["renamed_tools"]["b_c"], "mcp_a_b_c_662f0bbb", "{st}");
    let st = run.server_status("a_b");
    assert_eq!(st["tools"], 9, "{st}");
    assert_eq!(st["renamed_tools"]["c"], "mcp_a_b_c_0c1d18f5", "{st}");
}

/// `x-y` and `x_y` on one server both mangle to `mcp_s_x_y`: both are offered, told apart by
/// the hash suffix; a name listed twice is refused once, and the status counts what is offered.
#[test]
fn tools_of_one_server_that_mangle_alike_are_all_offered_or_refused_in_the_status() {
    let responses = vec![
        json!({"tool_calls": [{"id": "c1", "name": "nope", "arguments": {}}]}),
        json!({"text": "done"}),
    ];
    let run = agent(
        responses,
        json!({"s": fault(&["--names", "x-y,x_y,d,d"])}),
        Value::Null,
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let offered: Vec<String> = offered_tools(&run, 0)
        .into_iter()
        .filter(|n| n.starts_with("mcp_s_"))
        .collect();
    assert_eq!(offered.len(), 11, "{offered:?}");
    assert!(
        offered.contains(&"mcp_s_x_y_5bcffd2e".to_owned()),
        "{offered:?}"
    );
    assert!(
        offered.contains(&"mcp_s_x_y_5fb6de5e".to_owned()),
        "{offered:?}"
    );
    let st = run.server_status("s");
    assert_eq!(st["tools"], 11, "{st}");
    assert_eq!(st["refused_tools"][0]["tool"], "d", "{st}");
    assert!(
        st["refused_tools"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("mcp_s_d"),
        "{st}"
    );
}

/// Peak resident memory of this process since the last reset, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// A server sending a 15 MB `inputSchema` on each of 20 `tools/list` pages is failed once the
/// list passes its byte bound; the host grows by little more than a page.
#[test]
fn a_tool_list_past_its_byte_bound_fails_the_server_and_bounds_memory() {
    let run = agent(
        vec![json!({"text": "done"})],
        json!({"fat": fault(&["--pages", "20", "--schema-bytes", "15000000"])}),
        Value::Null,
    );
    // Resets VmHWM to the current RSS (Linux 4.0+).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = peak_rss();
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let grown = peak_rss().saturating_sub(before);
    println!(
        "peak growth listing 20 x 15 MB schemas: {} MiB",
        grown >> 20
    );
    let st = run.server_status("fat");
    assert_eq!(st["status"], "error", "{}", st["tools"]);
    assert!(
        st["error"]
            .as_str()
            .unwrap()
            .contains("tool list larger than 8 MiB"),
        "{}",
        st["error"]
    );
    assert!(grown < 400 << 20, "grew by {} MiB", grown >> 20);
}

/// The byte and count bounds are configurable.
#[test]
fn the_tool_list_bounds_are_configurable() {
    let run = agent(
        vec![json!({"text": "done"})],
        json!({"few": fault(&["--tools", "3"]), "small": fault(&["--pages", "2", "--schema-bytes", "3000"])}),
        json!({"mcp_limits": {"max_tools": 10, "max_tool_list_bytes": 4096}}),
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let few = run.server_status("few");
    assert_eq!(few["status"], "error", "{few}");
    assert!(
        few["error"]
            .as_str()
            .unwrap()
            .contains("10-tool catalog limit"),
        "{few}"
    );
    let small = run.server_status("small");
    assert_eq!(small["status"], "error", "{small}");
    assert!(
        small["error"]
            .as_str()
            .unwrap()
            .contains("tool list larger than 4096 bytes"),
        "{small}"
    );
}

/// A server that never answers `initialize` costs the first turn one startup timeout; the
/// next turn does not wait for it, and the status lists it from construction on.
#[test]
fn a_server_that_never_starts_costs_one_wait_not_one_per_turn() {
    let mut slow = fault(&["--slow-start", "600000"]);
    slow["timeout"] = json!({"startup": 1.5});
    let run = agent(
        vec![json!({"text": "one"}), json!({"text": "two"})],
        json!({"slow": slow}),
        Value::Null,
    );
    let st = run.server_status("slow");
    assert_eq!(st["status"], "connecting", "{}", run.status());
    let t0 = Instant::now();
    run.agent
        .run_blocking("one", TurnOptions::default())
        .unwrap();
    let first = t0.elapsed();
    assert_eq!(run.server_status("slow")["status"], "error");
    let t1 = Instant::now();
    run.agent
        .run_blocking("two", TurnOptions::default())
        .unwrap();
    let second = t1.elapsed();
    println!("turns with a server that never starts: {first:?}, then {second:?}");
    assert!(
        second < Duration::from_millis(500),
        "the second turn waited {second:?} for a server that had failed"
    );
    let st = run.server_status("slow");
    assert_eq!(st["status"], "error", "{st}");
}

/// A server that failed to start is retried in the background, with no turn asking.
#[test]
fn a_failed_server_is_retried_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("ready");
    let run = agent(
        vec![json!({"text": "one"})],
        json!({"late": fault(&["--require", flag.to_str().unwrap()])}),
        Value::Null,
    );
    run.agent
        .run_blocking("one", TurnOptions::default())
        .unwrap();
    let st = run.server_status("late");
    assert_eq!(st["status"], "error", "{st}");
    std::fs::write(&flag, "").unwrap();
    let t0 = Instant::now();
    while run.server_status("late")["status"] != "connected" {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "never reconnected: {}",
            run.server_status("late")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("reconnected in the background after {:?}", t0.elapsed());
    // The status board shows the connection before its event is sent (from the retry's task):
    // the event comes, but not necessarily by the time the board is read.
    let reported = |ev: &[Value]| {
        ev.iter()
            .any(|e| e["data"]["server"] == "late" && e["data"]["status"] == "connected")
    };
    let t1 = Instant::now();
    while !reported(&run.events_of("mcp_server_status")) {
        assert!(
            t1.elapsed() < Duration::from_secs(5),
            "connected, but no event said so: {:?}",
            run.events_of("mcp_server_status")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Untrusted stdio servers get an allow-listed environment plus their own `env`; trusted
/// ones keep the host's environment (minus provider credentials).
#[test]
fn untrusted_stdio_servers_do_not_inherit_the_hosts_secrets() {
    // Rust's own env lock orders this against the other tests' spawns.
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "aws-secret-for-the-test");
    std::env::set_var("GITHUB_TOKEN", "gh-token-for-the-test");
    let dir = tempfile::tempdir().unwrap();
    let (u_log, t_log) = (dir.path().join("u.env"), dir.path().join("t.env"));
    let mut untrusted = fault(&["--env-log", u_log.to_str().unwrap()]);
    untrusted["env"] = json!({"MY_SETTING": "on", "MY_TOKEN": "$GITHUB_TOKEN"});
    let mut trusted = fault(&["--env-log", t_log.to_str().unwrap()]);
    trusted["trust"] = json!(true);
    let run = agent(
        vec![json!({"text": "done"})],
        json!({"untrusted": untrusted, "trusted": trusted}),
        Value::Null,
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let u = std::fs::read_to_string(&u_log).unwrap();
    let t = std::fs::read_to_string(&t_log).unwrap();
    let names = |s: &str| -> Vec<String> {
        s.lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_owned()))
            .collect()
    };
    let (un, tn) = (names(&u), names(&t));
    assert!(!un.contains(&"AWS_SECRET_ACCESS_KEY".to_owned()), "{un:?}");
    assert!(!un.contains(&"GITHUB_TOKEN".to_owned()), "{un:?}");
    assert!(un.contains(&"PATH".to_owned()), "{un:?}");
    // The server's own `env` is passed, with `$VAR` expanded from the host.
    assert!(u.contains("MY_SETTING=on\n"), "{u}");
    assert!(u.contains("MY_TOKEN=gh-token-for-the-test\n"), "{u}");
    assert!(tn.contains(&"AWS_SECRET_ACCESS_KEY".to_owned()), "{tn:?}");
    assert!(tn.contains(&"GITHUB_TOKEN".to_owned()), "{tn:?}");
}
