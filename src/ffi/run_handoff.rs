//! A turn whose completion only hands its result over: `on_done` runs inline where the turn
//! ended, instead of on a blocking thread of the library's.

use std::ffi::{c_char, c_void};

use super::agent::{agentao_agent, agentao_done_fn};
use super::cancel::agentao_cancel_token;
use super::images::{agentao_image, run_with_images};
use super::{agentao_error, agentao_status, guard};
use crate::agent::Completion;

/// `agentao_agent_run_images` for a host whose `on_done` only hands the result over: it copies
/// what it keeps and wakes whatever waits (resumes a Swift continuation, signals a condition
/// variable, sends on a channel), and nothing else. `on_done` then runs on the library's
/// runtime thread that finished the turn, inline, which saves the hand-off to a blocking thread
/// that `agentao_agent_run` makes (one thread wake-up a turn; docs/performance.md has its cost).
///
/// `on_done` must return promptly: it must not block (no waiting on a lock another thread may
/// hold long, on I/O, on a person) and must not call back into the agent (a blocking call
/// returns `AGENTAO_STATUS_REENTRANT`): the runtime thread it holds is one the other turns and
/// requests need. It must not use the transport's userdata: unlike `agentao_agent_run`, the
/// turn has let go of the agent when `on_done` runs, so `agentao_agent_free` on another thread
/// may meanwhile release the agent and call the transport's `userdata_free`. `on_done` still
/// fires exactly once per accepted call (with `AGENTAO_STATUS_CANCELLED` when the agent is
/// freed first), never for a refused one.
///
/// Arguments, ownership and errors as `agentao_agent_run_images`: `message` and `images` (NULL
/// when `n_images` is 0) are borrowed for the call; `userdata` is the host's, passed to
/// `on_done` only; NULL `agent`, `message` or `on_done` is `AGENTAO_STATUS_NULL_ARGUMENT`, a bad
/// image `_NULL_ARGUMENT` or `_INVALID_ARGUMENT`, another turn running `_TURN_IN_PROGRESS`.
/// Callable from any thread.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn agentao_agent_run_handoff(
    agent: *mut agentao_agent,
    message: *const c_char,
    images: *const agentao_image,
    n_images: usize,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    on_done: agentao_done_fn,
    userdata: *mut c_void,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        run_with_images(
            agent,
            message,
            images,
            n_images,
            max_iterations,
            cancel,
            on_done,
            userdata,
            Completion::Handoff,
        )
    })
}
