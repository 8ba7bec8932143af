//! Execution: the planned calls of a batch run on blocking threads, or on the turn's task for
//! a tool that only awaits (a read-only batch in parallel, calls to one tool still one at a
//! time; anything else in call order), their
//! start, output and end turned into events in the order they happen, the `tool_result`
//! events, and the host bridge a running tool calls back through (`ask_user`).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::plan::Plan;
use super::tool_outcome::{Refusal, ToolOutcome};
use super::{cancel_reason, events, Turn};
use crate::cancel::CancelToken;
use crate::events::transport::{Answer, Reply, ReplyKind, Transport};
use crate::events::TurnEvent;
use crate::llm::message::ToolAnswer;
use crate::tools::output_mailbox::OutputMailbox;
use crate::tools::result_format::{self, content_hash, FormattedResult};
use crate::tools::{
    check_declared, check_declared_in, Approval, HostRequests, Tool, ToolContext, ToolError,
    ToolOrigin, ToolServices, ToolsConfig, RECENT_MESSAGES,
};

/// One call to run, on a blocking thread or the turn's task.
struct Job {
    index: usize,
    tool: Arc<dyn Tool>,
    args: Arc<Map<String, Value>>,
    call_id: Arc<str>,
    /// The arguments checked against the registry's schema (`tools::check_declared_in`).
    declared: Result<(), ToolError>,
    approval: Approval,
}

/// Where a call runs: a blocking thread calls `Tool::execute`, the turn's task awaits
/// `Tool::execute_async`.
#[derive(Clone, Copy)]
enum Where {
    BlockingThread,
    TurnTask,
}

/// A call that finished (on its thread or task): its index and outcome.
struct CallDone(usize, ToolOutcome);

/// One call running on the turn's task; it ends with the rest of its group.
type OnTaskCall = Pin<Box<dyn Future<Output = (CallDone, GroupOnTask)> + Send>>;

/// The calls running on the turn's task. Most batches are one call, polled as it is: a
/// `FuturesUnordered` for it cost three allocations and its wake-up bookkeeping an iteration.
#[derive(Default)]
enum CallsOnTask {
    #[default]
    Idle,
    One(OnTaskCall),
    Many(FuturesUnordered<OnTaskCall>),
}

impl CallsOnTask {
    fn extend(&mut self, call: Option<OnTaskCall>) {
        let Some(call) = call else { return };
        *self = match std::mem::take(self) {
            CallsOnTask::Idle => CallsOnTask::One(call),
            CallsOnTask::One(first) => CallsOnTask::Many([first, call].into_iter().collect()),
            CallsOnTask::Many(set) => {
                set.push(call);
                CallsOnTask::Many(set)
            }
        };
    }

    fn is_empty(&self) -> bool {
        match self {
            CallsOnTask::Idle => true,
            CallsOnTask::One(_) => false,
            CallsOnTask::Many(set) => set.is_empty(),
        }
    }

    /// The next call to end, in the order they end; `None` when none is running.
    async fn next(&mut self) -> Option<(CallDone, GroupOnTask)> {
        std::future::poll_fn(|cx| match self {
            CallsOnTask::Idle => Poll::Ready(None),
            CallsOnTask::One(call) => {
                let done = std::task::ready!(call.as_mut().poll(cx));
                *self = CallsOnTask::Idle;
                Poll::Ready(Some(done))
            }
            CallsOnTask::Many(set) => set.poll_next_unpin(cx),
        })
        .await
    }
}

/// A group's calls that run on the turn's task, one after another: [`Turn::pump`] starts the
/// next when one ends. (Its ends come back as the futures' outputs: a channel for them cost
/// the tool loop a few percent an iteration.)
struct GroupOnTask {
    env: CallEnv,
    jobs: std::vec::IntoIter<Job>,
}

impl GroupOnTask {
    fn next_call(mut self) -> Option<OnTaskCall> {
        let job = self.jobs.next()?;
        Some(Box::pin(async move {
            let done = self.env.run_on_task(job).await;
            (done, self)
        }))
    }
}

/// A group's calls on a blocking thread, one after another, each end sent as it comes. The
/// group's environment is let go of before the sender: the turn takes the sender's end as the
/// end of the group's calls, and with the environment's holds on the agent's services (the
/// host's capabilities among them) still on this thread, a turn that then ended and an agent
/// freed at once left the last hold, and so a capability's `userdata_free`, to this thread,
/// after `agentao_agent_free` had returned.
fn run_group_blocking(env: CallEnv, jobs: Vec<Job>, tx: mpsc::UnboundedSender<CallDone>) {
    for job in jobs {
        let _ = tx.send(env.run_blocking(job));
    }
    drop(env);
    drop(tx);
}

/// Calls being started together: the calls on the turn's task, and the channel the calls on
/// blocking threads send their ends to, made for the first of them.
#[derive(Default)]
struct Starting {
    tasks: CallsOnTask,
    ends: Option<(
        mpsc::UnboundedSender<CallDone>,
        mpsc::UnboundedReceiver<CallDone>,
    )>,
}

impl Starting {
    fn sender(&mut self) -> mpsc::UnboundedSender<CallDone> {
        self.ends
            .get_or_insert_with(mpsc::unbounded_channel)
            .0
            .clone()
    }

    /// The calls `calls`, all started.
    fn running(self, calls: &[usize]) -> Running<'_> {
        Running {
            calls,
            // The sender kept here is dropped: the channel closes when the threads are done.
            ends: self.ends.map(|(_, rx)| rx),
            tasks: self.tasks,
        }
    }
}

/// Calls started together: their indices in the batch, where the ends of those on blocking
/// threads come, and the calls on the turn's task.
struct Running<'c> {
    calls: &'c [usize],
    ends: Option<mpsc::UnboundedReceiver<CallDone>>,
    tasks: CallsOnTask,
}

/// How long a cancelled turn waits for its calls to end before it leaves them behind, as it
/// gives a host's shell executor ([`crate::tools::shell_run::GRACE`]).
const CANCEL_GRACE: Duration = crate::tools::shell_run::GRACE;

/// What a group's calls share, owned so a blocking thread or the turn's task can hold it.
struct CallEnv {
    workspace: PathBuf,
    settings: ToolsConfig,
    host: TurnHost,
    services: Arc<ToolServices>,
    mailbox: Arc<OutputMailbox>,
    cancel: CancelToken,
}

impl CallEnv {
    fn cancelled_before(&self) -> Option<ToolOutcome> {
        self.cancel.is_cancelled().then(|| ToolOutcome::Cancelled {
            text: format!("[Operation Cancelled] {}", cancel_reason(&self.cancel)),
            duration_ms: 0.0,
        })
    }

    fn run_blocking(&self, job: Job) -> CallDone {
        // Host code the call waits on (a deferred file-system answer) stops at the cancel.
        crate::cancel::with_current(&self.cancel, || {
            self.run(job, Where::BlockingThread)
                .now_or_never()
                .expect("a call on a blocking thread never awaits")
        })
    }

    async fn run_on_task(&self, job: Job) -> CallDone {
        self.run(job, Where::TurnTask).await
    }

    /// One call, its panic caught (a sync `execute` panics inside the guarded future too).
    async fn run(&self, job: Job, place: Where) -> CallDone {
        let i = job.index;
        if let Some(outcome) = self.cancelled_before() {
            return CallDone(i, outcome);
        }
        let t0 = Instant::now();
        let output = |chunk: &str| {
            self.mailbox.push(i, chunk);
        };
        let ctx = self.context(&job.call_id, &output, job.approval);
        let Job {
            tool,
            args,
            declared,
            ..
        } = &job;
        // The future is built inside the guarded one, so a panic building it is caught too.
        let run = AssertUnwindSafe(async {
            declared.clone()?;
            match place {
                Where::TurnTask => tool.execute_async(args, &ctx).await,
                Where::BlockingThread => tool.execute(args, &ctx),
            }
        })
        .catch_unwind()
        .await;
        CallDone(i, self.outcome(tool.name(), run, t0))
    }

    fn context<'a>(
        &'a self,
        call_id: &'a str,
        output: &'a (dyn Fn(&str) + Sync),
        approval: Approval,
    ) -> ToolContext<'a> {
        ToolContext {
            workspace: &self.workspace,
            call_id,
            cancel: &self.cancel,
            output,
            host: &self.host,
            settings: &self.settings,
            services: &self.services,
            approval,
        }
    }

    fn outcome(
        &self,
        tool: &str,
        run: std::thread::Result<Result<String, ToolError>>,
        t0: Instant,
    ) -> ToolOutcome {
        let duration_ms = t0.elapsed().as_secs_f64() * 1000.0;
        match run {
            Ok(Ok(text)) if self.cancel.is_cancelled() => {
                ToolOutcome::Cancelled { text, duration_ms }
            }
            Ok(Ok(text)) => ToolOutcome::Success { text, duration_ms },
            Ok(Err(e)) => ToolOutcome::Failed {
                text: format!("Error executing {tool}: {}", e.message),
                message: e.message.chars().take(200).collect(),
                error_type: Some(e.kind),
                duration_ms,
            },
            Err(_) => ToolOutcome::Failed {
                text: format!("Error executing {tool}: the tool panicked"),
                message: "the tool panicked".into(),
                error_type: Some("Panic".to_owned()),
                duration_ms,
            },
        }
    }
}

impl Turn<'_, '_> {
    /// The `tool_result` events, in call order, and the answers history records.
    pub(super) async fn report_results(
        &mut self,
        plans: Vec<Plan>,
        results: Vec<ToolOutcome>,
    ) -> Vec<ToolAnswer> {
        let mut answers = Vec::with_capacity(plans.len());
        for (p, res) in plans.into_iter().zip(results) {
            let raw = res.text(&p.name);
            let f = self.formatted(&p.name, &raw).await;
            if self.env.emitter.listens() {
                self.emit_event(&TurnEvent::ToolResult(events::ToolResult {
                    tool: &p.name,
                    call_id: &p.call_id,
                    content: &raw,
                    content_hash: &content_hash(&raw),
                    original_chars: f.original_chars,
                    saved_to_disk: f.saved_to_disk,
                    disk_path: f.disk_path.as_ref().map(|d| d.display().to_string()),
                    status: res.status(),
                    duration_ms: res.duration_ms(),
                    error: res.error(),
                }));
            }
            let model_text = if p.hook_context.is_empty() {
                f.model_text
            } else {
                Arc::from(format!("{}{}", f.model_text, p.hook_context))
            };
            answers.push(ToolAnswer::new(p.call_id, p.name, model_text));
        }
        answers
    }

    /// When a cancelled turn stops waiting for host code that has not returned (its calls,
    /// its results' copies): [`CANCEL_GRACE`] after the first wait that saw the cancel. One
    /// deadline a turn, so several stuck calls or copies share the grace.
    fn give_up_at(&self) -> tokio::time::Instant {
        *self
            .give_up_at
            .get_or_init(|| tokio::time::Instant::now() + CANCEL_GRACE)
    }

    /// Whether a cancelled turn is past [`Turn::give_up_at`] already.
    fn grace_over(&self) -> bool {
        self.give_up_at
            .get()
            .is_some_and(|at| tokio::time::Instant::now() >= *at)
    }

    /// A result made ready for history. Saving a long result's full copy through a host's
    /// file system is host code: it runs on a blocking thread, and a cancelled turn waits for
    /// it until [`Turn::give_up_at`] (the result then goes without its copy).
    async fn formatted(&self, tool: &str, raw: &str) -> FormattedResult {
        let services = self.env.tool_services;
        if !result_format::spills(raw) || services.fs().is_local_disk() {
            return services.format_result(tool, raw);
        }
        if self.grace_over() {
            // Host code the turn would not wait for: not started at all.
            return result_format::format_unsaved(raw);
        }
        let (on_thread, tool_name, text) = (services.clone(), tool.to_owned(), raw.to_owned());
        let cancel = self.cancel.clone();
        let saving = tokio::task::spawn_blocking(move || {
            crate::cancel::with_current(&cancel, || on_thread.format_result(&tool_name, &text))
        });
        let given_up = async {
            self.cancel.cancelled().await;
            tokio::time::sleep_until(self.give_up_at()).await;
        };
        tokio::select! {
            saved = saving => {
                if let Ok(f) = saved {
                    return f;
                }
            }
            _ = given_up => {}
        }
        result_format::format_unsaved(raw)
    }

    /// Executes the batch: read-only batches in parallel (calls to one tool still one at a
    /// time unless it is re-entrant), anything else in call order. Results come back in call
    /// order.
    pub(super) async fn execute(&mut self, plans: &[Plan]) -> Vec<ToolOutcome> {
        let mut results: Vec<Option<ToolOutcome>> = plans.iter().map(|_| None).collect();
        let runs = |p: &Plan| p.refusal.is_none();
        let mut running = plans.iter().filter(|p| runs(p));
        let parallel = running.clone().nth(1).is_some() && running.all(|p| p.tool.is_read_only());
        let mut started_at: Vec<DateTime<Utc>> = vec![DateTime::default(); plans.len()];
        let mailbox = Arc::new(OutputMailbox::new(plans.len()));
        if parallel {
            let runnable: Vec<usize> = (0..plans.len()).filter(|&i| runs(&plans[i])).collect();
            for i in 0..plans.len() {
                if let Some(refusal) = plans[i].refusal.clone() {
                    results[i] = Some(self.refuse(&plans[i], refusal).await);
                }
            }
            let mut groups: Vec<(Arc<str>, Vec<usize>)> = Vec::new();
            for &i in &runnable {
                let shared = !plans[i].tool.is_reentrant();
                match groups
                    .iter_mut()
                    .find(|(n, _)| shared && *n == plans[i].name)
                {
                    Some((_, g)) => g.push(i),
                    None => groups.push((plans[i].name.clone(), vec![i])),
                }
            }
            // Announced together, in call order, so the start events do not depend on how
            // fast the first call happens to finish.
            for &i in &runnable {
                self.call_started(plans, i, &mut started_at).await;
            }
            let mut starting = Starting::default();
            for (_, group) in &groups {
                self.spawn_calls(plans, group, &mailbox, &mut starting);
            }
            let running = starting.running(&runnable);
            self.pump(plans, &mailbox, running, &mut results, &mut started_at)
                .await;
        } else {
            for i in 0..plans.len() {
                if let Some(refusal) = plans[i].refusal.clone() {
                    results[i] = Some(self.refuse(&plans[i], refusal).await);
                    continue;
                }
                // Announced here rather than from the tool's thread: one thread wake-up less.
                self.call_started(plans, i, &mut started_at).await;
                let mut starting = Starting::default();
                self.spawn_calls(plans, std::slice::from_ref(&i), &mailbox, &mut starting);
                let running = starting.running(std::slice::from_ref(&i));
                self.pump(plans, &mailbox, running, &mut results, &mut started_at)
                    .await;
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| ToolOutcome::Failed {
                    text: "Error executing tool: the call did not finish".into(),
                    message: "the call did not finish".into(),
                    error_type: None,
                    duration_ms: 0.0,
                })
            })
            .collect()
    }

    /// A call that does not run: denied or declined.
    async fn refuse(&mut self, p: &Plan, refusal: Refusal) -> ToolOutcome {
        let outcome = ToolOutcome::Refused(refusal);
        self.tool_start(p, None).await;
        self.call_finished(p, Utc::now(), &outcome).await;
        outcome
    }

    /// Starts a group's calls (one tool; one after another): on the turn's task when the tool
    /// [`runs_on_task`](Tool::runs_on_task) (polled by [`Turn::pump`] through `tasks`), else on
    /// one blocking thread, whose calls send their ends to `starting`'s channel.
    fn spawn_calls(
        &self,
        plans: &[Plan],
        group: &[usize],
        mailbox: &Arc<OutputMailbox>,
        starting: &mut Starting,
    ) {
        let jobs: Vec<Job> = group
            .iter()
            .map(|&i| {
                let p = &plans[i];
                let declared = match self.env.tools.parameters(&p.name) {
                    Some(schema) => check_declared_in(p.tool.as_ref(), schema, &p.args),
                    None => check_declared(p.tool.as_ref(), &p.args),
                };
                Job {
                    index: i,
                    tool: p.tool.clone(),
                    args: p.args.clone(),
                    call_id: p.call_id.clone(),
                    declared,
                    approval: if crate::permissions::by_read_only_set(&p.decision) {
                        Approval::ReadOnlySet
                    } else {
                        Approval::Other
                    },
                }
            })
            .collect();
        let cancel = self.cancel.clone();
        let recent = if jobs.iter().any(|j| j.tool.origin() == ToolOrigin::Agent) {
            self.recent_messages()
        } else {
            Vec::new()
        };
        let env = CallEnv {
            workspace: self.env.workspace.to_path_buf(),
            settings: self.env.tools_config.clone(),
            host: TurnHost {
                transport: self.transport(),
                cancel: cancel.clone(),
                timeout: self.env.reply_timeout,
                handle: tokio::runtime::Handle::current(),
                recent,
            },
            services: self.env.tool_services.clone(),
            mailbox: mailbox.clone(),
            cancel,
        };
        if jobs
            .first()
            .is_some_and(|j| j.tool.runs_on_task(&env.services))
        {
            let group = GroupOnTask {
                env,
                jobs: jobs.into_iter(),
            };
            starting.tasks.extend(group.next_call());
            return;
        }
        let tx = starting.sender();
        drop(tokio::task::spawn_blocking(move || {
            run_group_blocking(env, jobs, tx)
        }));
    }

    /// `tool_start` of a planned call: `started_at` when it runs, `None` when it is refused.
    async fn tool_start(&mut self, p: &Plan, started_at: Option<DateTime<Utc>>) {
        self.report(&TurnEvent::ToolStart(events::ToolStart {
            tool: &p.name,
            args: &p.args,
            call_id: &p.call_id,
            child_task_id: None,
            started_at,
        }))
        .await;
    }

    async fn call_started(&mut self, plans: &[Plan], i: usize, started_at: &mut [DateTime<Utc>]) {
        // Kept as a time: written as text only by the host event's projection, which is not
        // made when nobody listens (that event's strings were a tenth of an iteration's
        // allocations).
        started_at[i] = Utc::now();
        self.tool_start(&plans[i], Some(started_at[i])).await;
    }

    /// Turns execution reports into events, in the order they happen. Streamed output is
    /// taken from the mailbox as it comes; a cancel discards what is queued, and the pump then
    /// only waits for the calls to finish (the tools see the same token and stop), until
    /// [`Turn::give_up_at`].
    async fn pump(
        &mut self,
        plans: &[Plan],
        mailbox: &OutputMailbox,
        running: Running<'_>,
        results: &mut [Option<ToolOutcome>],
        started_at: &mut [DateTime<Utc>],
    ) {
        let Running {
            calls,
            ends: mut rx,
            mut tasks,
        } = running;
        let mut discarding = false;
        // Set by a cancel: how long the calls still have to end.
        let mut grace: Option<Pin<Box<tokio::time::Sleep>>> = None;
        while rx.is_some() || !tasks.is_empty() {
            let CallDone(i, res) = tokio::select! {
                biased;
                // First: a call on the turn's task that ends at once (a small file read) needs
                // no cancellation or output waiter registered and taken off again. Polled
                // after a cancel too, since the calls watch the token and end.
                Some((done, group)) = tasks.next(), if !tasks.is_empty() => {
                    tasks.extend(group.next_call());
                    done
                }
                _ = self.cancel.cancelled(), if !discarding => {
                    mailbox.close();
                    discarding = true;
                    grace = Some(Box::pin(tokio::time::sleep_until(self.give_up_at())));
                    continue;
                }
                done = async { rx.as_mut().expect("checked").recv().await }, if rx.is_some() => match done {
                    Some(done) => done,
                    // The threads' calls have all ended.
                    None => {
                        rx = None;
                        continue;
                    }
                },
                _ = mailbox.pushed(), if !discarding => {
                    for i in 0..mailbox.calls() {
                        self.stream_output(plans, mailbox, i);
                    }
                    continue;
                }
                // Last, so an end that came in time is still taken. A call stuck in host code
                // (a file-system callback that never returns) is left behind: its thread ends
                // when the host's code returns, and what it answers then goes nowhere.
                _ = async { grace.as_mut().expect("set by the cancel").await }, if grace.is_some() => {
                    self.left_behind(plans, calls, results, started_at).await;
                    break;
                }
            };
            // Its output came before its end.
            self.stream_output(plans, mailbox, i);
            self.call_finished(&plans[i], started_at[i], &res).await;
            results[i] = Some(res);
        }
    }

    /// Ends the calls a cancelled turn stops waiting for: each is reported cancelled (its
    /// output and its end, should they come, go nowhere).
    async fn left_behind(
        &mut self,
        plans: &[Plan],
        calls: &[usize],
        results: &mut [Option<ToolOutcome>],
        started_at: &[DateTime<Utc>],
    ) {
        for &i in calls {
            if results[i].is_some() {
                continue;
            }
            let waited = (Utc::now() - started_at[i]).num_microseconds().unwrap_or(0);
            let outcome = ToolOutcome::Cancelled {
                text: format!(
                    "[Operation Cancelled] {} (the call did not end within {} s of the cancel and was left behind)",
                    cancel_reason(&self.cancel),
                    CANCEL_GRACE.as_secs()
                ),
                duration_ms: waited as f64 / 1000.0,
            };
            self.call_finished(&plans[i], started_at[i], &outcome).await;
            results[i] = Some(outcome);
        }
    }

    /// The last messages of the history and this turn, wire-shaped (a spawn tool's context).
    fn recent_messages(&self) -> Vec<Value> {
        let history = super::history::read(self.env.history);
        let all = history.iter().chain(&self.transcript);
        let skip = (history.len() + self.transcript.len()).saturating_sub(RECENT_MESSAGES);
        all.skip(skip)
            .filter_map(|m| serde_json::to_value(m).ok())
            .collect()
    }

    /// A `tool_output` event for each chunk waiting for call `i`; a skipped-output notice
    /// ends the last.
    fn stream_output(&mut self, plans: &[Plan], mailbox: &OutputMailbox, i: usize) {
        let Some(taken) = mailbox.take(i) else {
            return;
        };
        let notice = taken.skipped_notice();
        let mut chunks = taken.chunks;
        if let Some(notice) = notice {
            match chunks.last_mut() {
                Some(last) => last.push_str(&notice),
                None => chunks.push(notice),
            }
        }
        let p = &plans[i];
        for chunk in &chunks {
            self.emit_event(&TurnEvent::ToolOutput(events::ToolOutput {
                tool: &p.name,
                chunk,
                call_id: &p.call_id,
                child_task_id: None,
            }));
        }
    }

    /// `tool_complete` (and so the host's terminal `tool_lifecycle`) of a call that ran or
    /// was refused.
    async fn call_finished(&mut self, p: &Plan, started_at: DateTime<Utc>, res: &ToolOutcome) {
        self.report(&TurnEvent::ToolComplete(events::ToolComplete {
            tool: &p.name,
            call_id: &p.call_id,
            status: res.status(),
            duration_ms: res.duration_ms(),
            error: res.error(),
            child_task_id: None,
            started_at,
            error_type: res.error_type(),
        }))
        .await;
    }
}

/// Host requests made from inside a running tool (`ask_user`).
pub(super) struct TurnHost {
    transport: Arc<dyn Transport>,
    cancel: CancelToken,
    timeout: Option<Duration>,
    handle: tokio::runtime::Handle,
    recent: Vec<Value>,
}

impl HostRequests for TurnHost {
    fn recent_messages(&self) -> Vec<Value> {
        self.recent.clone()
    }

    fn ask_user(&self, question: &str, hints: &Value) -> Result<String, String> {
        if self.cancel.is_cancelled() {
            return Err(format!("cancelled: {}", cancel_reason(&self.cancel)));
        }
        let (reply, rx) = Reply::new(ReplyKind::AskUser);
        // We are on a blocking thread already: call the host here.
        self.transport.ask_user(question, &hints.to_string(), reply);
        let timeout = self.timeout;
        self.handle.block_on(async {
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Err(format!("cancelled: {}", cancel_reason(&self.cancel))),
                r = rx => match r {
                    Ok(Answer::Text(t)) => Ok(t),
                    Ok(Answer::Fail(m)) => Err(m),
                    Ok(_) => Err("ask_user answered with something other than text".into()),
                    Err(_) => Err("the host dropped the question".into()),
                },
                _ = async {
                    match timeout {
                        Some(t) => tokio::time::sleep(t).await,
                        None => std::future::pending().await,
                    }
                } => Err("the host did not answer in time".into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::transport::NullTransport;

    /// When the turn sees a blocking group's calls end, the group holds nothing of the agent
    /// any more. The environment is made slow to drop (a large recent history), so a sender
    /// dropped first would let the turn see the end while the services were still held.
    #[test]
    fn a_blocking_group_lets_go_of_the_services_before_its_end_is_seen() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let services = Arc::new(ToolServices::default());
        let cancel = CancelToken::new();
        let env = CallEnv {
            workspace: PathBuf::from("/"),
            settings: ToolsConfig::default(),
            host: TurnHost {
                transport: Arc::new(NullTransport::default()),
                cancel: cancel.clone(),
                timeout: None,
                handle: rt.handle().clone(),
                recent: vec![Value::Array(vec![Value::Null; 500_000])],
            },
            services: services.clone(),
            mailbox: Arc::new(OutputMailbox::new(0)),
            cancel,
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let group = std::thread::spawn(move || run_group_blocking(env, Vec::new(), tx));
        assert!(rx.blocking_recv().is_none(), "no calls, no ends");
        assert_eq!(
            Arc::strong_count(&services),
            1,
            "the group still held the services when its end was seen"
        );
        group.join().unwrap();
    }
}
