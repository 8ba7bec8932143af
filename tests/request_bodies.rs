//! The request bodies the library sends, byte for byte, against a golden file recorded before
//! the turn's history became typed: the ten recorded transcripts and mock
//! turns that reach every kind of history message (reasoning, truncated and refused calls,
//! guards, repaired names and arguments, a host-set history with foreign fields, a cancelled
//! turn's backfilled orphans, a max-iterations instruction).
//!
//! Only what changes from run to run is masked: the user message's date/time line and the
//! temporary workspace path. `AGENTAO_UPDATE_GOLDEN=1 cargo test --test request_bodies`
//! rewrites the file.

use std::path::Path;
use std::sync::{Arc, Mutex};

use agentao::agent::{Agent, TurnOptions};
use agentao::cancel::CancelToken;
use agentao::events::transport::{Answer, ConfirmRequest, Confirmation, Reply, Transport};
use mock_openai::MockServer;
use serde_json::{json, Value};

const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/golden/request_bodies.txt"
);

/// Answers confirmations and max-iteration prompts from a script; can cancel a turn instead of
/// answering a confirmation (the reply is kept, so the turn sees only the cancel).
#[derive(Default)]
struct Host {
    confirm: Option<bool>,
    max_iter: Mutex<Vec<Value>>,
    cancel_on_confirm: Mutex<Option<CancelToken>>,
    held: Mutex<Vec<Reply>>,
    /// Hears no event: the turn then renders nothing for `llm_call_delta` and the request's
    /// cache renders every message itself.
    deaf: bool,
}

impl Transport for Host {
    fn emit(&self, _event: &str) {}
    fn listens(&self) -> bool {
        !self.deaf
    }
    fn confirm_tool(&self, _req: ConfirmRequest, reply: Reply) {
        if let Some(t) = self.cancel_on_confirm.lock().unwrap().take() {
            self.held.lock().unwrap().push(reply);
            t.cancel("host stop");
            return;
        }
        let c = if self.confirm.unwrap_or(true) {
            Confirmation::Allow
        } else {
            Confirmation::Deny
        };
        reply.answer(Answer::Confirm(c)).unwrap();
    }
    fn on_max_iterations(&self, _count: u32, _pending: &str, reply: Reply) {
        let mut q = self.max_iter.lock().unwrap();
        let answer = if q.is_empty() {
            json!({"action": "stop"})
        } else {
            q.remove(0)
        };
        reply.answer(Answer::Json(answer.to_string())).unwrap();
    }
}

fn seed(dir: &Path) {
    std::fs::write(
        dir.join("notes.txt"),
        "Project notes\nline 2: the build uses make\nline 3: tests live in tests/\n",
    )
    .unwrap();
    std::fs::write(dir.join("data.csv"), "id,name\n1,alpha\n2,beta\n").unwrap();
    let lines: String = (1..=10).map(|i| format!("l{i}\n")).collect();
    std::fs::write(dir.join("lines.txt"), lines).unwrap();
    std::fs::create_dir(dir.join("src")).unwrap();
}

/// The body with the clock line and the workspace path masked.
fn normalize(body: &[u8], dir: &Path) -> String {
    let text = std::str::from_utf8(body).expect("bodies are UTF-8");
    let text = text.replace(&dir.display().to_string(), "<workspace>");
    let marker = "Current Date/Time: ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(i) = rest.find(marker) {
        out.push_str(&rest[..i + marker.len()]);
        out.push_str("<now>");
        rest = &rest[i + marker.len()..];
        let end = rest.find("\\n").unwrap_or(rest.len());
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// One scenario: its turns on one agent, then every request body the mock received.
struct Scenario {
    name: String,
    script: Value,
    extra_config: Value,
    host: Host,
    /// Installed with `set_history` before the first turn.
    history: Option<Value>,
    /// (message, max_iterations, cancel on the first confirmation).
    turns: Vec<(String, Option<u32>, bool)>,
}

impl Scenario {
    fn new(name: &str, script: Value) -> Self {
        Scenario {
            name: name.to_owned(),
            script,
            extra_config: json!({}),
            host: Host::default(),
            history: None,
            turns: vec![("Go.".to_owned(), None, false)],
        }
    }

    fn run(self) -> String {
        let server = MockServer::start(self.script).expect("mock starts");
        let dir = tempfile::tempdir().unwrap();
        seed(dir.path());
        let mut config = json!({"working_directory": dir.path(), "llm": {"provider": "openai",
            "base_url": server.base_url(), "api_key": "k", "model": "m", "max_attempts": 3,
            "retry_backoff_base_ms": 1, "retry_backoff_cap_ms": 5}});
        for (k, v) in self.extra_config.as_object().unwrap() {
            config[k] = v.clone();
        }
        let host = Arc::new(self.host);
        let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
        if let Some(h) = &self.history {
            agent.set_history_json(&h.to_string()).unwrap();
        }
        for (message, max_iterations, cancel) in &self.turns {
            let token = CancelToken::new();
            if *cancel {
                *host.cancel_on_confirm.lock().unwrap() = Some(token.clone());
            }
            let opts = TurnOptions {
                max_iterations: *max_iterations,
                cancel: Some(token),
                ..TurnOptions::default()
            };
            let _ = agent.run_blocking(message, opts);
        }
        let mut out = String::new();
        for (i, body) in server.raw_requests().iter().enumerate() {
            out.push_str(&format!("== {} #{}\n", self.name, i + 1));
            out.push_str(&normalize(body, dir.path()));
            out.push('\n');
        }
        out
    }
}

fn transcript(name: &str) -> Scenario {
    let path = format!(
        "{}/tests/conformance/transcripts/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let t: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let script = &t["model_script"];
    let mut llm = script["llm"].clone();
    llm.as_object_mut().unwrap().remove("exhausted");
    let mut s = Scenario::new(name, llm);
    s.host.confirm = script["host"]["confirm_tool"]
        .as_str()
        .map(|m| m == "approve");
    s.host.max_iter = Mutex::new(
        script["host"]["on_max_iterations"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    s.turns = vec![(
        t["turns"][0]["user_message"].as_str().unwrap().to_owned(),
        script["turn"]["max_iterations"].as_u64().map(|m| m as u32),
        false,
    )];
    s
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

fn scenarios() -> Vec<Scenario> {
    let mut all: Vec<Scenario> = [
        "empty_response",
        "llm_retry_429_500_then_success",
        "max_iterations_stop",
        "plain_stream_chunks",
        "read_file_then_answer",
        "reasoning_only",
        "two_tool_calls_one_message",
        "unknown_tool",
        "write_file_approved",
        "write_file_declined",
    ]
    .into_iter()
    .map(transcript)
    .collect();

    // Reasoning with calls, repaired names, arguments in Python literal syntax and fenced
    // JSON, unparseable arguments, an empty name, and a second turn on the same history.
    let mut s = Scenario::new(
        "repairs_and_guards",
        json!({"responses": [
            {"reasoning": "thinking about it", "text": "Let me look.", "tool_calls": [
                call("r1", "ReadFileTool", json!("{'file_path': 'notes.txt', 'limit': None}")),
                call("r2", "list-directory", json!("```json\n{\"directory_path\": \".\",}\n```")),
                call("r3", "read_file", json!("{\"file_path\": ")),
                call("r4", "", json!("{}")),
                call("r5", "launch_rockets", json!({"now": true}))]},
            {"text": "Done reading. é ✓ \u{1F600} \"quoted\" <tag>"},
            {"tool_calls": [call("s1", "read_file", json!({"file_path": "data.csv"}))]},
            {"reasoning": "only thoughts"},
        ]}),
    );
    s.turns.push(("And again.".to_owned(), None, false));
    all.push(s);

    // Tool calls cut off at the token limit three times in a row.
    let cut = json!({"text": "partial", "finish_reason": "length",
        "tool_calls": [call("t{i}", "read_file", json!("{\"file_path\": \"no"))], "repeat": 3});
    all.push(Scenario::new(
        "length_truncated_calls",
        json!({"responses": [cut]}),
    ));

    // The same call three times: the doom-loop guard.
    let same = json!({"repeat": 3, "tool_calls": [call("d{i}", "read_file",
        json!({"file_path": "notes.txt"})), call("e{i}", "list_directory", json!({}))]});
    all.push(Scenario::new(
        "doom_loop",
        json!({"responses": [same, {"text": "unreached"}]}),
    ));

    // Refused calls: read-only mode denies a write; the next turn's body carries the refusals.
    let mut s = Scenario::new(
        "read_only_denied",
        json!({"responses": [
            {"tool_calls": [call("w1", "write_file", json!({"file_path": "x.txt", "content": "x"})),
                call("w2", "read_file", json!({"file_path": "notes.txt"}))]},
            {"text": "refused"}, {"text": "second"}]}),
    );
    s.extra_config = json!({"permissions": {"mode": "read-only"}});
    s.turns.push(("Next.".to_owned(), None, false));
    all.push(s);

    // A host-set history with foreign fields, content arrays and nulls, a non-canonical
    // argument string and an unanswered call (backfilled before the turn).
    let mut s = Scenario::new(
        "host_history",
        json!({"responses": [{"text": "ok"}, {"text": "ok again"}]}),
    );
    s.history = Some(json!([
        {"role": "system", "content": "host system note"},
        {"role": "user", "content": [{"type": "text", "text": "array content"}], "name": "alice"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "h1", "type": "function", "function": {"name": "read_file", "arguments": "{\"file_path\":\"a\"}"}},
            {"id": "h2", "type": "function", "function": {"name": "glob", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "h1", "content": "alpha", "extra": {"k": [1, 2.5, false]}},
        {"role": "user", "content": "plain", "z_last": 1, "a_first": 2},
        {"role": "assistant", "content": "answer", "reasoning_content": "hmm"},
    ]));
    s.turns.push(("Once more.".to_owned(), None, false));
    all.push(s);

    // A turn cancelled while a confirmation is pending, then a turn on what it left.
    let mut s = Scenario::new(
        "cancelled_then_next",
        json!({"responses": [
            {"text": "Writing.", "tool_calls": [
                call("c1", "write_file", json!({"file_path": "y.txt", "content": "y"})),
                call("c2", "read_file", json!({"file_path": "notes.txt"}))]},
            {"text": "after cancel"}]}),
    );
    s.turns = vec![
        ("Write it.".to_owned(), None, true),
        ("What happened?".to_owned(), None, false),
    ];
    all.push(s);

    // Max iterations answered with a new instruction, then stop.
    let mut s = Scenario::new(
        "max_iterations_new_instruction",
        json!({"responses": [{"repeat": 3, "tool_calls": [call("m{i}", "read_file",
            json!({"file_path": "lines.txt", "offset": "{i}"}))]}, {"text": "end"}]}),
    );
    s.turns = vec![("Read.".to_owned(), Some(1), false)];
    s.host.max_iter = Mutex::new(vec![
        json!({"action": "new_instruction", "message": "Try harder."}),
        json!({"action": "continue"}),
    ]);
    all.push(s);
    all
}

/// Every scenario's request bodies, with a host that hears events or with one that does not.
fn all_bodies(deaf: bool) -> String {
    let mut got = String::new();
    for mut s in scenarios() {
        s.host.deaf = deaf;
        got.push_str(&s.run());
    }
    got
}

#[test]
fn request_bodies_match_the_golden_file() {
    let got = all_bodies(false);
    if std::env::var_os("AGENTAO_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(Path::new(GOLDEN).parent().unwrap()).unwrap();
        std::fs::write(GOLDEN, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(GOLDEN).expect("the golden file is committed");
    let (got_l, want_l): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
    for (i, (g, w)) in got_l.iter().zip(&want_l).enumerate() {
        assert_eq!(g, w, "line {} of the request bodies differs", i + 1);
    }
    assert_eq!(
        got_l.len(),
        want_l.len(),
        "the number of request body lines differs"
    );
    let n = want_l.iter().filter(|l| l.starts_with("== ")).count();
    println!("{n} request bodies identical to the golden file");
}

/// A host that hears no event gets the same bytes: the turn's messages are then rendered by
/// the request's cache alone, not handed over from the `llm_call_delta` rendering.
#[test]
fn a_host_that_does_not_listen_gets_the_same_request_bodies() {
    let (heard, unheard) = (all_bodies(false), all_bodies(true));
    assert!(heard.lines().filter(|l| l.starts_with("== ")).count() > 10);
    for (i, (h, u)) in heard.lines().zip(unheard.lines()).enumerate() {
        assert_eq!(
            h,
            u,
            "line {} differs between a listening and a deaf host",
            i + 1
        );
    }
    assert_eq!(heard.lines().count(), unheard.lines().count());
}
