//! The one wrapper for every host pointer the library holds (after wasmtime's c-api
//! `ForeignData`): the pointer, and the finalizer that runs once when the library lets go.

use std::ffi::c_void;

use super::in_callback;

/// Host userdata: passed back to the host's callbacks, released with `free` (if any) once.
pub(crate) struct HostData {
    ptr: *mut c_void,
    free: Option<unsafe extern "C" fn(*mut c_void)>,
}

// SAFETY: the header documents that every userdata the host hands the library may be used
// from library threads, and that its callbacks may run there.
unsafe impl Send for HostData {}
unsafe impl Sync for HostData {}

impl HostData {
    pub(crate) fn new(ptr: *mut c_void, free: Option<unsafe extern "C" fn(*mut c_void)>) -> Self {
        HostData { ptr, free }
    }

    /// Userdata the host keeps ownership of (no finalizer in the C signature).
    pub(crate) fn borrowed(ptr: *mut c_void) -> Self {
        HostData { ptr, free: None }
    }

    pub(crate) fn ptr(&self) -> *mut c_void {
        self.ptr
    }
}

impl Drop for HostData {
    fn drop(&mut self) {
        if let Some(free) = self.free {
            // SAFETY: the host's finalizer, called once, when the library lets go.
            in_callback(|| unsafe { free(self.ptr) });
        }
    }
}
