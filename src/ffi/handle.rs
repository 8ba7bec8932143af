//! Handle casts (after rustls-ffi's `Castable`): how the library owns each C handle is
//! recorded in its type, so a handle is only ever converted the way it was made.

use super::{guard_or, Fail, FfiResult};

/// A handle the library hands out as `Box::into_raw` and takes back with `Box::from_raw`.
/// Every handle is one today: the shared state behind a handle (an agent, a token) is an `Arc`
/// inside the box, so one C handle is one box. A handle the C side could duplicate would get an
/// `ArcCastable` twin with `Arc::into_raw` / `increment_strong_count` casts.
pub(crate) trait BoxCastable: Sized {
    /// The argument name used in NULL messages (`` `agent` is NULL``).
    const NAME: &'static str;

    /// Gives a new handle to the caller.
    fn into_raw(self) -> *mut Self {
        Box::into_raw(Box::new(self))
    }

    /// Borrows a handle argument; NULL is `NULL_ARGUMENT`.
    ///
    /// # Safety
    /// `p` is NULL or a live handle of this type.
    unsafe fn try_ref<'a>(p: *const Self) -> FfiResult<&'a Self> {
        p.as_ref().ok_or_else(|| Fail::null(Self::NAME))
    }

    /// The no-status shape on a handle: `f` on the handle behind the panic boundary; NULL (or
    /// a contained panic) gives `fallback`.
    ///
    /// # Safety
    /// `p` is NULL or a live handle of this type.
    unsafe fn with_ref_or<R>(p: *const Self, fallback: R, f: impl FnOnce(&Self) -> R) -> R {
        match p.as_ref() {
            Some(h) => guard_or(fallback, || f(h)),
            None => fallback,
        }
    }

    /// The `*_free` shape: NULL is a no-op; otherwise the handle is taken back and `close`
    /// runs on it behind the panic boundary before it drops.
    ///
    /// # Safety
    /// `p` is NULL or a live handle of this type, not used again.
    unsafe fn free_with(p: *mut Self, close: impl FnOnce(&Self)) {
        if !p.is_null() {
            guard_or((), || close(&Box::from_raw(p)));
        }
    }
}

macro_rules! box_castable {
    ($($ty:ty => $name:literal),* $(,)?) => {
        $(impl BoxCastable for $ty {
            const NAME: &'static str = $name;
        })*
    };
}

box_castable! {
    super::agent::agentao_agent => "agent",
    super::cancel::agentao_cancel_token => "token",
    super::stream::agentao_stream => "stream",
    super::stream::agentao_host_event_stream => "stream",
    super::transport::agentao_broadcaster => "broadcaster",
    super::agentao_error => "err",
}
