//! The one wrapper for every host pointer the library holds (after wasmtime's c-api
//! `ForeignData`): the userdata, the finalizer that runs once when the library lets go, and the
//! host's callbacks that receive that userdata.

use std::ffi::{c_char, c_void};

use super::transport::agentao_transport;
use super::{agentao_error, agentao_status, in_callback};
use crate::events::JsonText;

/// What a [`HostData`] may carry besides the pointer: a copy of plain C function pointers (or
/// the copied transport struct). Sealed to the types listed below, so nothing else can borrow
/// the `Send`/`Sync` promise.
pub(crate) trait HostCallbacks: Copy + sealed::Sealed {}

mod sealed {
    pub(crate) trait Sealed {}
}

macro_rules! host_callbacks {
    ($($ty:ty),* $(,)?) => {
        $(impl sealed::Sealed for $ty {}
        impl HostCallbacks for $ty {})*
    };
}

/// `(userdata, json)`: event observers, listeners and delta callbacks.
pub(crate) type JsonFn = unsafe extern "C" fn(*mut c_void, *const c_char);

/// The function inside `agentao_done_fn`.
pub(crate) type DoneFn =
    unsafe extern "C" fn(*mut c_void, agentao_status, *const c_char, *const agentao_error);

host_callbacks! {
    (),
    JsonFn,
    agentao_transport,
    DoneFn,
}

/// Host userdata with its callbacks: passed back to the host's callbacks, released with `free`
/// (if any) once. `HostData::new(ptr, free)` is bare userdata; `.with(callbacks)` attaches the
/// host's function pointers, so they travel under the same thread-safety promise.
pub(crate) struct HostData<C: HostCallbacks = ()> {
    ptr: *mut c_void,
    free: Option<unsafe extern "C" fn(*mut c_void)>,
    callbacks: C,
}

// SAFETY: the one place the library takes the host's word for thread safety. The header
// documents that every userdata the host hands the library, and every callback that receives
// it, may be used from library threads; `C` is sealed to plain C function pointers.
unsafe impl<C: HostCallbacks> Send for HostData<C> {}
unsafe impl<C: HostCallbacks> Sync for HostData<C> {}

impl HostData {
    pub(crate) fn new(ptr: *mut c_void, free: Option<unsafe extern "C" fn(*mut c_void)>) -> Self {
        HostData {
            ptr,
            free,
            callbacks: (),
        }
    }

    /// Userdata the host keeps ownership of (no finalizer in the C signature).
    pub(crate) fn borrowed(ptr: *mut c_void) -> Self {
        Self::new(ptr, None)
    }

    /// The same userdata (and finalizer) with the host's callbacks attached.
    pub(crate) fn with<C: HostCallbacks>(self, callbacks: C) -> HostData<C> {
        let this = std::mem::ManuallyDrop::new(self);
        HostData {
            ptr: this.ptr,
            free: this.free,
            callbacks,
        }
    }
}

impl<C: HostCallbacks> HostData<C> {
    pub(crate) fn ptr(&self) -> *mut c_void {
        self.ptr
    }

    pub(crate) fn callbacks(&self) -> &C {
        &self.callbacks
    }
}

impl HostData<JsonFn> {
    /// Calls the host's JSON callback with its userdata and `json` (lent for the call).
    pub(crate) fn call_json(&self, json: &str) {
        super::with_cstr(json, |p| {
            // SAFETY: the host's callback with its own userdata and a string valid for the call.
            in_callback(|| unsafe { (self.callbacks)(self.ptr, p) })
        });
    }

    /// [`HostData::call_json`] for JSON the library wrote, lent in place.
    pub(crate) fn call_json_text(&self, json: JsonText<'_>) {
        super::with_json(json, |p| {
            // SAFETY: as in `call_json`.
            in_callback(|| unsafe { (self.callbacks)(self.ptr, p) })
        });
    }
}

impl<C: HostCallbacks> Drop for HostData<C> {
    fn drop(&mut self) {
        if let Some(free) = self.free {
            // SAFETY: the host's finalizer, called once, when the library lets go.
            in_callback(|| unsafe { free(self.ptr) });
        }
    }
}
