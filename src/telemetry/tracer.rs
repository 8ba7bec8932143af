//! Spans from the typed events: one [`AgentTracer`] per agent (and per sub-agent run) reads
//! every [`TurnEvent`] its emitter sends and keeps the spans that are open.
//!
//! The tree (docs/observability.md): a turn span (`invoke_agent agentao`) under the host's
//! `traceparent`, or the root of a new trace; under it a span per model call attempt
//! (`chat <model>`: a retry ends the failed attempt's span and starts the next), one per tool
//! call (`execute_tool <tool>`, from its permission decision to its completion, with the
//! decision and the host's confirmation as events; an MCP tool's call has a `tools/call`
//! client span inside it), one per compaction (`agentao.compaction`); a sub-agent's run
//! (`invoke_agent <name>`) is a child of the tool call that spawned it, and the child's own
//! turn spans sit under it. Forwarded events (a foreground child's, stamped with
//! `child_task_id`) are the child tracer's to record, not the parent's.
//!
//! Prompts, tool arguments and results go into spans only with `capture_content`, after the
//! secret scan the tools' output gets, and capped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::export::{ExportClosing, Pipeline, TelemetryStats};
use super::metrics::Instrument;
use super::span::{attr, AttrValue, SpanKind, SpanRecord, SpanStatus};
use super::traceparent::{SpanContext, TraceId};
use crate::events::host::PermissionOutcome;
use crate::events::turn_event::{LlmCallStarted, ToolStatus};
use crate::events::{EventObserver, TurnEvent};

/// Captured text longer than this is cut (a span is not a transcript).
const MAX_CAPTURED_CHARS: usize = 4096;

/// Who the spans are about.
#[derive(Debug, Clone)]
pub struct TracerIdentity {
    pub session_id: String,
    /// `gen_ai.provider.name`.
    pub provider: &'static str,
    /// `gen_ai.agent.name`: `agentao`, or the sub-agent's name.
    pub agent_name: String,
    /// A sub-agent's run: its span (the parent's `invoke_agent <name>`) is the turn's, so the
    /// child's turn makes none of its own.
    pub nested: bool,
}

/// The model call attempt that is open, with what its successor after a retry repeats.
struct OpenCall {
    span: SpanRecord,
    facts: CallFacts,
}

/// What every attempt of one model call shares (a retry's span repeats it).
#[derive(Clone)]
struct CallFacts {
    model: String,
    attempt: u32,
    max_tokens: u32,
    temperature: Option<f64>,
    messages: usize,
    tools: usize,
}

impl CallFacts {
    fn of(d: &LlmCallStarted<'_>) -> Self {
        CallFacts {
            model: d.model.to_owned(),
            attempt: d.attempt,
            max_tokens: d.max_tokens,
            temperature: d.temperature,
            messages: d.n_messages,
            tools: d.tool_count,
        }
    }
}

/// A tool call's span, with whether the host was asked to confirm it.
struct OpenTool {
    span: SpanRecord,
    confirmation_asked: bool,
    mcp: Option<SpanRecord>,
}

#[derive(Default)]
struct TraceState {
    /// The host's span every turn belongs under (`agentao_agent_set_traceparent`), or, in a
    /// sub-agent's tracer, the sub-agent's span.
    agent_parent: Option<SpanContext>,
    /// The host's span for the next turn only.
    next_turn_parent: Option<SpanContext>,
    turn: Option<SpanRecord>,
    turn_iterations: u32,
    call: Option<OpenCall>,
    tools: HashMap<String, OpenTool>,
    /// Ended tool spans waiting for their `tool_result` (only with `capture_content`).
    awaiting_result: HashMap<String, SpanRecord>,
    subagents: HashMap<String, SpanRecord>,
    compaction: Option<SpanRecord>,
    last_trace_id: Option<TraceId>,
}

/// One agent's spans (see the module doc).
pub struct AgentTracer {
    pipeline: Arc<Pipeline>,
    identity: TracerIdentity,
    state: Mutex<TraceState>,
}

fn capped(text: &str) -> String {
    let (redacted, _) = crate::tools::secrets::scan_and_redact(text);
    if redacted.chars().count() <= MAX_CAPTURED_CHARS {
        return redacted;
    }
    let mut cut: String = redacted.chars().take(MAX_CAPTURED_CHARS).collect();
    cut.push_str("...");
    cut
}

/// Whether `tool` is an MCP server's (`mcp_<server>_<tool>`, the reference's naming).
fn is_mcp_tool(tool: &str) -> bool {
    tool.starts_with("mcp_")
}

impl AgentTracer {
    pub fn new(
        pipeline: Arc<Pipeline>,
        identity: TracerIdentity,
        parent: Option<SpanContext>,
    ) -> Arc<Self> {
        Arc::new(AgentTracer {
            pipeline,
            identity,
            state: Mutex::new(TraceState {
                agent_parent: parent,
                ..Default::default()
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TraceState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The host's span every later turn belongs under (`None`: each turn starts a trace).
    pub fn set_parent(&self, parent: Option<SpanContext>) {
        self.state().agent_parent = parent;
    }

    /// The host's span the next turn belongs under; used once.
    pub fn set_next_turn_parent(&self, parent: Option<SpanContext>) {
        self.state().next_turn_parent = parent;
    }

    /// The trace of the turn that runs, else of the last one.
    pub fn trace_id(&self) -> Option<TraceId> {
        let s = self.state();
        s.turn.as_ref().map(|t| t.trace_id).or(s.last_trace_id)
    }

    /// The context of the turn span that runs (what a host callback would continue).
    pub fn turn_context(&self) -> Option<SpanContext> {
        self.state().turn.as_ref().map(SpanRecord::context)
    }

    pub fn stats(&self) -> TelemetryStats {
        self.pipeline.stats()
    }

    /// What the agent's free waits on for the spans to leave (see [`ExportClosing`]).
    pub fn closing(&self) -> ExportClosing {
        self.pipeline.closing()
    }

    /// The tracer of a sub-agent's run: its spans sit under the run's span.
    pub fn child(&self, child_task_id: &str) -> Option<Arc<AgentTracer>> {
        let s = self.state();
        let run = s.subagents.get(child_task_id)?;
        let name = match run.attribute("gen_ai.agent.name") {
            Some(AttrValue::Str(n)) => n.clone(),
            _ => child_task_id.to_owned(),
        };
        let session_id = match run.attribute("agentao.subagent.child_session_id") {
            Some(AttrValue::Str(n)) => n.clone(),
            _ => String::new(),
        };
        Some(AgentTracer::new(
            self.pipeline.clone(),
            TracerIdentity {
                session_id,
                provider: self.identity.provider,
                agent_name: name,
                nested: true,
            },
            Some(run.context()),
        ))
    }

    fn metric(&self, instrument: Instrument, value: f64, key: Vec<(&'static str, String)>) {
        self.pipeline.metrics.record(instrument, value, key);
    }

    fn ship(&self, span: SpanRecord) {
        self.pipeline.offer(span.finish());
    }

    fn capture(&self) -> bool {
        self.pipeline.config.capture_content
    }

    /// The span new children of the turn go under: the turn's, else the agent's parent.
    fn turn_parent(s: &TraceState) -> Option<SpanContext> {
        s.turn
            .as_ref()
            .map(SpanRecord::context)
            .or_else(|| s.agent_parent.clone())
    }

    fn start_call(&self, s: &mut TraceState, facts: CallFacts, retry: u32) {
        let parent = Self::turn_parent(s);
        let mut span = SpanRecord::start(
            format!("chat {}", facts.model),
            SpanKind::Client,
            parent.as_ref(),
        );
        span.set("gen_ai.operation.name", "chat");
        span.set("gen_ai.provider.name", self.identity.provider);
        span.set("gen_ai.request.model", facts.model.as_str());
        span.set("gen_ai.request.max_tokens", facts.max_tokens);
        if let Some(t) = facts.temperature {
            span.set("gen_ai.request.temperature", t);
        }
        span.set("gen_ai.conversation.id", self.identity.session_id.as_str());
        span.set("agentao.llm.attempt", facts.attempt);
        span.set("agentao.llm.retry", retry);
        span.set("agentao.llm.messages", facts.messages);
        span.set("agentao.llm.tools", facts.tools);
        s.call = Some(OpenCall { span, facts });
    }

    fn tool_span<'s>(&self, s: &'s mut TraceState, tool: &str, call_id: &str) -> &'s mut OpenTool {
        let parent = Self::turn_parent(s);
        s.tools.entry(call_id.to_owned()).or_insert_with(|| {
            let mut span = SpanRecord::start(
                format!("execute_tool {tool}"),
                SpanKind::Internal,
                parent.as_ref(),
            );
            span.set("gen_ai.operation.name", "execute_tool");
            span.set("gen_ai.tool.name", tool);
            span.set("gen_ai.tool.call.id", call_id);
            OpenTool {
                span,
                confirmation_asked: false,
                mcp: None,
            }
        })
    }

    fn end_call(&self, s: &mut TraceState, status: SpanStatus) {
        if let Some(mut c) = s.call.take() {
            if c.span.status == SpanStatus::Unset {
                c.span.status = status;
            }
            self.ship(c.span);
        }
    }

    fn flush_awaiting(&self, s: &mut TraceState) {
        for (_, span) in s.awaiting_result.drain() {
            self.pipeline.offer(span);
        }
    }

    /// Ends whatever the turn left open (a cancelled turn's call, a tool that never completed).
    fn end_open(&self, s: &mut TraceState, why: &str) {
        self.end_call(s, SpanStatus::Error(why.to_owned()));
        for (_, mut t) in s.tools.drain() {
            if let Some(mut mcp) = t.mcp.take() {
                mcp.fail(why);
                self.ship(mcp);
            }
            t.span.fail(why);
            self.ship(t.span);
        }
        self.flush_awaiting(s);
        if let Some(mut c) = s.compaction.take() {
            c.fail(why);
            self.ship(c);
        }
    }

    fn on_event(&self, event: &TurnEvent<'_>) {
        let mut guard = self.state();
        let s = &mut *guard;
        match event {
            TurnEvent::TurnBegin { user_message } => {
                if let Some(open) = s.turn.take() {
                    self.end_open(s, "superseded by a new turn");
                    self.ship(open);
                }
                s.turn_iterations = 0;
                if self.identity.nested {
                    return;
                }
                let parent = s.next_turn_parent.take().or_else(|| s.agent_parent.clone());
                let mut span = SpanRecord::start(
                    format!("invoke_agent {}", self.identity.agent_name),
                    SpanKind::Internal,
                    parent.as_ref(),
                );
                span.set("gen_ai.operation.name", "invoke_agent");
                span.set("gen_ai.agent.name", self.identity.agent_name.as_str());
                span.set("gen_ai.provider.name", self.identity.provider);
                span.set("gen_ai.conversation.id", self.identity.session_id.as_str());
                if self.capture() {
                    span.set("agentao.turn.user_message", capped(user_message));
                }
                s.last_trace_id = Some(span.trace_id);
                s.turn = Some(span);
            }
            TurnEvent::TurnStart(d) if d.child_task_id.is_none() && !d.display_reset => {
                s.turn_iterations += 1;
            }
            TurnEvent::LlmCallStarted(d) => {
                self.end_call(s, SpanStatus::Error("superseded".into()));
                self.flush_awaiting(s);
                self.start_call(s, CallFacts::of(d), 0);
            }
            TurnEvent::LlmRetry(d) => {
                if let Some(mut c) = s.call.take() {
                    c.span.set("error.type", "retry");
                    c.span.fail(d.reason);
                    let duration = c.span.start.elapsed().unwrap_or_default().as_secs_f64();
                    self.metric(
                        Instrument::OperationDuration,
                        duration,
                        vec![
                            ("gen_ai.operation.name", "chat".into()),
                            ("gen_ai.provider.name", self.identity.provider.into()),
                            ("gen_ai.request.model", c.facts.model.clone()),
                            ("error.type", "retry".into()),
                        ],
                    );
                    self.ship(c.span);
                    self.start_call(s, c.facts, d.retry);
                }
                if let Some(turn) = s.turn.as_mut() {
                    turn.event(
                        "agentao.llm.retry",
                        vec![
                            attr("agentao.llm.retry", d.retry),
                            attr("agentao.llm.max_retries", d.max_retries),
                            attr("agentao.llm.retry_delay_s", d.delay_s),
                            attr("agentao.llm.retry_reason", d.reason),
                        ],
                    );
                }
            }
            TurnEvent::LlmCallCompleted(d) => {
                if let Some(mut c) = s.call.take() {
                    let span = &mut c.span;
                    if let Some(n) = d.prompt_tokens {
                        span.set("gen_ai.usage.input_tokens", n);
                    }
                    if let Some(n) = d.completion_tokens {
                        span.set("gen_ai.usage.output_tokens", n);
                    }
                    if let Some(n) = d.cache_read_tokens.filter(|n| *n > 0) {
                        span.set("gen_ai.usage.cache_read.input_tokens", n);
                    }
                    if let Some(n) = d.cache_creation_tokens.filter(|n| *n > 0) {
                        span.set("gen_ai.usage.cache_creation.input_tokens", n);
                    }
                    if let Some(r) = d.finish_reason {
                        span.set(
                            "gen_ai.response.finish_reasons",
                            AttrValue::StrList(vec![r.to_owned()]),
                        );
                    }
                    if let Some(ms) = d.first_token_ms {
                        span.set("agentao.llm.first_token_ms", ms);
                    }
                    let base = vec![
                        ("gen_ai.operation.name", "chat".to_owned()),
                        ("gen_ai.provider.name", self.identity.provider.to_owned()),
                        ("gen_ai.request.model", c.facts.model.clone()),
                    ];
                    if d.status == "error" {
                        let class = d.error_class.unwrap_or("error");
                        span.set("error.type", class);
                        span.fail(d.error_message.unwrap_or(class));
                        self.metric(
                            Instrument::Errors,
                            1.0,
                            vec![
                                ("error.type", class.to_owned()),
                                ("agentao.error.source", "llm".into()),
                            ],
                        );
                    }
                    let mut key = base.clone();
                    if d.status == "error" {
                        key.push(("error.type", d.error_class.unwrap_or("error").to_owned()));
                    }
                    self.metric(Instrument::OperationDuration, d.duration_ms / 1000.0, key);
                    for (kind, n) in [("input", d.prompt_tokens), ("output", d.completion_tokens)] {
                        if let Some(n) = n {
                            let mut key = base.clone();
                            key.push(("gen_ai.token.type", kind.to_owned()));
                            self.metric(Instrument::TokenUsage, n as f64, key);
                        }
                    }
                    self.ship(c.span);
                }
            }
            TurnEvent::PermissionDecision(d) => {
                let outcome = match d.outcome {
                    PermissionOutcome::Allow => "allow",
                    PermissionOutcome::Deny => "deny",
                    PermissionOutcome::Prompt => "prompt",
                };
                let t = self.tool_span(s, d.tool, d.call_id);
                t.span.set("agentao.permission.decision", outcome);
                t.span.set("agentao.permission.mode", d.mode);
                let mut attrs = vec![
                    attr("agentao.permission.decision", outcome),
                    attr("agentao.permission.mode", d.mode),
                    attr(
                        "agentao.permission.source",
                        AttrValue::StrList(d.loaded_sources.to_vec()),
                    ),
                    attr("agentao.permission.reason", d.reason),
                ];
                if let Some(rule) = d.matched_rule.and_then(crate::events::host::project_rule) {
                    attrs.push(attr("agentao.permission.rule", rule.to_string()));
                }
                t.span.event("agentao.permission.decision", attrs);
                self.metric(
                    Instrument::PermissionDecisions,
                    1.0,
                    vec![("agentao.permission.decision", outcome.to_owned())],
                );
            }
            TurnEvent::ToolConfirmation(d) if d.child_task_id.is_none() => {
                let t = self.tool_span(s, d.tool, d.call_id);
                t.confirmation_asked = true;
                t.span.event("agentao.confirmation.requested", vec![]);
            }
            TurnEvent::ToolStart(d) if d.child_task_id.is_none() => {
                let capture = self.capture();
                let args =
                    capture.then(|| capped(&serde_json::Value::Object(d.args.clone()).to_string()));
                let t = self.tool_span(s, d.tool, d.call_id);
                if t.confirmation_asked {
                    let answer = if d.started_at.is_some() {
                        "allow"
                    } else {
                        "deny"
                    };
                    t.span.event(
                        "agentao.confirmation.answered",
                        vec![attr("agentao.confirmation.outcome", answer)],
                    );
                }
                if d.started_at.is_none() {
                    t.span.set("agentao.tool.refused", true);
                }
                if let Some(args) = args {
                    t.span.set("gen_ai.tool.call.arguments", args);
                }
                if d.started_at.is_some() && is_mcp_tool(d.tool) {
                    let mut mcp = SpanRecord::start(
                        format!("tools/call {}", d.tool),
                        SpanKind::Client,
                        Some(&t.span.context()),
                    );
                    mcp.set("mcp.method.name", "tools/call");
                    mcp.set("gen_ai.tool.name", d.tool);
                    mcp.set("gen_ai.tool.call.id", d.call_id);
                    t.mcp = Some(mcp);
                }
            }
            TurnEvent::ToolComplete(d) if d.child_task_id.is_none() => {
                if let Some(mut t) = s.tools.remove(d.call_id) {
                    t.span.set("agentao.tool.status", d.status.as_str());
                    if d.status != ToolStatus::Ok {
                        let kind = d.error_type.unwrap_or(d.status.as_str());
                        t.span.set("error.type", kind);
                        t.span.fail(d.error.unwrap_or(kind));
                        self.metric(
                            Instrument::Errors,
                            1.0,
                            vec![
                                ("error.type", kind.to_owned()),
                                ("agentao.error.source", "tool".into()),
                            ],
                        );
                    }
                    if let Some(mut mcp) = t.mcp.take() {
                        mcp.status = t.span.status.clone();
                        self.ship(mcp);
                    }
                    self.metric(
                        Instrument::ToolDuration,
                        d.duration_ms / 1000.0,
                        vec![
                            ("gen_ai.tool.name", d.tool.to_owned()),
                            ("agentao.tool.status", d.status.as_str().to_owned()),
                        ],
                    );
                    if self.capture() {
                        s.awaiting_result
                            .insert(d.call_id.to_owned(), t.span.finish());
                    } else {
                        self.ship(t.span);
                    }
                }
            }
            TurnEvent::ToolResult(d) => {
                if let Some(mut span) = s.awaiting_result.remove(d.call_id) {
                    span.set("gen_ai.tool.call.result", capped(d.content));
                    self.pipeline.offer(span);
                }
            }
            TurnEvent::SubagentSpawned(d) => {
                let l = d.lineage;
                let parent = l
                    .parent_tool_call_id
                    .as_deref()
                    .and_then(|id| s.tools.get(id))
                    .map(|t| t.span.context())
                    .or_else(|| Self::turn_parent(s));
                let mut span = SpanRecord::start(
                    format!("invoke_agent {}", l.name),
                    SpanKind::Internal,
                    parent.as_ref(),
                );
                span.set("gen_ai.operation.name", "invoke_agent");
                span.set("gen_ai.agent.name", l.name.as_str());
                span.set("gen_ai.provider.name", self.identity.provider);
                span.set("gen_ai.conversation.id", l.child_session_id.as_str());
                span.set("agentao.subagent.child_task_id", l.child_task_id.as_str());
                span.set(
                    "agentao.subagent.child_session_id",
                    l.child_session_id.as_str(),
                );
                span.set(
                    "agentao.subagent.parent_session_id",
                    l.parent_session_id.as_str(),
                );
                if let Some(id) = &l.parent_tool_call_id {
                    span.set("agentao.subagent.parent_tool_call_id", id.as_str());
                }
                if let Some(id) = &l.parent_task_id {
                    span.set("agentao.subagent.parent_task_id", id.as_str());
                }
                span.set("agentao.subagent.background", !l.foreground());
                span.set("agentao.subagent.max_turns", d.max_turns);
                s.subagents.insert(l.child_task_id.clone(), span);
            }
            TurnEvent::SubagentEnded(d) => {
                if let Some(mut span) = s.subagents.remove(&d.lineage.child_task_id) {
                    span.set("agentao.subagent.state", d.state.as_str());
                    if let Some(st) = &d.stats {
                        span.set("agentao.subagent.turns", st.turns);
                        span.set("agentao.subagent.tool_calls", st.tool_calls);
                    }
                    if let Some(u) = &d.usage {
                        span.set("gen_ai.usage.input_tokens", u.prompt_tokens);
                        span.set("gen_ai.usage.output_tokens", u.completion_tokens);
                    }
                    if let Some(e) = d.error {
                        span.set("error.type", d.error_type.unwrap_or(d.state.as_str()));
                        span.fail(e);
                    }
                    self.ship(span);
                }
            }
            TurnEvent::CompactionStarted(d) if d.child_task_id.is_none() => {
                let parent = Self::turn_parent(s);
                let mut span = SpanRecord::start(
                    "agentao.compaction".into(),
                    SpanKind::Internal,
                    parent.as_ref(),
                );
                span.set("agentao.compaction.trigger", d.trigger);
                span.set("agentao.compaction.kind", d.kind);
                span.set("agentao.compaction.reason", d.reason);
                if let Some(old) = s.compaction.replace(span) {
                    self.ship(old);
                }
            }
            TurnEvent::CompactionSettled(d) if d.child_task_id.is_none() => {
                if let Some(mut span) = s.compaction.take() {
                    span.set("agentao.compaction.status", d.status);
                    span.set("agentao.compaction.pre_messages", d.pre_msgs);
                    span.set("agentao.compaction.post_messages", d.post_msgs);
                    span.set("agentao.compaction.pre_tokens", d.pre_tokens_history);
                    span.set("agentao.compaction.post_tokens", d.post_tokens_history);
                    if let Some(detail) = d.detail {
                        span.set("agentao.compaction.detail", detail);
                    }
                    self.ship(span);
                }
            }
            TurnEvent::TurnEnd(d) => {
                self.end_open(s, "the turn ended first");
                if let Some(mut span) = s.turn.take() {
                    span.set("agentao.turn.status", d.status);
                    span.set("agentao.turn.iterations", s.turn_iterations);
                    span.set("agentao.turn.tool_calls", d.tool_count);
                    if let Some(r) = d.incomplete_reason {
                        span.set("agentao.turn.incomplete_reason", r);
                    }
                    if d.status == "error" {
                        span.set("error.type", "turn_error");
                        span.fail(d.error.unwrap_or("error"));
                        self.metric(
                            Instrument::Errors,
                            1.0,
                            vec![
                                ("error.type", "turn_error".into()),
                                ("agentao.error.source", "turn".into()),
                            ],
                        );
                    }
                    if self.capture() {
                        span.set("agentao.turn.final_text", capped(d.final_text));
                    }
                    let duration = span.start.elapsed().unwrap_or_default().as_secs_f64();
                    self.metric(
                        Instrument::TurnDuration,
                        duration,
                        vec![("agentao.turn.status", d.status.to_owned())],
                    );
                    self.ship(span);
                }
            }
            _ => {}
        }
    }
}

impl EventObserver for AgentTracer {
    fn observe(&self, event: &TurnEvent<'_>) {
        // The text deltas are most of a turn's events and no span reads them.
        if matches!(
            event,
            TurnEvent::LlmText { .. } | TurnEvent::Thinking { .. } | TurnEvent::ToolOutput(_)
        ) {
            return;
        }
        self.on_event(event);
    }

    fn child(&self, child_task_id: &str) -> Option<Arc<dyn EventObserver>> {
        AgentTracer::child(self, child_task_id).map(|t| t as Arc<dyn EventObserver>)
    }
}

impl Drop for AgentTracer {
    /// An agent freed mid-turn (or a background run left open) still reports what it began.
    fn drop(&mut self) {
        let mut guard = self.state();
        let s = &mut *guard;
        self.end_open(s, "the agent was freed");
        let now = SystemTime::now();
        let mut rest: Vec<SpanRecord> = s.subagents.drain().map(|(_, v)| v).collect();
        rest.extend(s.turn.take());
        for mut span in rest {
            span.fail("the agent was freed");
            span.end = now;
            self.pipeline.offer(span);
        }
    }
}
