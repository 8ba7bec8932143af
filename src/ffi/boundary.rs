//! The export shapes (after rustls-ffi's `ffi_panic_boundary!` and `try_*` macros): each runs
//! the body behind the panic boundary and does the prologue its shape needs (`*err_out` and
//! `*_out` NULLed first, required outputs checked), so no export repeats it.
//!
//! | shape | helper |
//! |---|---|
//! | status + `err_out` | [`guard`] |
//! | status + one required `T **out` | [`guard_required_out`] |
//! | status + one optional `T **out` | [`guard_out`] |
//! | no status, a fallback value | [`guard_or`], or `with_ref_or` on a handle |
//! | `*_free` | `free_with` on a handle |
//!
//! Arguments: handles with `try_ref` / `try_take`, strings with `str_arg`, callbacks with
//! [`required`], plain `T *` outputs with [`out_arg`].

use super::{agentao_error, agentao_status, Fail, FfiResult};

impl Fail {
    /// `NULL_ARGUMENT` naming the argument.
    pub(crate) fn null(name: &str) -> Fail {
        Fail(agentao_status::NullArgument, format!("`{name}` is NULL"))
    }
}

/// Runs a status-returning body behind the panic boundary; `*err_out` (if given) is NULLed
/// first and receives the error on failure.
pub(crate) fn guard(
    err_out: *mut *mut agentao_error,
    body: impl FnOnce() -> FfiResult<()>,
) -> agentao_status {
    // SAFETY: err_out is NULL or a valid `agentao_error **` per the API contract.
    let mut err_out = unsafe { err_out.as_mut() };
    if let Some(e) = err_out.as_deref_mut() {
        *e = std::ptr::null_mut();
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|p| {
        Err(Fail(
            agentao_status::Panic,
            format!(
                "panic contained at the C boundary: {}",
                crate::panic_text::panic_text(p)
            ),
        ))
    });
    match result {
        Ok(()) => agentao_status::Ok,
        Err(Fail(status, message)) => {
            if let Some(e) = err_out {
                *e = super::BoxCastable::into_raw(agentao_error::new(status, &message));
            }
            status
        }
    }
}

/// A `T **..._out` parameter as [`guard_out`] hands it to the body: already NULLed, so every
/// failure leaves NULL there; written only on success.
pub(crate) struct Out<T>(Option<*mut *mut T>);

impl<T> Out<T> {
    /// For the rare export that must do something before it checks its output: NULL is
    /// `NULL_ARGUMENT` with `message`.
    pub(crate) fn require(&self, message: &str) -> FfiResult<()> {
        self.0
            .map(drop)
            .ok_or_else(|| Fail(agentao_status::NullArgument, message.into()))
    }

    /// Stores the value `make` builds; for an optional output the caller left NULL nothing is
    /// built, so nothing is allocated and leaked.
    pub(crate) fn write(&self, make: impl FnOnce() -> *mut T) {
        if let Some(p) = self.0 {
            // SAFETY: built from the caller's non-NULL `T **`.
            unsafe { *p = make() };
        }
    }
}

/// The export shape with one required `*_out` result: `*out` is NULLed before anything else
/// runs; a NULL `out` is `NULL_ARGUMENT` naming `name`, and the body does not run.
pub(crate) fn guard_required_out<T>(
    out: *mut *mut T,
    name: &str,
    err_out: *mut *mut agentao_error,
    body: impl FnOnce(&Out<T>) -> FfiResult<()>,
) -> agentao_status {
    let out = nulled(out);
    guard(err_out, || match out.0 {
        Some(_) => body(&out),
        None => Err(Fail::null(name)),
    })
}

/// The export shape with one `*_out` result the caller may leave NULL (then nothing is
/// written): `*out` is NULLed before anything else runs.
pub(crate) fn guard_out<T>(
    out: *mut *mut T,
    err_out: *mut *mut agentao_error,
    body: impl FnOnce(&Out<T>) -> FfiResult<()>,
) -> agentao_status {
    let out = nulled(out);
    guard(err_out, || body(&out))
}

fn nulled<T>(out: *mut *mut T) -> Out<T> {
    let out = Out((!out.is_null()).then_some(out));
    out.write(std::ptr::null_mut);
    out
}

/// Runs a body that has no status behind the panic boundary; a panic yields `fallback`.
pub(crate) fn guard_or<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// A required callback argument; NULL is `NULL_ARGUMENT` naming it.
pub(crate) fn required<F>(f: Option<F>, name: &str) -> FfiResult<F> {
    f.ok_or_else(|| Fail::null(name))
}

/// A required plain output (`uint64_t *id_out`); NULL is `NULL_ARGUMENT` naming it.
///
/// # Safety
/// `p` is NULL or valid for writes for `'a`.
pub(crate) unsafe fn out_arg<'a, T>(p: *mut T, name: &str) -> FfiResult<&'a mut T> {
    p.as_mut().ok_or_else(|| Fail::null(name))
}
