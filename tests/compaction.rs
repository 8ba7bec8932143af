//! Context compaction and the overflow recovery ladder, against `mock-openai`: a long session
//! against a small window (session mode), and each rung of the ladder (scripted mode).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use agentao::agent::{Agent, TurnOptions};
use agentao::tools::{Tool, ToolContext, ToolError};
use agentao::turn::{IncompleteReason, TurnStatus};
use mock_openai::{MockServer, SessionModel};
use serde_json::{json, Map, Value};

/// Records the compaction events and `turn_end`s (the rest, large, is skipped unparsed).
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<Value>>,
}

const KEPT: &[&str] = &[
    "compaction_started",
    "compaction_settled",
    "context_compressed",
    "session_summary_written",
    "llm_call_started",
    "llm_call_completed",
    "turn_end",
    "agent_start",
    "agent_end",
];

impl agentao::events::transport::Transport for Recorder {
    fn emit(&self, event: &str) {
        let head = &event[..event.len().min(48)];
        if KEPT.iter().any(|k| head.contains(&format!("\"{k}\""))) {
            self.events
                .lock()
                .unwrap()
                .push(serde_json::from_str(event).unwrap());
        }
    }
}

impl Recorder {
    fn of(&self, ty: &str) -> Vec<Value> {
        let e = self.events.lock().unwrap();
        e.iter().filter(|e| e["type"] == ty).cloned().collect()
    }
    fn types(&self) -> Vec<String> {
        let e = self.events.lock().unwrap();
        e.iter()
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// `fetch_blob`: answers `{"request": "turn T size=S …"}` with S bytes that start `blob T:`.
struct Blob;

fn blob(turn: u64, size: usize) -> String {
    let mut s = format!("blob {turn}: ");
    let filler = "lorem ipsum dolor sit amet ";
    while s.len() < size {
        s.push_str(filler);
    }
    s.truncate(size);
    s
}

fn field(text: &str, key: &str) -> u64 {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl Tool for Blob {
    fn name(&self) -> &str {
        "fetch_blob"
    }
    fn description(&self) -> &str {
        "returns a blob"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"request": {"type": "string"}}})
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn execute(&self, args: &Map<String, Value>, _: &ToolContext<'_>) -> Result<String, ToolError> {
        let r = args["request"].as_str().unwrap_or("");
        Ok(blob(field(r, "turn="), field(r, "size=") as usize))
    }
}

fn agent_at(base_url: &str, window: u64, dir: &std::path::Path) -> (Agent, Arc<Recorder>) {
    let config = json!({
        "working_directory": dir,
        "max_context_tokens": window,
        "llm": {"provider": "openai", "base_url": base_url, "api_key": "test", "model": "m",
                "retry_backoff_base_ms": 1, "retry_backoff_cap_ms": 5},
    });
    let rec = Arc::new(Recorder::default());
    let agent = Agent::new(&config.to_string(), Some(rec.clone())).unwrap();
    agent.add_tool(Arc::new(Blob), false).unwrap();
    (agent, rec)
}

const FACT: &str = "FACT: the staging database is db-staging-7731";

fn size_of_turn(t: u64) -> usize {
    2_000 + ((t * 7_919) % 18_001) as usize
}

/// Checks the history after a turn: at most one summary (first), then messages that are a
/// verbatim run of the session (user messages as sent, tool results whole or microcompacted
/// from the original), with every tool call answered right after its assistant message.
fn check_history(agent: &Agent, last_turn: u64) -> bool {
    let h: Vec<Value> = serde_json::from_str(&agent.history_json()).unwrap();
    let mut rest = &h[..];
    let summarized = rest
        .first()
        .and_then(|m| m["content"].as_str())
        .is_some_and(|c| c.starts_with("<context-summary>"));
    if summarized {
        let c = rest[0]["content"].as_str().unwrap();
        assert!(c.contains("--- END OF CONTEXT SUMMARY ---"));
        rest = &rest[1..];
    }
    assert_ne!(rest.first().map(|m| &m["role"]), Some(&json!("tool")));
    let mut turns = Vec::new();
    let mut open_calls: Vec<String> = Vec::new();
    for m in rest {
        let content = m["content"].as_str().unwrap_or("");
        match m["role"].as_str().unwrap() {
            "user" => {
                assert!(
                    open_calls.is_empty(),
                    "a user message inside a tool exchange"
                );
                let t = field(content, "turn=");
                let msg = format!("turn={t} size={}", size_of_turn(t));
                assert!(content.contains(&msg), "{content}");
                turns.push(t);
            }
            "assistant" => {
                assert!(open_calls.is_empty(), "unanswered calls");
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    open_calls.push(c["id"].as_str().unwrap().to_owned());
                }
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap();
                assert_eq!(
                    open_calls.first().map(String::as_str),
                    Some(id),
                    "split pair"
                );
                open_calls.remove(0);
                let n: u64 = content
                    .strip_prefix("blob ")
                    .and_then(|s| s.split(':').next())
                    .and_then(|s| s.parse().ok())
                    .expect("a blob");
                let original = blob(n, size_of_turn(n));
                if content != original {
                    let (head, tail) = content.split_once("\n\n[…").expect("clipped");
                    let tail = tail.split_once("…]\n\n").unwrap().1;
                    assert!(original.starts_with(head) && original.ends_with(tail));
                    assert!(content.chars().count() <= 3_000);
                }
            }
            r => panic!("role {r}"),
        }
    }
    assert!(open_calls.is_empty());
    // A contiguous run of the session's turns, up to the last.
    for w in turns.windows(2) {
        assert_eq!(w[1], w[0] + 1, "{turns:?}");
    }
    assert_eq!(turns.last(), Some(&last_turn));
    summarized
}

fn session_turns() -> u64 {
    std::env::var("AGENTAO_COMPACTION_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

#[test]
fn a_long_session_against_a_32k_window_completes_every_turn() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockServer::builder()
        .start_session(SessionModel {
            window: 32_000,
            ..SessionModel::default()
        })
        .unwrap();
    let (agent, rec) = agent_at(&mock.base_url(), 32_000, dir.path());
    let turns = session_turns();
    let mut summaries_before_400 = None;
    for t in 1..=turns {
        if t == 400 {
            summaries_before_400 = Some(mock.session_stats().summaries.lock().unwrap().len());
        }
        let mut msg = format!("turn={t} size={}", size_of_turn(t));
        if t == 3 {
            msg.push_str(&format!(" {FACT}"));
        }
        let o = agent.run_blocking(&msg, TurnOptions::default()).unwrap();
        assert_eq!(o.status, TurnStatus::Ok, "turn {t}: {}", o.text);
        assert_eq!(o.incomplete_reason, None, "turn {t}: {}", o.text);
        assert!(o.text.starts_with("Noted: blob"), "turn {t}: {}", o.text);
        if t % 10 == 0 || t == turns {
            check_history(&agent, t);
        }
    }
    let stats = mock.session_stats();
    let started = rec.of("compaction_started");
    let settled = rec.of("compaction_settled");
    assert!(started.len() >= 10, "{}", started.len());
    assert!(settled
        .iter()
        .any(|s| s["data"]["kind"] == "microcompact" && s["data"]["status"] == "success"));
    // Canonical order: started, settled, compressed, summary written.
    let all = rec.events.lock().unwrap().clone();
    let types = rec.types();
    for (i, ty) in types.iter().enumerate() {
        if ty == "compaction_started" {
            assert_eq!(types[i + 1], "compaction_settled");
            if all[i + 1]["data"]["status"] == "success" {
                assert_eq!(types[i + 2], "context_compressed");
                assert_eq!(types[i + 3], "session_summary_written");
                assert_eq!(types[i + 4], "llm_call_started");
            }
        }
    }
    for s in &settled {
        let d = &s["data"];
        assert_eq!(d["status"], "success", "{d}");
        assert!(d["post_tokens_history"].as_u64() < d["pre_tokens_history"].as_u64());
    }
    // Each request fit, or was recovered.
    assert_eq!(stats.overflow_errors.load(Ordering::SeqCst), 0);
    let summaries = stats.summaries.lock().unwrap();
    // Once the fact's turn was summarised, every later summary keeps it.
    let first = summaries
        .iter()
        .position(|s| s.contains(FACT))
        .expect("the fact was summarised");
    assert!(summaries[first..].iter().all(|s| s.contains(FACT)));
    if let Some(before) = summaries_before_400 {
        assert!(summaries.len() > before, "no compaction after turn 400");
        assert!(summaries[before].contains(FACT));
    }
    eprintln!(
        "{turns} turns: {} requests, {} full compactions, {} microcompactions, largest prompt {} tokens",
        mock.request_count(),
        started.len(),
        settled.iter().filter(|s| s["data"]["kind"] == "microcompact").count(),
        stats.largest_prompt.load(Ordering::SeqCst)
    );
}

/// A scripted server: each entry answers one request, in order.
fn scripted(responses: Value) -> MockServer {
    MockServer::start(json!({ "responses": responses })).unwrap()
}

fn overflow(window: u64) -> Value {
    json!({"fault": {"type": "http_error", "status": 400, "code": "context_length_exceeded",
        "message": format!("This model's maximum context length is {window} tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.")}})
}

fn too_large() -> Value {
    json!({"fault": {"type": "http_error", "status": 413, "message": "Request Entity Too Large"}})
}

/// Ten earlier exchanges (a user message, a call, its result, an answer each).
fn earlier_history() -> String {
    let mut h = Vec::new();
    for t in 0..10 {
        h.push(json!({"role": "user", "content": format!("request {t}")}));
        h.push(
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": format!("c{t}"),
            "type": "function", "function": {"name": "fetch_blob", "arguments": "{}"}}]}),
        );
        h.push(
            json!({"role": "tool", "tool_call_id": format!("c{t}"), "name": "fetch_blob",
            "content": format!("result {t}")}),
        );
        h.push(json!({"role": "assistant", "content": format!("answer {t}")}));
    }
    Value::Array(h).to_string()
}

fn ladder(responses: Value) -> (Agent, Arc<Recorder>, MockServer, agentao::turn::TurnOutcome) {
    let mock = scripted(responses);
    let dir = tempfile::tempdir().unwrap();
    let (agent, rec) = agent_at(&mock.base_url(), 200_000, dir.path());
    agent.set_history_json(&earlier_history()).unwrap();
    let o = agent.run_blocking("go on", TurnOptions::default()).unwrap();
    (agent, rec, mock, o)
}

/// The compaction events' `(type, reason, status)` in order.
fn transcript(rec: &Recorder) -> Vec<String> {
    let e = rec.events.lock().unwrap();
    e.iter()
        .filter(|e| e["type"] != "turn_end")
        .map(|e| {
            let d = &e["data"];
            match e["type"].as_str().unwrap() {
                "llm_call_completed" => {
                    format!("llm_call_completed {}", d["status"].as_str().unwrap())
                }
                "llm_call_started" => "llm_call_started".into(),
                "compaction_settled" => format!(
                    "compaction_settled {} {} {}",
                    d["kind"].as_str().unwrap(),
                    d["reason"].as_str().unwrap(),
                    d["status"].as_str().unwrap()
                ),
                "compaction_started" => format!(
                    "compaction_started {} {}",
                    d["kind"].as_str().unwrap(),
                    d["reason"].as_str().unwrap()
                ),
                t => t.to_owned(),
            }
        })
        .collect()
}

#[test]
fn an_overflow_learns_the_window_compacts_and_retries() {
    let (agent, rec, mock, o) =
        ladder(json!([overflow(8192), {"text": "S1 summary"}, {"text": "done"}]));
    assert_eq!(o.text, "done");
    assert_eq!(
        transcript(&rec),
        [
            "llm_call_started",
            "llm_call_completed error",
            "compaction_started full api_overflow",
            "compaction_settled full api_overflow success",
            "context_compressed",
            "session_summary_written",
            "llm_call_started",
            "llm_call_completed ok",
        ]
    );
    assert_eq!(mock.request_count(), 3);
    let usage: Value = serde_json::from_str(&agent.context_usage_json()).unwrap();
    assert_eq!(usage["window"], 8192);
    assert_eq!(usage["learned_window"], 8192);
    let h: Vec<Value> = serde_json::from_str(&agent.history_json()).unwrap();
    let first = h[0]["content"].as_str().unwrap();
    assert!(first.contains("S1 summary") && first.contains("--- END OF CONTEXT SUMMARY ---"));
    // The summarizer saw the earlier exchanges, not the tools.
    let summary_req = &mock.requests()[1];
    assert!(summary_req.get("tools").is_none());
    let input = summary_req["messages"][1]["content"].as_str().unwrap();
    assert!(input.contains("[user]: request 0"), "{input}");
}

#[test]
fn still_too_long_after_compaction_compacts_to_the_last_exchange() {
    let (_agent, rec, mock, o) = ladder(json!([
        overflow(8192), {"text": "S1"}, overflow(8192), {"text": "S2"}, {"text": "done"}
    ]));
    assert_eq!(o.text, "done");
    let t = transcript(&rec);
    assert!(
        t.contains(&"compaction_started minimal api_overflow_after_compression".to_owned()),
        "{t:?}"
    );
    assert_eq!(mock.request_count(), 5);
}

#[test]
fn a_third_overflow_ends_the_turn_with_an_llm_error() {
    let (_agent, rec, mock, o) = ladder(json!([
        overflow(8192), {"text": "S1"}, overflow(8192), {"text": "S2"}, overflow(8192), {"text": "never"}
    ]));
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::LlmError));
    assert!(
        o.text
            .starts_with("[LLM API error: Error code: 400 - This model's maximum context length"),
        "{}",
        o.text
    );
    assert_eq!(mock.request_count(), 5);
    assert_eq!(rec.of("compaction_started").len(), 2);
}

#[test]
fn a_bare_413_compacts_once_and_retries_once() {
    let (_agent, rec, _mock, o) = ladder(json!([too_large(), {"text": "S"}, {"text": "done"}]));
    assert_eq!(o.text, "done");
    assert!(
        transcript(&rec).contains(&"compaction_settled full payload_too_large success".to_owned())
    );

    let (_agent, rec, mock, o) =
        ladder(json!([too_large(), {"text": "S"}, too_large(), {"text": "never"}]));
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::LlmError));
    assert!(
        o.text.starts_with("[LLM API error: Error code: 413"),
        "{}",
        o.text
    );
    assert_eq!(mock.request_count(), 3);
    assert_eq!(rec.of("compaction_started").len(), 1);
}

#[test]
fn a_failed_summary_returns_the_provider_error() {
    let fail = json!({"fault": {"type": "http_error", "status": 400, "message": "no"}});
    let (_agent, rec, mock, o) = ladder(json!([overflow(8192), fail, {"text": "never"}]));
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::LlmError));
    assert_eq!(mock.request_count(), 2);
    let s = rec.of("compaction_settled");
    assert_eq!(s[0]["data"]["status"], "failed");
    assert!(rec.of("context_compressed").is_empty());
}

#[test]
fn the_breaker_stops_automatic_compaction_after_three_failures() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockServer::builder()
        .start_session(SessionModel {
            window: 1_000_000,
            failing_summaries: 1_000,
            ..SessionModel::default()
        })
        .unwrap();
    let (agent, rec) = agent_at(&mock.base_url(), 4_000, dir.path());
    for t in 1..=8 {
        let o = agent
            .run_blocking(&format!("turn={t} size=6000"), TurnOptions::default())
            .unwrap();
        assert_eq!(o.status, TurnStatus::Ok);
    }
    let started = rec.of("compaction_started");
    assert_eq!(started.len(), 3, "{started:?}");
    assert!(rec
        .of("compaction_settled")
        .iter()
        .all(|s| s["data"]["status"] == "failed"));
    let usage: Value = serde_json::from_str(&agent.context_usage_json()).unwrap();
    assert_eq!(usage["breaker_open"], true);
    assert_eq!(usage["consecutive_failures"], 3);
    // A new history closes it.
    agent.set_history_json("[]").unwrap();
    let usage: Value = serde_json::from_str(&agent.context_usage_json()).unwrap();
    assert_eq!(usage["breaker_open"], false);
}

#[test]
fn compaction_on_demand_between_turns() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockServer::builder()
        .start_session(SessionModel::default())
        .unwrap();
    let (agent, rec) = agent_at(&mock.base_url(), 200_000, dir.path());
    for t in 1..=4 {
        agent
            .run_blocking(&format!("turn={t} size=2000"), TurnOptions::default())
            .unwrap();
    }
    let r = agent.compact("host_asked", None).unwrap();
    assert_eq!(r.status.as_str(), "success");
    assert_eq!(r.pre_msgs, 16);
    assert!(r.post_msgs < 16);
    let s = rec.of("compaction_started");
    assert_eq!(s[0]["data"]["trigger"], "manual");
    assert_eq!(s[0]["data"]["reason"], "host_asked");
    let written = rec.of("session_summary_written");
    assert_eq!(written[0]["data"]["session_id"], agent.session_id());
    assert!(written[0]["data"]["summary_size"].as_u64().unwrap() > 0);
    // Too short a history is skipped, without events.
    agent.set_history_json("[]").unwrap();
    let r = agent.compact("again", None).unwrap();
    assert_eq!(r.status.as_str(), "skipped");
    assert_eq!(rec.of("compaction_started").len(), 1);
    // The session goes on from the summary.
    let o = agent
        .run_blocking("turn=5 size=2000", TurnOptions::default())
        .unwrap();
    assert_eq!(o.status, TurnStatus::Ok);
}

// ---- the compaction controller ------------------------------------------------------------

use agentao::events::transport::{Answer, CompactionDecision, Reply};
use agentao::turn::compaction::controller::{CompactionController, CompactionFacts};
use agentao::turn::compaction::{Kind, Trigger};

/// How the test controller answers.
#[derive(Clone)]
enum Decide {
    Allow,
    Cancel(&'static str),
    Summary(&'static str),
    Fail(&'static str),
    /// Drops the reply unanswered.
    Drop,
    /// Keeps the reply and never answers.
    Hold,
    /// Answers as the inner one from another thread, after a pause.
    Later(Box<Decide>),
}

#[derive(Default)]
struct Controller {
    decide: Mutex<Option<Decide>>,
    seen: Mutex<Vec<CompactionFacts>>,
    held: Mutex<Vec<Reply>>,
    threads: Mutex<Vec<std::thread::ThreadId>>,
}

impl Controller {
    fn new(d: Decide) -> Arc<Self> {
        let c = Controller::default();
        *c.decide.lock().unwrap() = Some(d);
        Arc::new(c)
    }
    fn seen(&self) -> Vec<CompactionFacts> {
        self.seen.lock().unwrap().clone()
    }
}

fn answer(d: Decide, reply: Reply, held: &Mutex<Vec<Reply>>) {
    let answer = match d {
        Decide::Allow => Answer::Compaction(CompactionDecision::Allow),
        Decide::Cancel(why) => Answer::Compaction(CompactionDecision::Cancel(Some(why.to_owned()))),
        Decide::Summary(s) => Answer::Compaction(CompactionDecision::Summary(s.to_owned())),
        Decide::Fail(m) => Answer::Fail(m.to_owned()),
        Decide::Drop => return drop(reply),
        Decide::Hold => return held.lock().unwrap().push(reply),
        Decide::Later(_) => unreachable!(),
    };
    reply.answer(answer).unwrap();
}

impl CompactionController for Controller {
    fn decide(&self, facts: CompactionFacts, reply: Reply) {
        self.seen.lock().unwrap().push(facts);
        self.threads
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        match self.decide.lock().unwrap().clone().unwrap() {
            Decide::Later(inner) => {
                let t = std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    answer(*inner, reply, &Mutex::new(Vec::new()));
                });
                self.threads.lock().unwrap().push(t.thread().id());
            }
            d => answer(d, reply, &self.held),
        }
    }
}

fn controlled(
    responses: Value,
    c: &Arc<Controller>,
    extra: Value,
) -> (Agent, Arc<Recorder>, MockServer, agentao::turn::TurnOutcome) {
    let mock = scripted(responses);
    let dir = tempfile::tempdir().unwrap();
    let mut config = json!({
        "working_directory": dir.path(),
        "llm": {"provider": "openai", "base_url": mock.base_url(), "api_key": "test", "model": "m",
                "retry_backoff_base_ms": 1, "retry_backoff_cap_ms": 5},
    });
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            config[k] = v;
        }
    }
    let rec = Arc::new(Recorder::default());
    let agent = Agent::new(&config.to_string(), Some(rec.clone())).unwrap();
    agent.add_tool(Arc::new(Blob), false).unwrap();
    agent
        .set_compaction_controller(Some(c.clone() as Arc<dyn CompactionController>))
        .unwrap();
    agent.set_history_json(&earlier_history()).unwrap();
    let o = agent.run_blocking("go on", TurnOptions::default()).unwrap();
    (agent, rec, mock, o)
}

const SUCCESS: [&str; 8] = [
    "llm_call_started",
    "llm_call_completed error",
    "compaction_started full api_overflow",
    "compaction_settled full api_overflow success",
    "context_compressed",
    "session_summary_written",
    "llm_call_started",
    "llm_call_completed ok",
];

#[test]
fn an_allowing_controller_is_told_the_facts_and_the_library_summarises() {
    let c = Controller::new(Decide::Allow);
    let (_agent, rec, mock, o) = controlled(
        json!([overflow(8192), {"text": "S1 summary"}, {"text": "done"}]),
        &c,
        Value::Null,
    );
    assert_eq!(o.text, "done");
    assert_eq!(transcript(&rec), SUCCESS);
    assert_eq!(mock.request_count(), 3);
    let seen = c.seen();
    assert_eq!(seen.len(), 1);
    let f = &seen[0];
    assert_eq!(
        (f.trigger, f.kind, f.reason.as_str()),
        (Trigger::Overflow, Kind::Full, "api_overflow")
    );
    assert_eq!(f.window, 8192);
    // The earlier 40 messages and the turn's own.
    assert_eq!(f.to_summarize + f.kept, 41);
    assert!(f.to_summarize >= 5 && f.kept >= 1);
    let summarized: Vec<Value> = serde_json::from_str(&f.messages_json).unwrap();
    assert_eq!(summarized.len(), f.to_summarize);
    assert_eq!(summarized[0]["content"], "request 0");
    assert!(f.estimated_tokens > 0);
    assert_eq!(f.child_task_id, None);
}

#[test]
fn a_controller_may_write_the_summary_itself() {
    let c = Controller::new(Decide::Summary("HOST SUMMARY: keep db-7731"));
    let (agent, rec, mock, o) =
        controlled(json!([overflow(8192), {"text": "done"}]), &c, Value::Null);
    assert_eq!(o.text, "done");
    // No summarizer call; the same events.
    assert_eq!(mock.request_count(), 2);
    assert_eq!(transcript(&rec), SUCCESS);
    let h: Vec<Value> = serde_json::from_str(&agent.history_json()).unwrap();
    let first = h[0]["content"].as_str().unwrap();
    assert!(first.starts_with("<context-summary>"), "{first}");
    assert!(first.contains("HOST SUMMARY: keep db-7731\n--- END OF CONTEXT SUMMARY ---"));
    let written = rec.of("session_summary_written");
    assert_eq!(
        written[0]["data"]["summary_size"],
        "HOST SUMMARY: keep db-7731".len()
    );
}

#[test]
fn a_cancelling_controller_ends_the_ladder_with_the_providers_error() {
    let c = Controller::new(Decide::Cancel("not now"));
    let (agent, rec, mock, o) =
        controlled(json!([overflow(8192), {"text": "never"}]), &c, Value::Null);
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::LlmError));
    assert_eq!(mock.request_count(), 1);
    let s = rec.of("compaction_settled");
    assert_eq!(s.len(), 1);
    assert_eq!(s[0]["data"]["status"], "cancelled");
    assert_eq!(
        s[0]["data"]["detail"],
        "cancelled by the compaction controller: not now"
    );
    assert!(rec.of("context_compressed").is_empty());
    // The history is as it was, with the turn appended.
    let h: Vec<Value> = serde_json::from_str(&agent.history_json()).unwrap();
    assert_eq!(h[0]["content"], "request 0");
}

#[test]
fn a_cancel_is_latched_for_the_turn_which_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockServer::builder()
        .start_session(SessionModel {
            window: 1_000_000,
            ..SessionModel::default()
        })
        .unwrap();
    let (agent, rec) = agent_at(&mock.base_url(), 4_000, dir.path());
    let c = Controller::new(Decide::Cancel("keep everything"));
    agent
        .set_compaction_controller(Some(c.clone() as Arc<dyn CompactionController>))
        .unwrap();
    for t in 1..=4 {
        let o = agent
            .run_blocking(&format!("turn={t} size=6000"), TurnOptions::default())
            .unwrap();
        assert_eq!(o.status, TurnStatus::Ok);
        assert!(o.text.starts_with("Noted: blob"), "{}", o.text);
    }
    // Asked once per turn over the threshold (turns 2 to 4: the first starts small, and its
    // second call is over it too), never twice in a turn: each cancel latched.
    let seen = c.seen();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|f| f.trigger == Trigger::Auto));
    let started = rec.of("compaction_started").len();
    assert_eq!(started, seen.len());
    assert!(seen.len() <= 4, "{}", seen.len());
    assert_eq!(
        mock.session_stats().summary_requests.load(Ordering::SeqCst),
        0
    );
    let usage: Value = serde_json::from_str(&agent.context_usage_json()).unwrap();
    assert_eq!(usage["compactions"], 0);
    // Microcompaction is never asked; removing the controller lets compaction happen again.
    agent.set_compaction_controller(None).unwrap();
    agent
        .run_blocking("turn=5 size=6000", TurnOptions::default())
        .unwrap();
    assert_eq!(c.seen().len(), seen.len());
    assert!(mock.session_stats().summary_requests.load(Ordering::SeqCst) >= 1);
}

#[test]
fn a_controller_answers_from_another_thread() {
    let c = Controller::new(Decide::Later(Box::new(Decide::Summary("LATE SUMMARY"))));
    let (agent, rec, mock, o) =
        controlled(json!([overflow(8192), {"text": "done"}]), &c, Value::Null);
    assert_eq!(o.text, "done");
    assert_eq!(mock.request_count(), 2);
    assert_eq!(transcript(&rec), SUCCESS);
    let threads = c.threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 2);
    assert_ne!(threads[0], threads[1]);
    assert!(agent.history_json().contains("LATE SUMMARY"));
}

#[test]
fn a_failing_controller_cancels_the_compaction() {
    for (decide, detail, extra) in [
        (
            Decide::Fail("boom"),
            "the compaction controller failed: boom",
            Value::Null,
        ),
        (
            Decide::Drop,
            "the compaction controller failed: the host released the request without answering",
            Value::Null,
        ),
        (
            Decide::Summary("   "),
            "the compaction controller failed: its summary is empty",
            Value::Null,
        ),
        (
            Decide::Hold,
            "the compaction controller failed: no answer within 200 ms",
            json!({"reply_timeout_ms": 200}),
        ),
    ] {
        let c = Controller::new(decide);
        let (_agent, rec, mock, o) =
            controlled(json!([overflow(8192), {"text": "never"}]), &c, extra);
        assert_eq!(
            o.incomplete_reason,
            Some(IncompleteReason::LlmError),
            "{detail}"
        );
        assert_eq!(mock.request_count(), 1);
        let s = rec.of("compaction_settled");
        assert_eq!(s[0]["data"]["status"], "cancelled");
        assert_eq!(s[0]["data"]["detail"], detail);
        assert!(rec.of("context_compressed").is_empty());
    }
}

#[test]
fn compaction_on_demand_asks_the_controller() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockServer::builder()
        .start_session(SessionModel::default())
        .unwrap();
    let (agent, rec) = agent_at(&mock.base_url(), 200_000, dir.path());
    for t in 1..=4 {
        agent
            .run_blocking(&format!("turn={t} size=2000"), TurnOptions::default())
            .unwrap();
    }
    let c = Controller::new(Decide::Cancel("no"));
    agent
        .set_compaction_controller(Some(c.clone() as Arc<dyn CompactionController>))
        .unwrap();
    let r = agent.compact("host_asked", None).unwrap();
    assert_eq!(r.status.as_str(), "cancelled");
    assert_eq!(
        r.detail.as_deref(),
        Some("cancelled by the compaction controller: no")
    );
    assert_eq!(r.post_msgs, 16);
    assert_eq!(c.seen()[0].trigger, Trigger::Manual);
    assert_eq!(c.seen()[0].reason, "host_asked");
    *c.decide.lock().unwrap() = Some(Decide::Summary("ON DEMAND"));
    let r = agent.compact("host_asked", None).unwrap();
    assert_eq!(r.status.as_str(), "success");
    assert!(agent.history_json().contains("ON DEMAND"));
    assert_eq!(
        rec.types()
            .iter()
            .filter(|t| t.starts_with("compaction_") || *t == "context_compressed")
            .count(),
        5
    );
    assert_eq!(
        mock.session_stats().summary_requests.load(Ordering::SeqCst),
        0
    );
}

// ---- sub-agents ---------------------------------------------------------------------------

#[test]
fn a_sub_agent_compacts_like_its_parent_and_its_events_reach_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    // The parent calls `agent_worker`; the child calls `fetch_blob` six times in its one turn,
    // 12,000 bytes each, against the parent's 16,000-token window.
    let mock = MockServer::builder()
        .start_session(SessionModel {
            window: 1_000_000,
            spawn: Some("agent_worker".into()),
            calls_per_turn: 6,
            ..SessionModel::default()
        })
        .unwrap();
    let config = json!({
        "working_directory": dir.path(),
        "max_context_tokens": 16_000,
        "llm": {"provider": "openai", "base_url": mock.base_url(), "api_key": "test", "model": "m",
                "retry_backoff_base_ms": 1, "retry_backoff_cap_ms": 5},
        "subagents": {"definitions": [{"name": "worker", "description": "Works.", "max_turns": 20}]},
    });
    let rec = Arc::new(Recorder::default());
    let agent = Agent::new(&config.to_string(), Some(rec.clone())).unwrap();
    agent.add_tool(Arc::new(Blob), false).unwrap();
    let c = Controller::new(Decide::Allow);
    agent
        .set_compaction_controller(Some(c.clone() as Arc<dyn CompactionController>))
        .unwrap();
    let o = agent
        .run_blocking("turn=1 size=12000", TurnOptions::default())
        .unwrap();
    assert_eq!(o.status, TurnStatus::Ok, "{}", o.text);

    let all = rec.events.lock().unwrap().clone();
    let types = rec.types();
    let start = types.iter().position(|t| t == "agent_start").unwrap();
    let end = types.iter().position(|t| t == "agent_end").unwrap();
    let child = all[start]["data"]["child_task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(all[end]["data"]["state"], "completed", "{}", all[end]);
    let compaction: Vec<usize> = (0..types.len())
        .filter(|&i| {
            types[i].starts_with("compaction_")
                || types[i] == "context_compressed"
                || types[i] == "session_summary_written"
        })
        .collect();
    assert!(!compaction.is_empty(), "{types:?}");
    // Every one is the child's, forwarded while it ran, stamped with its id.
    for &i in &compaction {
        assert!(start < i && i < end, "{types:?}");
        assert_eq!(
            all[i]["data"]["child_task_id"],
            child.as_str(),
            "{}",
            all[i]
        );
    }
    // The child's full compactions, in canonical order, each one a success.
    let mut full = 0;
    for (k, &i) in compaction.iter().enumerate() {
        if types[i] == "compaction_started" {
            full += 1;
            let next: Vec<&str> = compaction[k + 1..k + 4]
                .iter()
                .map(|&j| types[j].as_str())
                .collect();
            assert_eq!(
                next,
                [
                    "compaction_settled",
                    "context_compressed",
                    "session_summary_written"
                ]
            );
            assert_eq!(all[compaction[k + 1]]["data"]["status"], "success");
            assert_eq!(all[i]["data"]["trigger"], "auto");
        }
    }
    assert!(full >= 1);
    assert_eq!(
        mock.session_stats().summary_requests.load(Ordering::SeqCst),
        full
    );
    // The parent's controller was asked for each, told which child asks.
    let seen = c.seen();
    assert_eq!(seen.len() as u64, full);
    assert!(seen
        .iter()
        .all(|f| f.child_task_id.as_deref() == Some(child.as_str()) && f.window == 16_000));
    // The parent's own history was never compacted.
    let usage: Value = serde_json::from_str(&agent.context_usage_json()).unwrap();
    assert_eq!(usage["compactions"], 0);
    assert!(!agent.history_json().contains("<context-summary>"));
}
