//! The read timeout of a backend's requests, on one timer kept from request to request.
//!
//! `tokio::time::timeout` registers a new timer for each request after the last one was
//! dropped, and tokio's time driver then wakes the worker parked in the I/O driver to shorten
//! its sleep (it does so whenever a timer is due before that worker promised to wake, and
//! always when it parked with no timer): an eventfd write and a wake-up of the other worker
//! per request of a tool loop. A kept timer moved to a later deadline only extends its entry,
//! so the parked worker sleeps on.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// The kept timer of one backend. An elapsed one is not reused: it fired (the backend idled
/// past the timeout) or its runtime shut down (which fires every timer), and polling a timer
/// of a runtime that is gone would panic.
#[derive(Default)]
pub(super) struct RequestDeadline {
    kept: Mutex<Option<Pin<Box<Sleep>>>>,
}

impl RequestDeadline {
    /// `f`'s output, or `None` when `limit` passed first: `tokio::time::timeout(limit, f)`.
    /// A future of its own, not an `async fn`: that would hold `f` twice (the argument and
    /// the pinned local), and `f` is the request, inside every turn's task.
    pub(super) fn within<F: Future>(&self, limit: Duration, f: F) -> Within<'_, F> {
        // tokio's own "far future" for a limit that cannot be added to now.
        let deadline = Instant::now()
            .checked_add(limit)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86400 * 365 * 30));
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .filter(|s| !s.is_elapsed());
        let sleep = match kept {
            Some(mut s) => {
                s.as_mut().reset(deadline);
                s
            }
            // Another request of this backend holds the kept one, or there is none yet.
            None => Box::pin(tokio::time::sleep_until(deadline)),
        };
        Within {
            f,
            sleep: Some(sleep),
            owner: self,
        }
    }
}

pin_project_lite::pin_project! {
    /// [`RequestDeadline::within`]'s future.
    pub(super) struct Within<'a, F> {
        #[pin]
        f: F,
        // `None` once the output was given.
        sleep: Option<Pin<Box<Sleep>>>,
        owner: &'a RequestDeadline,
    }
}

impl<F: Future> Future for Within<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // The future first, then the timer: the order of `tokio::time::timeout`.
        let out = match this.f.poll(cx) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => match this.sleep.as_mut() {
                Some(s) => {
                    ready!(s.as_mut().poll(cx));
                    None
                }
                None => return Poll::Pending,
            },
        };
        if let Some(mut s) = this.sleep.take() {
            // The timer keeps the waker it was last polled with; a no-op one instead, so a
            // kept timer does not hold the finished turn's task.
            let _ = s.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            *this.owner.kept.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
        }
        Poll::Ready(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn it_times_out_as_tokio_does_and_the_kept_timer_is_moved_each_time() {
        let rt = runtime();
        let d = RequestDeadline::default();
        rt.block_on(async {
            for _ in 0..3 {
                assert_eq!(d.within(Duration::from_secs(5), async { 7 }).await, Some(7));
                let t0 = std::time::Instant::now();
                let never = std::future::pending::<()>();
                assert_eq!(d.within(Duration::from_millis(30), never).await, None);
                assert!(t0.elapsed() >= Duration::from_millis(30));
                // A short wait after a long deadline: the kept timer must not fire late.
                let t0 = std::time::Instant::now();
                let slow = tokio::time::sleep(Duration::from_millis(20));
                assert_eq!(d.within(Duration::from_secs(5), slow).await, Some(()));
                let t0b = std::time::Instant::now();
                let never = std::future::pending::<()>();
                assert_eq!(d.within(Duration::from_millis(10), never).await, None);
                assert!(t0b.elapsed() >= Duration::from_millis(10));
                assert!(t0.elapsed() < Duration::from_secs(5));
            }
            // A limit too far to add to now waits like tokio's (forever, here: the future wins).
            assert_eq!(d.within(Duration::MAX, async { 1 }).await, Some(1));
        });
    }

    /// A backend used on a runtime that is gone, then on another one, does not panic: its
    /// kept timer fired at the shutdown and is replaced.
    #[test]
    fn a_timer_of_a_runtime_that_is_gone_is_not_reused() {
        let d = RequestDeadline::default();
        let first = runtime();
        let slow = async { tokio::time::sleep(Duration::from_millis(1)).await };
        let used = first.block_on(async { d.within(Duration::from_secs(60), slow).await });
        assert_eq!(used, Some(()));
        drop(first);
        let second = runtime();
        second.block_on(async {
            let never = std::future::pending::<()>();
            assert_eq!(d.within(Duration::from_millis(10), never).await, None);
            assert_eq!(
                d.within(Duration::from_secs(60), async { 2 }).await,
                Some(2)
            );
        });
    }
}
