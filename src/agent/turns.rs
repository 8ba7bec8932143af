//! The turn entry points: the turn lock, a turn's options and result, starting a turn with a
//! completion, running one blocking, cancelling the running one.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::cancel::CancelToken;
use crate::panic_caught::PanicCaught;
use crate::tools::memory;
use crate::turn::{self, DeltaSink, TurnFailure, TurnOutcome};

use super::api::Agent;
use super::session::AgentCore;
use super::{lock, on_runtime_thread, runtime, AgentError};

/// Where a turn's completion runs.
#[derive(Clone, Copy)]
pub(crate) enum Completion {
    /// Host code: on a blocking thread, with the agent kept alive until it returns.
    Host,
    /// Code that only hands the result over: the library's to a waiting host thread (blocking
    /// chat, pull streams), or a host's that promised as much (`agentao_agent_run_handoff`).
    /// Inline on the worker that finished the turn (one thread wake-up less per turn), after
    /// the turn let go of the agent, so a host that frees the agent as soon as it has the
    /// result gets its `userdata_free` inside `agentao_agent_free`.
    Handoff,
}

/// Options of one turn.
#[derive(Default, Clone)]
pub struct TurnOptions {
    pub max_iterations: Option<u32>,
    /// The host's token, linked one way: cancelling it cancels the turn, never the reverse.
    pub cancel: Option<CancelToken>,
    /// Images sent with the message (checked by [`crate::llm::image::validate`] before the
    /// turn starts: a bad one is `InvalidArgument` and nothing is sent).
    pub images: Vec<crate::llm::image::ImageInput>,
}

/// The result of a finished turn, as handed to completions.
pub type TurnResult = Result<TurnOutcome, (AgentError, Option<TurnOutcome>)>;

/// What a turn's future gives: its outcome and failure, or the message of its panic.
type CaughtTurn = Result<(TurnOutcome, Option<TurnFailure>), String>;

/// A turn whose lock is taken, ready to run.
struct Turn<F> {
    run: F,
    token: CancelToken,
}

/// The result handed to completions, from what the turn's future gave.
fn turn_result(caught: CaughtTurn) -> TurnResult {
    match caught {
        Ok((outcome, None)) => Ok(outcome),
        Ok((outcome, Some(TurnFailure::Host(m)))) => Err((AgentError::HostError(m), Some(outcome))),
        Ok((outcome, Some(TurnFailure::Timeout(m)))) => {
            Err((AgentError::Timeout(m), Some(outcome)))
        }
        Err(panic) => Err((AgentError::Panic(panic), None)),
    }
}

/// Releases the turn lock when the turn (or its refusal path) ends, even by panic.
pub(super) struct TurnSlot {
    core: Arc<AgentCore>,
}

impl Drop for TurnSlot {
    fn drop(&mut self) {
        *lock(&self.core.active) = None;
        self.core.busy.store(false, Ordering::Release);
    }
}

impl Agent {
    /// Takes the turn lock without waiting and mints the turn's token.
    pub(super) fn begin(&self, opts: &TurnOptions) -> Result<(TurnSlot, CancelToken), AgentError> {
        if self
            .core
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(AgentError::TurnInProgress);
        }
        let slot = TurnSlot {
            core: self.core.clone(),
        };
        let token = CancelToken::new();
        if let Some(parent) = &opts.cancel {
            parent.link_child(&token);
        }
        *lock(&self.core.active) = Some(token.clone());
        Ok((slot, token))
    }

    /// Starts a turn on the runtime; `done` runs exactly once, on a blocking thread, with the
    /// outcome (or the error and whatever outcome there is). The turn keeps the agent (and so
    /// the transport) alive until `done` has returned, so a host completion never runs after
    /// (or during) the transport's `userdata_free`.
    pub fn start_turn(
        &self,
        message: String,
        opts: TurnOptions,
        deltas: DeltaSink,
        done: impl FnOnce(TurnResult) + Send + 'static,
    ) -> Result<CancelToken, AgentError> {
        self.spawn_turn(message, opts, deltas, Completion::Host, done)
    }

    /// [`Agent::start_turn`] with `done` run where `completion` says. One task runs the turn
    /// and its completion: a second task awaiting the first's `JoinHandle` cost a wake-up.
    pub(crate) fn spawn_turn(
        &self,
        message: String,
        opts: TurnOptions,
        deltas: DeltaSink,
        completion: Completion,
        done: impl FnOnce(TurnResult) + Send + 'static,
    ) -> Result<CancelToken, AgentError> {
        let rt = runtime()?;
        let turn = self.turn(message, &opts, deltas)?;
        let token = turn.token;
        let run = turn.run;
        match completion {
            // The turn let go of the agent before `run` gives its result.
            Completion::Handoff => drop(rt.spawn(async move { done(turn_result(run.await)) })),
            // Completions are host code: keep them off the workers, and keep the agent alive
            // until the host's completion has returned. Not awaited: the blocking thread's end
            // would wake a worker for nothing.
            Completion::Host => {
                let keep_alive = self.core.clone();
                drop(rt.spawn(async move {
                    let result = turn_result(run.await);
                    drop(tokio::task::spawn_blocking(move || {
                        done(result);
                        drop(keep_alive);
                    }));
                }));
            }
        }
        Ok(token)
    }

    /// Takes the turn lock and builds the turn: `run` runs it to its end (a panic in it
    /// caught), committing its transcript, and lets go of the lock and the agent before it
    /// gives its result.
    fn turn(
        &self,
        message: String,
        opts: &TurnOptions,
        deltas: DeltaSink,
    ) -> Result<Turn<impl Future<Output = CaughtTurn> + Send + 'static>, AgentError> {
        crate::llm::image::validate(&opts.images).map_err(AgentError::InvalidArgument)?;
        let (slot, token) = self.begin(opts)?;
        let core = self.core.clone();
        let images = opts.images.clone();
        let max_iterations = opts.max_iterations.unwrap_or(core.config.max_iterations);
        let turn_token = token.clone();
        // Boxed where it is made: the turn's state is kilobytes, and every move of an unboxed
        // future (into `Turn`, the task's future, tokio's task cell, the cell's finished
        // stage) copied all of it, on every turn.
        let run = PanicCaught::new(Box::pin(async move {
            let _slot = slot;
            let skills = core.turn_skills(&turn_token).await;
            let tools = core.turn_tools(&turn_token, skills.as_ref()).await;
            // The catalogue tells the model to call `activate_skill`: shown only with the tool.
            let skills_prompt = skills
                .as_ref()
                .filter(|_| tools.get(crate::skills::activate::NAME).is_some())
                .and_then(|l| core.skills_prompt(l));
            // The store is host code: asked off the async workers.
            let store = core.tool_services.memory();
            let memory = if store.may_block() {
                let (msg, cancel) = (message.clone(), turn_token.clone());
                tokio::task::spawn_blocking(move || {
                    crate::cancel::with_current(&cancel, || memory::view(store.as_ref(), &msg))
                })
                .await
                .unwrap_or_default()
            } else {
                memory::view(store.as_ref(), &message)
            };
            // The agent's own prompt is borrowed, with the digest it keeps across turns.
            let with_memory;
            let mut env = core.env(&tools);
            if let Some(prompt) = &skills_prompt {
                env.system_prompt = prompt;
            }
            if let Some(block) = &memory.stable_block {
                with_memory = turn::prompt::SystemPrompt::new(format!(
                    "{}\n\n{block}",
                    env.system_prompt.text()
                ));
                env.system_prompt = &with_memory;
            }
            env.recall = memory.recall.as_deref();
            env.images = &images;
            core.repair_history();
            let mut ended =
                turn::run_turn(&env, &message, max_iterations, &turn_token, deltas).await;
            core.commit(ended.take_transcript(), &ended.outcome);
            core.commit_session().await;
            ended.finish()
        }));
        Ok(Turn { run, token })
    }

    /// Runs a turn and blocks the calling (non-runtime) thread until it ends.
    pub fn run_blocking(&self, message: &str, opts: TurnOptions) -> TurnResult {
        if on_runtime_thread() {
            return Err((AgentError::Reentrant, None));
        }
        let (tx, rx) = crate::handoff::handoff();
        self.spawn_turn(
            message.to_owned(),
            opts,
            DeltaSink::None,
            Completion::Handoff,
            move |r| tx.send(r),
        )
        .map_err(|e| (e, None))?;
        rx.recv().unwrap_or_else(|| {
            Err((
                AgentError::Internal("the turn ended without a result".into()),
                None,
            ))
        })
    }

    /// Cancels the running turn, if any (used when the host frees the agent).
    pub fn cancel_active(&self, reason: &str) {
        // The lock is released first: a host's watch of a token under the turn's runs inside
        // the cancel.
        let active = lock(&self.core.active).clone();
        if let Some(t) = active {
            t.cancel(reason);
        }
    }
}
