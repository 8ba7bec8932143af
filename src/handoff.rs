//! A one-shot value handed from a runtime worker to a thread blocked waiting for it: a
//! blocking chat's result. The receiver parks its own thread and the sender unparks it: at
//! most one futex wait and one wake, where the `sync_channel` it replaces allocated and freed
//! a channel with its slot array every turn (a visible part of a one-request turn) and a
//! mutex with a condvar made a third futex call per turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;

struct Shared<T> {
    /// `Some(None)` when the sender was dropped unsent. Never contended for long: the
    /// receiver takes it only once `ready` is set.
    slot: Mutex<Option<Option<T>>>,
    ready: AtomicBool,
    receiver: Thread,
}

/// The sending half: [`Sender::send`] delivers; dropping it unsent wakes the receiver with
/// nothing, so a waiter never outlives a sender that is gone.
pub(crate) struct Sender<T>(Option<Arc<Shared<T>>>);

/// The receiving half, tied to the thread that made it (the one that will wait).
pub(crate) struct Receiver<T>(Arc<Shared<T>>);

/// A handoff to the calling thread: call it on the thread that will [`Receiver::recv`].
pub(crate) fn handoff<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        slot: Mutex::new(None),
        ready: AtomicBool::new(false),
        receiver: std::thread::current(),
    });
    (Sender(Some(shared.clone())), Receiver(shared))
}

impl<T> Sender<T> {
    pub(crate) fn send(mut self, value: T) {
        if let Some(shared) = self.0.take() {
            shared.put(Some(value));
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if let Some(shared) = self.0.take() {
            shared.put(None);
        }
    }
}

impl<T> Shared<T> {
    fn put(&self, value: Option<T>) {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
        self.ready.store(true, Ordering::Release);
        self.receiver.unpark();
    }
}

impl<T> Receiver<T> {
    /// Blocks until the value is sent; `None` if the sender was dropped without sending.
    /// Must be called on the thread that made the handoff (the one the sender unparks).
    pub(crate) fn recv(self) -> Option<T> {
        debug_assert_eq!(std::thread::current().id(), self.0.receiver.id());
        // A park can return without an unpark: the flag decides.
        while !self.0.ready.load(Ordering::Acquire) {
            std::thread::park();
        }
        self.0
            .slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_sent_from_another_thread_arrives() {
        let (tx, rx) = handoff();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.send(String::from("done"));
        });
        assert_eq!(rx.recv().as_deref(), Some("done"));
        t.join().unwrap();
    }

    #[test]
    fn a_value_sent_before_the_wait_is_kept() {
        let (tx, rx) = handoff();
        tx.send(7);
        assert_eq!(rx.recv(), Some(7));
    }

    #[test]
    fn a_sender_dropped_unsent_wakes_the_receiver_with_nothing() {
        let (tx, rx) = handoff::<u8>();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(tx);
        });
        assert_eq!(rx.recv(), None);
        t.join().unwrap();
    }

    #[test]
    fn a_sender_dropped_while_unwinding_wakes_the_receiver() {
        let (tx, rx) = handoff::<u8>();
        let t = std::thread::spawn(move || {
            let _tx = tx;
            panic!("the worker died");
        });
        assert_eq!(rx.recv(), None);
        assert!(t.join().is_err());
    }
}
