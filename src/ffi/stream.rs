//! Pull handles: a streaming turn (`agentao_stream`) and the host-event stream
//! (`agentao_host_event_stream`). `next` blocks the calling host thread up to a timeout.

use std::ffi::c_char;
use std::time::Duration;

// An async mutex: a second reader waits for the first within its own timeout.
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio::time::Instant;

use super::agent::{agentao_agent, open_on_agent, turn_ended_ok, turn_options};
use super::cancel::agentao_cancel_token;
use super::handle::BoxCastable;
use super::{
    agentao_error, agentao_status, guard_required_out, opt_str_arg, out_string, reentrant, str_arg,
    Fail, FfiResult,
};
use crate::agent::{runtime, AgentError, Completion, TurnOptions, WeakAgent};
use crate::cancel::CancelToken;
use crate::events::host::{HostEventReceiver, StreamNext};
use crate::llm::image::ImageInput;
use crate::turn::DeltaSink;

/// Queue capacity of a streaming turn (the producer waits when it is full).
const TURN_STREAM_CAPACITY: usize = 64;

/// A streaming turn read by pulling: text deltas, then the TurnOutcome as the last item.
pub struct agentao_stream {
    state: Mutex<TurnStreamState>,
    token: CancelToken,
}

struct TurnStreamState {
    deltas: mpsc::Receiver<String>,
    end: Option<oneshot::Receiver<Result<String, Fail>>>,
    finished: bool,
}

/// Starts a turn whose text deltas are read with `agentao_stream_next`. Arguments as
/// `agentao_agent_chat`. Works with any transport, with or without a `subscribe` slot (the
/// library owns the queue; `AGENTAO_STATUS_NO_SUBSCRIBE` no longer occurs here). Refuses with
/// `AGENTAO_STATUS_TURN_IN_PROGRESS` when a turn runs. The queue
/// holds 64 items; a turn whose reader falls behind waits (nothing is dropped). On success
/// `*stream_out` owns the stream; `agentao_stream_free` closes it and cancels the turn if it is
/// still running (reason `"async-cancel"`).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_stream_open(
    agent: *mut agentao_agent,
    message: *const c_char,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    stream_out: *mut *mut agentao_stream,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    open_turn_stream(
        agent,
        message,
        max_iterations,
        cancel,
        || Ok(Vec::new()),
        stream_out,
        err_out,
    )
}

/// [`agentao_agent_stream_open`] with the images `images` gives (read after the agent and
/// the message are checked, as the other entry points do).
pub(super) unsafe fn open_turn_stream(
    agent: *mut agentao_agent,
    message: *const c_char,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    images: impl FnOnce() -> FfiResult<Vec<ImageInput>>,
    stream_out: *mut *mut agentao_stream,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    open_on_agent(agent, stream_out, "stream_out", err_out, |agent| {
        let message = str_arg(message, "message")?.to_owned();
        let images = images()?;
        let (tx, rx) = mpsc::channel(TURN_STREAM_CAPACITY);
        let (end_tx, end_rx) = oneshot::channel();
        // The completion only sends on a oneshot: it runs on the worker (no extra hop).
        let token = agent.spawn_turn(
            message,
            TurnOptions {
                images,
                ..turn_options(max_iterations, cancel)
            },
            DeltaSink::Queue(tx),
            Completion::Handoff,
            move |result| {
                let _ = end_tx.send(turn_ended_ok(&result).map(|o| o.to_json()));
            },
        )?;
        Ok(agentao_stream {
            state: Mutex::new(TurnStreamState {
                deltas: rx,
                end: Some(end_rx),
                finished: false,
            }),
            token,
        })
    })
}

fn timeout_of(ms: u32) -> Duration {
    Duration::from_millis(ms as u64)
}

/// Waits up to `timeout_ms` for the next item and writes it to `*item_json_out` (release with
/// `agentao_string_free`): a `{"type":"text_delta","text":...}`, or the final
/// `{"type":"turn_outcome",...}`. Then `AGENTAO_STATUS_CLOSED`. A turn that ended cancelled or
/// in error delivers its deltas, then that status (with the message in `err_out`), then
/// CLOSED; its outcome is readable with `agentao_agent_last_turn`. Nothing yet:
/// `AGENTAO_STATUS_TIMEOUT`. From inside a library callback: `_REENTRANT`. Several threads may
/// call it at once: each item goes to one of them, and each waits at most its own timeout.
#[no_mangle]
pub unsafe extern "C" fn agentao_stream_next(
    stream: *mut agentao_stream,
    timeout_ms: u32,
    item_json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard_required_out(item_json_out, "item_json_out", err_out, |item_json_out| {
        let stream = agentao_stream::try_ref(stream)?;
        if reentrant() {
            return Err(AgentError::Reentrant.into());
        }
        let rt = runtime()?;
        let deadline = Instant::now() + timeout_of(timeout_ms);
        let mut st = match stream.state.try_lock() {
            Ok(st) => st,
            Err(_) => rt
                .block_on(async { tokio::time::timeout_at(deadline, stream.state.lock()).await })
                .map_err(|_| {
                    Fail(
                        agentao_status::Timeout,
                        "no item within the timeout (another thread was reading)".into(),
                    )
                })?,
        };
        if st.finished {
            return Err(Fail(agentao_status::Closed, "the stream has ended".into()));
        }
        let st = &mut *st;
        // Fast path: an item already queued needs no runtime round trip.
        let ready = match st.deltas.try_recv() {
            Ok(d) => Some(Ok(Some(Ok(d)))),
            Err(_) => None,
        };
        let item = ready.unwrap_or_else(|| {
            rt.block_on(async {
                tokio::time::timeout_at(deadline, async {
                    if let Some(d) = st.deltas.recv().await {
                        return Some(Ok(d));
                    }
                    // Awaited in place and cleared only once it resolves: a timeout that
                    // interrupts this wait must leave the outcome for the next call.
                    let end = st.end.as_mut()?;
                    let item = end.await.unwrap_or_else(|_| {
                        Err(Fail(
                            agentao_status::Internal,
                            "the turn ended without an outcome".into(),
                        ))
                    });
                    st.end = None;
                    Some(item)
                })
                .await
            })
        });
        match item {
            Err(_) => Err(Fail(
                agentao_status::Timeout,
                "no item within the timeout".into(),
            )),
            Ok(None) => {
                st.finished = true;
                Err(Fail(agentao_status::Closed, "the stream has ended".into()))
            }
            Ok(Some(Ok(json))) => {
                item_json_out.write(|| out_string(&json));
                Ok(())
            }
            Ok(Some(Err(f))) => {
                st.finished = true;
                Err(f)
            }
        }
    })
}

/// Closes the stream: a turn still running is cancelled (reason `"async-cancel"`) and any
/// write it is blocked on is released; the call does not wait for the turn's cleanup. NULL is
/// a no-op.
#[no_mangle]
pub unsafe extern "C" fn agentao_stream_free(stream: *mut agentao_stream) {
    agentao_stream::free_with(stream, |s| s.token.cancel("async-cancel"));
}

/// A pull stream of host events (the reference's `agent.events()`).
pub struct agentao_host_event_stream {
    rx: Mutex<HostEventReceiver>,
    /// Weak, so the queue closes (and the reader hears `_CLOSED`) once the agent is freed and
    /// its last turn is gone.
    agent: WeakAgent,
    id: u64,
    /// Cancelled by `agentao_host_event_stream_close`: wakes a `next` waiting on another thread.
    closed: CancelToken,
}

/// Opens a pull stream of this agent's host events. `session_filter` (borrowed; NULL for all)
/// keeps only events of that session. No replay: only events published after it opened. The
/// queue holds 64 events; a slow reader slows the turn, nothing is dropped, except that a
/// cancelled turn (or a turn of a freed agent) never waits: an event that finds the queue full
/// then is dropped, and `agentao_host_event_stream_next` reports the gap with
/// `AGENTAO_STATUS_EVENTS_DROPPED` where it happened. A second live
/// stream with the same filter: `AGENTAO_STATUS_STREAM_SUBSCRIBE`. Release with
/// `agentao_host_event_stream_free`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_host_events_open(
    agent: *mut agentao_agent,
    session_filter: *const c_char,
    stream_out: *mut *mut agentao_host_event_stream,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    open_on_agent(agent, stream_out, "stream_out", err_out, |agent| {
        let filter = opt_str_arg(session_filter, "session_filter")?.map(str::to_owned);
        let (id, rx) = agent
            .host_events()
            .open_stream(filter)
            .map_err(|e| Fail(agentao_status::StreamSubscribe, e.to_string()))?;
        Ok(agentao_host_event_stream {
            rx: Mutex::new(rx),
            agent: agent.downgrade(),
            id,
            closed: CancelToken::new(),
        })
    })
}

/// Waits up to `timeout_ms` for the next host event and writes its JSON to `*event_json_out`
/// (release with `agentao_string_free`). Nothing yet: `AGENTAO_STATUS_TIMEOUT`. Events were
/// dropped here (a cancelled turn found the queue full): `AGENTAO_STATUS_EVENTS_DROPPED` once,
/// with the count in the message, and `*event_json_out` NULL; the next call goes on with the
/// event after the gap. `AGENTAO_STATUS_CLOSED` once the agent was freed and its last turn
/// ended, after the events the stream still held, or at once after
/// `agentao_host_event_stream_close`. From inside a library callback: `_REENTRANT`. Several
/// threads may call it at once: each event goes to one of them, and each waits at most its own
/// timeout.
#[no_mangle]
pub unsafe extern "C" fn agentao_host_event_stream_next(
    stream: *mut agentao_host_event_stream,
    timeout_ms: u32,
    event_json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard_required_out(
        event_json_out,
        "event_json_out",
        err_out,
        |event_json_out| {
            let stream = agentao_host_event_stream::try_ref(stream)?;
            if reentrant() {
                return Err(AgentError::Reentrant.into());
            }
            let rt = runtime()?;
            if stream.closed.is_cancelled() {
                // What a reader held when `close` came is dropped, not read after it.
                if let Ok(mut rx) = stream.rx.try_lock() {
                    rx.close();
                }
                return Err(Fail(agentao_status::Closed, "the stream is closed".into()));
            }
            // Fast path: an event already queued needs no runtime round trip.
            let ready = match stream.rx.try_lock() {
                Ok(mut rx) => rx.try_next(),
                Err(_) => None,
            };
            let got = match ready {
                Some(n) => Ok(n),
                // The timer must be created inside the runtime (in the async block), not on
                // this host thread: it needs a runtime context when it is constructed.
                None => rt.block_on(async {
                    let wait = async {
                        let mut rx = stream.rx.lock().await;
                        let next = rx.next().await;
                        if next == StreamNext::Closed {
                            rx.close();
                        }
                        next
                    };
                    tokio::select! {
                        biased;
                        _ = stream.closed.cancelled() => {
                            // `close` could not take the queue while a reader held it.
                            if let Ok(mut rx) = stream.rx.try_lock() {
                                rx.close();
                            }
                            Ok(StreamNext::Closed)
                        }
                        next = tokio::time::timeout(timeout_of(timeout_ms), wait) => next,
                    }
                }),
            };
            match got {
                Err(_) => Err(Fail(
                    agentao_status::Timeout,
                    "no event within the timeout".into(),
                )),
                Ok(StreamNext::Closed) => {
                    Err(Fail(agentao_status::Closed, "the stream is closed".into()))
                }
                Ok(StreamNext::Dropped(n)) => Err(Fail(
                    agentao_status::EventsDropped,
                    format!(
                    "{n} host event(s) were dropped here: a cancelled turn found this stream full"
                ),
                )),
                Ok(StreamNext::Event(json)) => {
                    event_json_out.write(|| out_string(&json));
                    Ok(())
                }
            }
        },
    )
}

/// Closes the stream without releasing the handle, for a reader that waits in
/// `agentao_host_event_stream_next` on another thread: that call returns
/// `AGENTAO_STATUS_CLOSED` at once, as does every later one. The events it held are dropped,
/// its session filter is free for a new stream, and a turn blocked on its full queue resumes.
/// Idempotent; any thread, including inside callbacks; it waits only for a `next` in flight
/// to return. NULL is a no-op. The handle is still released with
/// `agentao_host_event_stream_free`.
#[no_mangle]
pub unsafe extern "C" fn agentao_host_event_stream_close(stream: *const agentao_host_event_stream) {
    agentao_host_event_stream::with_ref_or(stream, (), |s| {
        s.closed.cancel("closed");
        if let Some(agent) = s.agent.upgrade() {
            agent.host_events().close_stream(s.id);
        }
        // A `next` in flight holds the queue; the cancel above makes it return and close it.
        if let Ok(mut rx) = s.rx.try_lock() {
            rx.close();
        }
    });
}

/// Closes the stream and releases its queue; a turn blocked on it resumes (the event is
/// dropped for this stream). NULL is a no-op. Not while another thread is inside
/// `agentao_host_event_stream_next` on it: `agentao_host_event_stream_close` wakes that call.
#[no_mangle]
pub unsafe extern "C" fn agentao_host_event_stream_free(stream: *mut agentao_host_event_stream) {
    agentao_host_event_stream::free_with(stream, |s| {
        if let Some(agent) = s.agent.upgrade() {
            agent.host_events().close_stream(s.id);
        }
    });
}
