//! A future whose panic becomes its output, so the thread that polls it (a worker or a host's
//! own thread in `block_on`) finishes the work itself instead of handing it to a second task
//! that awaits a `JoinHandle`.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::panic_text::panic_text;

pin_project_lite::pin_project! {
    /// The output of `F`, or the message of the panic that ended it.
    pub(crate) struct PanicCaught<F> {
        // `None` once it gave its output: dropped then, not with this future.
        #[pin]
        f: Option<F>,
    }
}

impl<F> PanicCaught<F> {
    pub(crate) fn new(f: F) -> Self {
        PanicCaught { f: Some(f) }
    }
}

impl<F: Future> Future for PanicCaught<F> {
    type Output = Result<F::Output, String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.project().f;
        let Some(f) = slot.as_mut().as_pin_mut() else {
            // Polled again after its output: nothing more will come.
            return Poll::Pending;
        };
        // Unwind safety: a future that panicked is never polled again, only dropped, as tokio
        // does with a task that panicked.
        let out = match catch_unwind(AssertUnwindSafe(|| f.poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(v)) => Ok(v),
            Err(payload) => Err(panic_text(payload)),
        };
        // What the future holds (a turn's lock, its agent) goes before the caller sees the
        // output, as a finished task's future is dropped before its `JoinHandle` wakes; a
        // panic while dropping it is caught the same way.
        match catch_unwind(AssertUnwindSafe(|| slot.set(None))) {
            Ok(()) => Poll::Ready(out),
            Err(payload) => Poll::Ready(Err(panic_text(payload))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PanicCaught;
    use std::future::Future;
    use std::pin::pin;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    fn once<F: Future>(f: F) -> Poll<F::Output> {
        pin!(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    /// Sets its flag when dropped.
    struct Dropped(Arc<AtomicBool>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn gives_the_output_and_the_panic_message() {
        assert_eq!(once(PanicCaught::new(async { 7 })), Poll::Ready(Ok(7)));
        let panics = PanicCaught::new(async {
            if true {
                panic!("turn {} broke", 3);
            }
        });
        assert_eq!(once(panics), Poll::Ready(Err("turn 3 broke".to_owned())));
    }

    #[test]
    fn what_the_future_holds_is_dropped_before_the_output_is_given() {
        for panics in [false, true] {
            let flag = Arc::new(AtomicBool::new(false));
            let held = Dropped(flag.clone());
            let seen = flag.clone();
            let mut f = pin!(PanicCaught::new(async move {
                let _held = held;
                std::future::ready(()).await;
                assert!(!panics, "on purpose");
            }));
            let out = f.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            assert!(out.is_ready());
            assert!(seen.load(Ordering::SeqCst), "panics: {panics}");
            // The caught future stays pending when polled again, and dropping it is a no-op.
            assert!(f
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending());
        }
    }

    #[test]
    fn a_pending_future_is_polled_until_ready() {
        let mut polls = 0;
        let f = PanicCaught::new(std::future::poll_fn(move |cx| {
            polls += 1;
            if polls < 3 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(polls)
            }
        }));
        let mut f = pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(f.as_mut().poll(&mut cx).is_pending());
        assert!(f.as_mut().poll(&mut cx).is_pending());
        assert_eq!(f.as_mut().poll(&mut cx), Poll::Ready(Ok(3)));
    }
}
