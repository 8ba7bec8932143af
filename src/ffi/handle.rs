//! Handle casts (after rustls-ffi's `Castable`): how the library owns each C handle is
//! recorded in its type, so a handle is only ever converted the way it was made.

use super::{agentao_status, guard_or, Fail, FfiResult};

/// A handle the library hands out as `Box::into_raw` and takes back with `Box::from_raw`
/// (every handle today; an `Arc`-owned handle would get its own trait with `Arc` casts).
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
        p.as_ref().ok_or_else(|| {
            Fail(
                agentao_status::NullArgument,
                format!("`{}` is NULL", Self::NAME),
            )
        })
    }

    /// The `*_free` shape: NULL is a no-op; otherwise the handle is taken back and `close`
    /// runs on it behind the panic boundary before it drops.
    ///
    /// # Safety
    /// `p` is NULL or a live handle of this type, not used again.
    unsafe fn free_with(p: *mut Self, close: impl FnOnce(&Self)) {
        if p.is_null() {
            return;
        }
        guard_or((), || close(&Box::from_raw(p)));
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
