//! Request handles: the one way every request the library hands a host callback is answered
//! (`agentao_reply`, `agentao_shell_run`, `agentao_fs_out`, `agentao_memory_answer`).
//!
//! The rule (docs/c-api.md, "Answering a request"): a handle is valid until exactly one
//! finishing call; it may be finished from any thread, inside the callback or after it; a
//! request the library stopped waiting for (turn cancelled, deadline passed) takes a late
//! answer harmlessly; a second finishing call, or any call on a finished handle, returns
//! `AGENTAO_STATUS_INVALID_ARGUMENT` and does nothing.
//!
//! That last promise is why a handle is a token, not an address: the host's pointer encodes a
//! slot of one process-wide table and the slot's generation, so a finished handle is
//! recognised as finished instead of being read after its memory was freed. The library never
//! dereferences a token. Tokens lie below the addresses Go's heap uses (a Go binding keeps
//! them in Go memory) and above the first page, and are 8-aligned like any pointer.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{agentao_status, Fail, FfiResult};

/// The first token; below it a value is not a handle (NULL and the first pages).
const BASE: usize = 0x1_0000;
const STRIDE: usize = 8;
const INDEX_BITS: u32 = 22;
const GENERATION_BITS: u32 = 14;
/// The most handles live at once: past it a request fails at once instead of growing the
/// table without bound.
const MAX_LIVE: usize = 1 << INDEX_BITS;
/// A freed slot is reused only once this many others are free: a stale token meets a reused
/// slot only after thousands of requests, and then its generation still differs (it wraps
/// after 16,384 reuses of the same slot).
const QUARANTINE: usize = 4096;

struct Slot {
    generation: u32,
    value: Option<Box<dyn Any + Send>>,
}

struct Table {
    slots: Vec<Slot>,
    free: VecDeque<u32>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    slots: Vec::new(),
    free: VecDeque::new(),
});

fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

fn encode(index: u32, generation: u32) -> usize {
    BASE + (((generation as usize) << INDEX_BITS) | index as usize) * STRIDE
}

fn decode(token: usize) -> Option<(usize, u32)> {
    let v = token.checked_sub(BASE)?;
    if v % STRIDE != 0 {
        return None;
    }
    let v = v / STRIDE;
    if v >> (INDEX_BITS + GENERATION_BITS) != 0 {
        return None;
    }
    Some((v & (MAX_LIVE - 1), (v >> INDEX_BITS) as u32))
}

impl Table {
    fn live<T: Any>(&mut self, token: usize, name: &str) -> FfiResult<(usize, &mut T)> {
        let found = decode(token).and_then(|(index, generation)| {
            let slot = self.slots.get_mut(index)?;
            (slot.generation == generation).then_some(())?;
            Some((index, slot.value.as_mut()?))
        });
        let Some((index, value)) = found else {
            return Err(finished(name));
        };
        match value.downcast_mut::<T>() {
            Some(v) => Ok((index, v)),
            None => Err(Fail(
                agentao_status::InvalidArgument,
                format!("this handle is not a `{name}` handle"),
            )),
        }
    }

    fn release<T: Any>(&mut self, index: usize) -> T {
        let slot = &mut self.slots[index];
        let value = slot.value.take().expect("checked live");
        slot.generation = (slot.generation + 1) & ((1 << GENERATION_BITS) - 1);
        self.free.push_back(index as u32);
        *value.downcast::<T>().expect("checked type")
    }
}

fn finished(name: &str) -> Fail {
    Fail(
        agentao_status::InvalidArgument,
        format!("this `{name}` was already finished (or is not a live handle); nothing was done"),
    )
}

/// A request the host answers through a handle.
pub(crate) trait Request: Any + Send {
    /// The C type's name, for messages.
    const NAME: &'static str;

    /// Whether the host said, inside the callback, that it answers after the callback returns.
    /// Requests that are always answered through their handle say `true`.
    fn deferred(&self) -> bool {
        true
    }
}

/// Hands `request` to the host as a handle. `Err` gives it back when the table is full
/// (the caller fails the request).
pub(crate) fn issue<T: Request>(request: T) -> Result<*mut T, T> {
    let mut t = table();
    let index = if t.free.len() > QUARANTINE {
        t.free.pop_front()
    } else {
        None
    };
    let index = match index {
        Some(i) => i as usize,
        None if t.slots.len() < MAX_LIVE => {
            t.slots.push(Slot {
                generation: 0,
                value: None,
            });
            t.slots.len() - 1
        }
        None => match t.free.pop_front() {
            Some(i) => i as usize,
            None => return Err(request),
        },
    };
    let slot = &mut t.slots[index];
    slot.value = Some(Box::new(request));
    Ok(encode(index as u32, slot.generation) as *mut T)
}

/// The finishing call: takes the request back from the host. NULL is `_NULL_ARGUMENT`; a
/// finished handle, or one of another kind (which stays live), `_INVALID_ARGUMENT`.
/// The request drops at the caller, outside the table's lock (it may run a host finalizer).
pub(crate) fn finish<T: Request>(handle: *mut T) -> FfiResult<T> {
    if handle.is_null() {
        return Err(Fail::null(T::NAME));
    }
    let mut t = table();
    let (index, _) = t.live::<T>(handle as usize, T::NAME)?;
    Ok(t.release(index))
}

/// A call on a live handle that does not finish it (streamed output, part of an answer). `f`
/// runs under the table's lock: it must not call host code.
pub(crate) fn with<T: Request, R>(handle: *mut T, f: impl FnOnce(&mut T) -> R) -> FfiResult<R> {
    if handle.is_null() {
        return Err(Fail::null(T::NAME));
    }
    let mut t = table();
    let (_, value) = t.live::<T>(handle as usize, T::NAME)?;
    Ok(f(value))
}

/// After the callback returned: the request back when the host neither finished nor deferred
/// it (its answer is the callback's return and what it filled in); `None` when it is answered
/// through its handle, now or later.
pub(crate) fn returned<T: Request>(handle: *mut T) -> Option<T> {
    let mut t = table();
    let (index, value) = t.live::<T>(handle as usize, T::NAME).ok()?;
    if value.deferred() {
        return None;
    }
    Some(t.release(index))
}

/// How long a deferred file-system or memory-store answer is waited for when the config sets
/// no `reply_timeout_ms`: such a request blocks a library thread (and, for the memory read at a
/// turn's start, the turn), so a handle the host dropped must end as a failure, not a hang.
pub(crate) const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

/// The waiting side of a request answered through its handle.
pub(crate) struct Waiter<A> {
    shared: Arc<Shared<A>>,
}

/// The answering side, kept in the request the handle holds. Dropped without an answer (the
/// request was refused), it fails the wait at once.
pub(crate) struct Answerer<A> {
    shared: Arc<Shared<A>>,
}

struct Shared<A> {
    answer: Mutex<Outcome<A>>,
    wake: Condvar,
}

enum Outcome<A> {
    Waiting,
    Answered(A),
    Dropped,
    /// The waiting thread's cancellation fired ([`crate::cancel::current`]).
    Cancelled,
}

/// Why a wait ended without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoAnswer {
    /// The deadline passed: the request fails; the handle stays the host's until it finishes
    /// it, and that late answer is dropped.
    TimedOut,
    /// The library dropped the request without handing it out (the table was full).
    Dropped,
    /// What the waiting thread ran for was cancelled (the turn, or its tool call): as with a
    /// timeout, the late answer is dropped.
    Cancelled,
}

pub(crate) fn channel<A>() -> (Answerer<A>, Waiter<A>) {
    let shared = Arc::new(Shared {
        answer: Mutex::new(Outcome::Waiting),
        wake: Condvar::new(),
    });
    (
        Answerer {
            shared: shared.clone(),
        },
        Waiter { shared },
    )
}

impl<A> Shared<A> {
    fn lock(&self) -> MutexGuard<'_, Outcome<A>> {
        self.answer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn settle(&self, outcome: Outcome<A>) {
        let mut a = self.lock();
        if matches!(*a, Outcome::Waiting) {
            *a = outcome;
            self.wake.notify_all();
        }
    }
}

impl<A> Answerer<A> {
    /// Delivers the answer; after a wait that gave up it goes nowhere.
    pub(crate) fn answer(self, answer: A) {
        self.shared.settle(Outcome::Answered(answer));
    }
}

impl<A> Drop for Answerer<A> {
    fn drop(&mut self) {
        self.shared.settle(Outcome::Dropped);
    }
}

impl<A: Send + 'static> Waiter<A> {
    /// Blocks until the answer, until `deadline` (None: no deadline) passes, or until the
    /// thread's current cancellation fires ([`crate::cancel::current`]: a cancelled turn does
    /// not wait on host code that deferred its answer).
    pub(crate) fn wait(self, deadline: Option<Duration>) -> Result<A, NoAnswer> {
        let cancel = crate::cancel::current();
        let watch = cancel.as_ref().map(|token| {
            let shared = self.shared.clone();
            token.on_cancel(move |_| shared.settle(Outcome::Cancelled))
        });
        let got = self.wait_for(deadline);
        if let (Some(token), Some(id)) = (cancel, watch) {
            token.remove_callback(id);
        }
        got
    }

    fn wait_for(&self, deadline: Option<Duration>) -> Result<A, NoAnswer> {
        let until = deadline.map(|d| Instant::now() + d);
        let mut a = self.shared.lock();
        loop {
            match std::mem::replace(&mut *a, Outcome::Waiting) {
                Outcome::Answered(v) => return Ok(v),
                Outcome::Dropped => return Err(NoAnswer::Dropped),
                Outcome::Cancelled => {
                    // Later answers go nowhere.
                    *a = Outcome::Dropped;
                    return Err(NoAnswer::Cancelled);
                }
                Outcome::Waiting => {}
            }
            a = match until {
                None => self.shared.wake.wait(a).unwrap_or_else(|e| e.into_inner()),
                Some(until) => {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        // Later answers go nowhere.
                        *a = Outcome::Dropped;
                        return Err(NoAnswer::TimedOut);
                    }
                    self.shared
                        .wake
                        .wait_timeout(a, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Probe(u32);
    impl Request for Probe {
        const NAME: &'static str = "probe";
    }

    struct Other;
    impl Request for Other {
        const NAME: &'static str = "other";
    }

    #[test]
    fn a_handle_finishes_once_and_then_says_closed() {
        let h = issue(Probe(7)).unwrap_or_else(|_| panic!("room"));
        assert_eq!(with(h, |p| p.0).ok(), Some(7));
        // Another kind of handle is refused and the handle stays live.
        let wrong = finish(h.cast::<Other>()).err().map(|f| f.0);
        assert_eq!(wrong, Some(agentao_status::InvalidArgument));
        assert_eq!(finish(h).ok().map(|p| p.0), Some(7));
        let again = finish(h).err().map(|f| f.0);
        assert_eq!(again, Some(agentao_status::InvalidArgument));
        assert_eq!(
            with(h, |_| ()).err().map(|f| f.0),
            Some(agentao_status::InvalidArgument)
        );
        let null = finish(std::ptr::null_mut::<Probe>()).err().map(|f| f.0);
        assert_eq!(null, Some(agentao_status::NullArgument));
        // Not a token at all.
        let odd = finish((BASE + 3) as *mut Probe).err().map(|f| f.0);
        assert_eq!(odd, Some(agentao_status::InvalidArgument));
    }

    #[test]
    fn tokens_stay_below_go_heap_addresses() {
        let top = encode((MAX_LIVE - 1) as u32, (1 << GENERATION_BITS) - 1);
        assert!(top < 0x00c0_0000_0000);
        assert_eq!(
            decode(top),
            Some((MAX_LIVE - 1, (1 << GENERATION_BITS) - 1))
        );
    }

    #[test]
    fn a_wait_ends_when_the_threads_cancellation_fires() {
        let token = crate::cancel::CancelToken::new();
        let (answerer, waiter) = channel::<u32>();
        let firing = token.clone();
        let fire = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            firing.cancel("stop");
        });
        let got = crate::cancel::with_current(&token, || waiter.wait(None));
        fire.join().unwrap();
        assert_eq!(got.err(), Some(NoAnswer::Cancelled));
        // A late answer goes nowhere.
        answerer.answer(1);
        // Already cancelled: no wait at all; and the thread's token is gone after the scope.
        let (_answerer, waiter) = channel::<u32>();
        let got = crate::cancel::with_current(&token, || waiter.wait(None));
        assert_eq!(got.err(), Some(NoAnswer::Cancelled));
        assert!(crate::cancel::current().is_none());
    }

    #[test]
    fn a_wait_ends_at_its_deadline_and_a_late_answer_goes_nowhere() {
        let (answerer, waiter) = channel::<u32>();
        let r = waiter.wait(Some(Duration::from_millis(20)));
        assert_eq!(r.err(), Some(NoAnswer::TimedOut));
        answerer.answer(1);

        let (answerer, waiter) = channel::<u32>();
        let t = std::thread::spawn(move || answerer.answer(5));
        assert_eq!(waiter.wait(None).ok(), Some(5));
        t.join().unwrap_or_else(|_| panic!("answerer"));

        let (answerer, waiter) = channel::<u32>();
        drop(answerer);
        assert_eq!(waiter.wait(None).err(), Some(NoAnswer::Dropped));
    }
}
