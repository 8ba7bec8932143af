//! `agentao-acp` driven through its real stdio by a test client; every message the server sends
//! is validated against the reference's ACP schema (docs/schema/host.acp.schema.json).

mod common;

use std::time::{Duration, Instant};

use common::{update_kinds, Client};
use serde_json::{json, Value};

fn text_script(text: &str) -> Value {
    json!({"responses": [{"text": text, "chunk_size": 3}]})
}

fn shell_call(id: &str, command: &str) -> Value {
    json!({"tool_calls": [{"id": id, "name": "run_shell_command", "arguments": {"command": command}}]})
}

#[test]
fn misbehaving_client_gets_errors_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Client::scripted(dir.path(), &text_script("hi"), &[]);

    // Before initialize.
    let id = c.request("session/new", json!({"cwd": "/", "mcpServers": []}));
    let r = c.until_response(id, |_, v| panic!("{v}"));
    assert_eq!(r["error"]["code"], -32600, "{r}");

    c.send_raw("{not json");
    let r = c.recv();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["id"], Value::Null);

    c.send_raw("[1,2]");
    assert_eq!(c.recv()["error"]["code"], -32600);
    c.send_raw(r#"{"jsonrpc":"1.0","id":7,"method":"initialize"}"#);
    let r = c.recv();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(7), json!(-32600))
    );

    // A response to nothing is not answered (JSON-RPC never answers a response).
    c.send_raw(r#"{"jsonrpc":"2.0","id":4242,"result":{"outcome":{"outcome":"cancelled"}}}"#);
    // An unknown notification is ignored.
    c.notify("session/unknown_thing", json!({}));

    let init = c.initialize();
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["_meta"]["_agentao.cn/extensions"][0]["method"],
        "_agentao.cn/ask_user"
    );

    let id = c.request("no/such_method", json!({}));
    assert_eq!(
        c.until_response(id, |_, v| panic!("{v}"))["error"]["code"],
        -32601
    );

    // Params no lenient reading can take: a missing cwd, a relative one.
    let id = c.request("session/new", json!({"mcpServers": []}));
    assert_eq!(
        c.until_response(id, |_, v| panic!("{v}"))["error"]["code"],
        -32602
    );
    let id = c.request("session/new", json!({"cwd": "rel", "mcpServers": []}));
    assert_eq!(
        c.until_response(id, |_, v| panic!("{v}"))["error"]["code"],
        -32602
    );
    let id = c.request(
        "session/prompt",
        json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
    );
    assert_eq!(
        c.until_response(id, |_, v| panic!("{v}"))["error"]["code"],
        -32602
    );

    let s = c.new_session(dir.path());
    let id = c.request(
        "session/set_config_option",
        json!({"sessionId": s, "configId": "model", "value": "scripted/x", "apiKey": "sk-1"}),
    );
    let r = c.until_response(id, |_, v| panic!("{v}"));
    assert_eq!(
        r["error"]["code"], -32602,
        "a credential field is refused: {r}"
    );
    // Images are taken, but a bad one is refused before the turn: a type no model takes, data
    // that is not base64, an empty image.
    for image in [
        json!({"type": "image", "data": "AA==", "mimeType": "image/svg+xml"}),
        json!({"type": "image", "data": "not base64!", "mimeType": "image/png"}),
        json!({"type": "image", "data": "", "mimeType": "image/png"}),
    ] {
        let id = c.request("session/prompt", json!({"sessionId": s, "prompt": [image]}));
        let r = c.until_response(id, |_, v| panic!("{v}"));
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }

    // Still serving.
    let id = c.prompt(&s, "hello");
    let r = c.until_response(id, |_, _| {});
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let text: String = c
        .log
        .iter()
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|v| {
            v["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "hi");
    eprintln!("schema-validated messages: {}", c.validated);
}

#[test]
fn oversized_message_is_refused_and_the_connection_survives() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Client::scripted(dir.path(), &text_script("hi"), &[]);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"x":"{}"}}}}"#,
        "a".repeat(17 * 1024 * 1024)
    );
    c.send_raw(&big);
    let r = c.recv();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("longer than"));
    c.initialize();
}

/// Answers permission requests with the next option of `answers`; returns how many it answered.
fn grant<'a>(answers: &'a mut Vec<&'static str>) -> impl FnMut(&mut Client, Value) + 'a {
    move |c, v| {
        if v["method"] == "session/request_permission" {
            let option = answers.remove(0);
            assert_eq!(v["params"]["toolCall"]["status"], "pending");
            assert_eq!(v["params"]["toolCall"]["kind"], "execute");
            let kinds: Vec<&str> = v["params"]["options"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["kind"].as_str().unwrap())
                .collect();
            assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
            c.answer(
                &v["id"],
                json!({"outcome": {"outcome": "selected", "optionId": option}}),
            );
        }
    }
}

#[test]
fn permission_round_trip_allow_once_reject_and_allow_always() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"responses": [
        shell_call("c1", "touch once.txt"), {"text": "made it"},
        shell_call("c2", "touch rejected.txt"), {"text": "not made"},
        shell_call("c3", "touch always.txt"), {"text": "made"},
        shell_call("c4", "touch always.txt"), {"text": "again, unasked"},
    ]});
    let mut c = Client::scripted(dir.path(), &script, &[]);
    c.initialize();
    let s = c.new_session(dir.path());
    let mut answers = vec!["allow_once", "reject_once", "allow_always"];

    let id = c.prompt(&s, "make once.txt");
    let r = c.until_response(id, grant(&mut answers));
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert!(dir.path().join("once.txt").exists());

    let start = c.log.len();
    let id = c.prompt(&s, "make rejected.txt");
    let r = c.until_response(id, grant(&mut answers));
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert!(!dir.path().join("rejected.txt").exists());
    let failed = c.log[start..].iter().any(|v| {
        v["params"]["update"]["sessionUpdate"] == "tool_call_update"
            && v["params"]["update"]["toolCallId"] == "c2"
            && v["params"]["update"]["status"] == "failed"
    });
    assert!(failed, "the rejected call ends failed");

    let id = c.prompt(&s, "make always.txt");
    c.until_response(id, grant(&mut answers));
    assert!(dir.path().join("always.txt").exists());
    assert!(answers.is_empty());

    // The same command again: no request (the rule is in the engine), and it runs.
    std::fs::remove_file(dir.path().join("always.txt")).unwrap();
    let start = c.log.len();
    let id = c.prompt(&s, "again");
    c.until_response(id, |_, v| {
        assert_ne!(
            v["method"], "session/request_permission",
            "asked again: {v}"
        )
    });
    assert!(dir.path().join("always.txt").exists());
    let kinds = update_kinds(&c.log[start..]);
    assert!(kinds.contains(&"tool_call".to_owned()), "{kinds:?}");
    eprintln!("schema-validated messages: {}", c.validated);
}

#[test]
fn tool_calls_plans_and_ask_user() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha").unwrap();
    let script = json!({"responses": [
        {"tool_calls": [{"id": "t1", "name": "todo_write", "arguments": {"todos": [
            {"content": "read a", "status": "in_progress"}, {"content": "answer", "status": "pending"}]}}]},
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"file_path": "a.txt"}}]},
        {"tool_calls": [{"id": "q1", "name": "ask_user", "arguments": {"question": "Which one?", "options": ["x", "y"]}}]},
        {"reasoning": "thinking hard", "text": "done"},
    ]});
    let mut c = Client::scripted(dir.path(), &script, &[]);
    c.initialize();
    let s = c.new_session(dir.path());
    let id = c.prompt(&s, "go");
    let mut asked = 0;
    let r = c.until_response(id, |c, v| {
        if v["method"] == "_agentao.cn/ask_user" {
            asked += 1;
            assert_eq!(v["params"]["question"], "Which one?");
            assert_eq!(v["params"]["options"], json!(["x", "y"]));
            c.answer(&v["id"], json!({"outcome": "answered", "text": "y please"}));
        }
    });
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert_eq!(asked, 1);
    let updates: Vec<&Value> = c
        .log
        .iter()
        .filter(|v| v["method"] == "session/update")
        .map(|v| &v["params"]["update"])
        .collect();
    let plan = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "plan")
        .expect("a plan");
    assert_eq!(
        plan["entries"],
        json!([{"content": "read a", "priority": "medium", "status": "in_progress"},
               {"content": "answer", "priority": "medium", "status": "pending"}])
    );
    let read = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "r1")
        .expect("read_file announced");
    assert_eq!(read["kind"], "read");
    assert_eq!(read["status"], "in_progress");
    let read_done = updates
        .iter()
        .find(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u["toolCallId"] == "r1"
                && u["content"][0]["content"]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("alpha"))
        })
        .expect("read_file result");
    assert_eq!(read_done["status"], "completed");
    let answered = updates.iter().any(|u| {
        u["toolCallId"] == "q1"
            && u["content"][0]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("y please"))
    });
    assert!(answered, "the ask_user answer reaches the tool result");
    assert!(updates
        .iter()
        .any(|u| u["sessionUpdate"] == "agent_thought_chunk"));
    eprintln!("schema-validated messages: {}", c.validated);
}

#[test]
fn cancel_ends_the_prompt_within_100ms() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"responses": [
        {"repeat": 3, "text": "x".repeat(400), "chunk_size": 1, "delay_ms": 20}]});
    let mut c = Client::scripted(dir.path(), &script, &[]);
    c.initialize();
    let s = c.new_session(dir.path());
    let mut figures = Vec::new();
    for _ in 0..3 {
        let id = c.prompt(&s, "talk");
        // Wait for streaming to start.
        loop {
            let v = c.recv();
            if v["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
                break;
            }
        }
        let t0 = Instant::now();
        c.notify("session/cancel", json!({"sessionId": s}));
        let r = c.until_response(id, |_, _| {});
        let took = t0.elapsed();
        assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
        figures.push(took);
    }
    eprintln!("session/cancel -> cancelled response: {figures:?}");
    // The contract is 100 ms; the bound leaves room for a loaded 2-core machine.
    assert!(
        figures.iter().all(|d| *d < Duration::from_millis(500)),
        "{figures:?}"
    );
}

#[test]
fn concurrent_sessions_stream_independently() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"responses": [
        {"repeat": 2, "text": "abcdefghij".repeat(5), "chunk_size": 2, "delay_ms": 2}]});
    let mut c = Client::scripted(dir.path(), &script, &[]);
    c.initialize();
    let sessions: Vec<String> = (0..4).map(|_| c.new_session(dir.path())).collect();
    let ids: Vec<u64> = sessions.iter().map(|s| c.prompt(s, "go")).collect();
    let mut done = std::collections::HashMap::new();
    let mut text: std::collections::HashMap<String, String> = Default::default();
    while done.len() < ids.len() {
        let v = c.recv();
        if v["method"] == "session/update" {
            let sid = v["params"]["sessionId"].as_str().unwrap().to_owned();
            assert!(sessions.contains(&sid));
            if let Some(t) = v["params"]["update"]["content"]["text"].as_str() {
                text.entry(sid).or_default().push_str(t);
            }
        } else if let Some(id) = v["id"].as_u64() {
            assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
            done.insert(id, ());
        }
    }
    for s in &sessions {
        assert_eq!(text[s], "abcdefghij".repeat(5));
    }
    // A second prompt on a busy session is refused, the first goes on.
    let a = c.prompt(&sessions[0], "one");
    let b = c.prompt(&sessions[0], "two");
    let rb = c.until_response(b, |_, _| {});
    assert_eq!(rb["error"]["code"], -32600, "{rb}");
    let ra = c.until_response(a, |_, _| {});
    assert!(ra["result"]["stopReason"].is_string());
}

#[test]
fn closed_stdin_mid_turn_shuts_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let script =
        json!({"responses": [{"text": "y".repeat(1000), "chunk_size": 1, "delay_ms": 20}]});
    let mut c = Client::scripted(dir.path(), &script, &[]);
    c.initialize();
    let s = c.new_session(dir.path());
    let id = c.prompt(&s, "talk");
    loop {
        let v = c.recv();
        if v["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    let t0 = Instant::now();
    c.close_stdin();
    assert!(c.output_ended(Duration::from_secs(10)), "the server exits");
    let status = c.child.wait().unwrap();
    eprintln!("stdin closed -> exit in {:?}", t0.elapsed());
    assert!(status.success(), "{status:?}");
    // The prompt was answered (cancelled) before the exit.
    let r = c
        .log
        .iter()
        .find(|v| v["id"] == json!(id))
        .expect("the prompt is answered");
    assert_eq!(r["result"]["stopReason"], "cancelled");

    // Stdin closed while a permission request is outstanding.
    let script = json!({"responses": [shell_call("c1", "touch never.txt"), {"text": "x"}]});
    let mut c = Client::scripted(dir.path(), &script, &[]);
    c.initialize();
    let s = c.new_session(dir.path());
    c.prompt(&s, "go");
    loop {
        if c.recv()["method"] == "session/request_permission" {
            break;
        }
    }
    c.close_stdin();
    assert!(c.output_ended(Duration::from_secs(10)));
    assert!(c.child.wait().unwrap().success());
    assert!(!dir.path().join("never.txt").exists());
}

#[test]
fn modes_models_and_load() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"model": "m1", "responses": [
        {"text": "first answer"},
        shell_call("p1", "touch plan.txt"), {"text": "denied in plan mode"},
    ]});
    let mut c = Client::scripted(dir.path(), &script, &[]);
    c.initialize();
    let s = c.new_session(dir.path());
    let id = c.prompt(&s, "question one");
    c.until_response(id, |_, _| {});

    let id = c.request(
        "session/set_mode",
        json!({"sessionId": s, "modeId": "plan"}),
    );
    let mut mode_update = false;
    let r = c.until_response(id, |_, v| {
        mode_update |= v["params"]["update"]["sessionUpdate"] == "current_mode_update"
            && v["params"]["update"]["currentModeId"] == "plan";
    });
    assert_eq!(r["result"]["modeId"], "plan");
    assert!(mode_update);
    // A client-side mode id is kept as is.
    let id = c.request(
        "session/set_mode",
        json!({"sessionId": s, "modeId": "code"}),
    );
    assert_eq!(c.until_response(id, |_, _| {})["result"]["modeId"], "code");
    let id = c.request(
        "session/set_mode",
        json!({"sessionId": s, "modeId": "plan"}),
    );
    c.until_response(id, |_, _| {});

    let id = c.request(
        "session/set_model",
        json!({"sessionId": s, "model": "m2", "maxTokens": 1000, "contextLength": 5000}),
    );
    let r = c.until_response(id, |_, v| panic!("{v}"));
    assert_eq!(
        r["result"],
        json!({"model": "m2", "contextLength": 5000, "maxTokens": 1000})
    );
    let id = c.request("session/set_model", json!({"sessionId": s, "maxTokens": 0}));
    assert_eq!(
        c.until_response(id, |_, v| panic!("{v}"))["error"]["code"],
        -32602
    );
    // contextLength is the library's window: one it refuses is refused, and nothing changes.
    let id = c.request(
        "session/set_model",
        json!({"sessionId": s, "contextLength": 100}),
    );
    let e = c.until_response(id, |_, v| panic!("{v}"));
    assert_eq!(e["error"]["code"], -32602, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_context_tokens"),
        "{e}"
    );
    let id = c.request(
        "_agentao.cn/set_model",
        json!({"sessionId": s, "model": "m3"}),
    );
    assert_eq!(
        c.until_response(id, |_, v| panic!("{v}"))["result"]["model"],
        "m3"
    );
    let id = c.request(
        "session/set_config_option",
        json!({"sessionId": s, "configId": "model", "value": "scripted/m4"}),
    );
    let r = c.until_response(id, |_, v| panic!("{v}"));
    assert_eq!(
        r["result"]["configOptions"][0]["currentValue"],
        "scripted/m4"
    );
    let id = c.request("session/list_models", json!({"sessionId": s}));
    assert_eq!(
        c.until_response(id, |_, v| panic!("{v}"))["result"]["models"][0]["id"],
        "m4"
    );

    // Model switches rebuild the agent (its script starts over) with the history and the mode:
    // in plan mode the shell call is denied without a permission request.
    let id = c.prompt(&s, "skip");
    c.until_response(id, |_, _| {});
    let id = c.prompt(&s, "make plan.txt");
    c.until_response(id, |_, v| {
        assert_ne!(v["method"], "session/request_permission")
    });
    assert!(!dir.path().join("plan.txt").exists());
    // Loading a live session in the same process replays up to its last prompt.
    let id = c.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir.path(), "mcpServers": []}),
    );
    let mut users = Vec::new();
    c.until_response(id, |_, v| {
        if v["params"]["update"]["sessionUpdate"] == "user_message_chunk" {
            users.push(v["params"]["update"]["content"]["text"].clone());
        }
    });
    assert_eq!(users.last(), Some(&json!("make plan.txt")), "{users:?}");
    drop(c);

    // A new server process restores the history and replays it.
    let mut c = Client::scripted(dir.path(), &json!({"responses": [{"text": "x"}]}), &[]);
    c.initialize();
    let id = c.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir.path(), "mcpServers": []}),
    );
    let mut replayed = Vec::new();
    let r = c.until_response(id, |_, v| {
        assert_eq!(v["params"]["sessionId"], json!(s));
        replayed.push(v["params"]["update"].clone());
    });
    assert!(r["result"]["configOptions"].is_array(), "{r}");
    assert_eq!(replayed[0]["sessionUpdate"], "user_message_chunk");
    assert_eq!(replayed[0]["content"]["text"], "question one");
    assert_eq!(replayed[1]["sessionUpdate"], "agent_message_chunk");
    assert_eq!(replayed[1]["content"]["text"], "first answer");
    // Ids that could name another file are refused.
    let id = c.request(
        "session/load",
        json!({"sessionId": "../../etc/passwd", "cwd": dir.path(), "mcpServers": []}),
    );
    assert_eq!(
        c.until_response(id, |_, v| panic!("{v}"))["error"]["code"],
        -32602
    );
    eprintln!("schema-validated messages: {}", c.validated);
}

#[test]
fn help_and_bad_flags() {
    let out = std::process::Command::new(common::bin())
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("--script") && text.contains("--api-key-env"));
    let out = std::process::Command::new(common::bin())
        .arg("--bogus")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown argument"));
    // A config the library refuses is reported at start (no API key for a server that is not
    // on loopback: a loopback one needs none).
    let out = std::process::Command::new(common::bin())
        .args([
            "--provider",
            "openai",
            "--base-url",
            "http://192.0.2.1:9/v1",
            "--model",
            "m",
        ])
        .env_remove("OPENAI_API_KEY")
        .env_remove("LLM_PROVIDER")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn config_file_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentao.json");
    std::fs::write(
        &config,
        json!({
            "llm": {"provider": "scripted", "script": {"model": "from-file",
                "responses": [shell_call("f1", "touch by-config.txt"), {"text": "ok"}]}},
            "permissions": {"mode": "full-access"},
            "max_iterations": 5
        })
        .to_string(),
    )
    .unwrap();
    let mut c = Client::spawn(&["--config", config.to_str().unwrap(), "--no-persist"]);
    let init = c.initialize();
    assert_eq!(init["agentCapabilities"]["loadSession"], false);
    let id = c.request(
        "session/new",
        json!({"cwd": dir.path(), "mcpServers": [{"name": "ignored", "command": "true"}]}),
    );
    let r = c.until_response(id, |_, v| panic!("{v}"));
    assert_eq!(r["result"]["modes"]["currentModeId"], "full-access");
    assert_eq!(
        r["result"]["configOptions"][0]["currentValue"],
        "scripted/from-file"
    );
    let s = r["result"]["sessionId"].as_str().unwrap().to_owned();
    // full-access from the file: the shell call runs without a permission request.
    let id = c.prompt(&s, "go");
    c.until_response(id, |_, v| {
        assert_ne!(v["method"], "session/request_permission")
    });
    assert!(dir.path().join("by-config.txt").exists());
    drop(c);

    // A flag overrides the file's mode.
    let mut c = Client::spawn(&[
        "--config",
        config.to_str().unwrap(),
        "--mode",
        "read-only",
        "--model",
        "flagged",
        "--no-persist",
    ]);
    c.initialize();
    let id = c.request("session/new", json!({"cwd": dir.path(), "mcpServers": []}));
    let r = c.until_response(id, |_, v| panic!("{v}"));
    assert_eq!(r["result"]["modes"]["currentModeId"], "read-only");
    assert_eq!(
        r["result"]["configOptions"][0]["currentValue"],
        "scripted/flagged"
    );
}

/// Answers every permission request with `option` and records the arguments it was asked for.
fn answer_all<'a>(
    option: &'static str,
    asked: &'a mut Vec<Value>,
) -> impl FnMut(&mut Client, Value) + 'a {
    move |c, v| {
        if v["method"] == "session/request_permission" {
            asked.push(v["params"]["toolCall"]["rawInput"].clone());
            c.answer(
                &v["id"],
                json!({"outcome": {"outcome": "selected", "optionId": option}}),
            );
        }
    }
}

#[test]
fn allow_always_on_a_malformed_call_allows_no_later_call() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let call = |id: &str, args: Value| json!({"tool_calls": [{"id": id, "name": "run_shell_command", "arguments": args}]});
    // Each pair: a call "always allowed", then a different one that must still be asked for.
    let cases = [
        // No string subject: the old rule allowed the whole tool.
        (
            json!({"command": ["ls"]}),
            json!({"command": "touch pwned1.txt"}),
        ),
        // The subject is not a string, another key is: the old rule was scoped to that key.
        (
            json!({"command": ["ls"], "path": "."}),
            json!({"command": "touch pwned2.txt", "path": "."}),
        ),
        // The same command in another directory is another call.
        (
            json!({"command": "touch pwned3.txt"}),
            json!({"command": "touch pwned3.txt", "working_directory": "sub"}),
        ),
    ];
    for (n, (first, second)) in cases.into_iter().enumerate() {
        let script = json!({"responses": [
            call("a", first.clone()), {"text": "first done"},
            call("b", second.clone()), {"text": "second done"},
        ]});
        let mut c = Client::scripted(dir.path(), &script, &["--no-persist"]);
        c.initialize();
        let s = c.new_session(dir.path());
        let mut asked = Vec::new();
        let id = c.prompt(&s, "first");
        c.until_response(id, answer_all("allow_always", &mut asked));
        assert_eq!(asked, [first], "case {n}");
        // A call with no scope to remember is not offered "always allow".
        let offered: Vec<Value> = c
            .log
            .iter()
            .filter(|v| v["method"] == "session/request_permission")
            .flat_map(|v| v["params"]["options"].as_array().unwrap().clone())
            .map(|o| o["optionId"].clone())
            .collect();
        let always = n == 2;
        assert_eq!(
            offered.contains(&json!("allow_always")),
            always,
            "case {n}: {offered:?}"
        );
        let id = c.prompt(&s, "second");
        c.until_response(id, answer_all("reject_once", &mut asked));
        assert_eq!(asked.len(), 2, "case {n}: the second call ran unasked");
        assert_eq!(asked[1], second, "case {n}");
        for f in ["pwned1.txt", "pwned2.txt", "sub/pwned3.txt"] {
            assert!(!dir.path().join(f).exists(), "case {n}: {f} was made");
        }
    }
}

#[test]
fn model_server_failures_are_reported_not_silent() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha").unwrap();
    let read = json!({"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"file_path": "a.txt"}}]});
    let script = json!({"responses": [
        {"fault": {"type": "http_error", "status": 400, "message": "bad things"}},
        {"fault": {"type": "in_stream_error", "after_events": 1, "message": "stream broke"}},
        read.clone(), read.clone(), read.clone(), read,
        {"text": "cut sho", "finish_reason": "length"},
    ]});
    let mut c = Client::scripted(dir.path(), &script, &["--no-persist"]);
    c.initialize();
    let s = c.new_session(dir.path());
    let agent_text = |log: &[Value]| -> String {
        log.iter()
            .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|v| v["params"]["update"]["content"]["text"].as_str())
            .collect()
    };
    for needle in ["bad things", "stream broke"] {
        let start = c.log.len();
        let id = c.prompt(&s, "go");
        let r = c.until_response(id, |_, _| {});
        assert_eq!(r["error"]["code"], -32603, "{needle}: {r}");
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("[LLM API error:") && message.contains(needle),
            "{r}"
        );
        let shown = agent_text(&c.log[start..]);
        assert!(shown.contains(needle), "the user sees why: {shown:?}");
    }
    // Three identical calls: the doom-loop guard ends the turn, and the user is told.
    let start = c.log.len();
    let id = c.prompt(&s, "loop");
    let r = c.until_response(id, |_, _| {});
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let shown = agent_text(&c.log[start..]);
    assert!(shown.contains("doom-loop"), "{shown:?}");
    // A partial answer already streamed is not sent twice.
    let start = c.log.len();
    let id = c.prompt(&s, "long");
    let r = c.until_response(id, |_, _| {});
    assert_eq!(r["result"]["stopReason"], "max_tokens", "{r}");
    assert_eq!(agent_text(&c.log[start..]), "cut sho");
}

#[test]
fn live_sessions_are_capped_and_can_be_closed() {
    let dir = tempfile::tempdir().unwrap();
    let new = |c: &mut Client| {
        let id = c.request("session/new", json!({"cwd": dir.path(), "mcpServers": []}));
        c.until_response(id, |_, v| panic!("{v}"))
    };
    // The default cap.
    let mut c = Client::scripted(dir.path(), &text_script("hi"), &["--no-persist"]);
    c.initialize();
    for _ in 0..256 {
        c.new_session(dir.path());
    }
    let r = new(&mut c);
    assert_eq!(r["error"]["code"], -32603, "the 257th session: {r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session/close"),
        "{r}"
    );
    drop(c);

    let mut c = Client::scripted(
        dir.path(),
        &text_script("hi"),
        &["--no-persist", "--max-sessions", "2"],
    );
    let init = c.initialize();
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["close"],
        json!({})
    );
    let a = c.new_session(dir.path());
    let _b = c.new_session(dir.path());
    assert_eq!(new(&mut c)["error"]["code"], -32603);
    let id = c.request("session/close", json!({"sessionId": a}));
    assert_eq!(
        c.until_response(id, |_, v| panic!("{v}"))["result"],
        json!({})
    );
    let id = c.prompt(&a, "closed?");
    assert_eq!(c.until_response(id, |_, _| {})["error"]["code"], -32602);
    let id = c.request("session/close", json!({"sessionId": a}));
    assert_eq!(
        c.until_response(id, |_, v| panic!("{v}"))["error"]["code"],
        -32602
    );
    assert!(new(&mut c)["result"]["sessionId"].is_string());
    assert_eq!(new(&mut c)["error"]["code"], -32603);

    let out = std::process::Command::new(common::bin())
        .args(["--max-sessions", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
