//! Host capabilities: the C vtables a host plugs into the agent, one file each, the C side and
//! its adapter to the layer's Rust trait together (`tools::FileSystem`, `tools::ShellExecutor`,
//! `tools::MemoryStore`, `tools::host::HostExecutor`, `mcp::McpRegistry`,
//! `events::transport::Transport`, `turn::compaction::controller::CompactionController`,
//! `hooks::HostHooks`, the host-event observers).
//!
//! Every capability is declared once with [`host_capability!`], and every registration takes
//! its vtable through [`adopt`], so the rules are the same for all of them (docs/c-api.md,
//! "Host capabilities"):
//!
//! - **Ownership.** The library owns `userdata` from the moment the registration function is
//!   called: `userdata_free` runs exactly once, when the library lets go, and also when the
//!   registration fails (before it returns). The members up to and including `userdata_free`
//!   are always read.
//! - **`struct_size`.** A value below the declared minimum (the members every version of the
//!   header had) is `AGENTAO_STATUS_INVALID_ARGUMENT`; a smaller, older struct is accepted and
//!   the members past it read as zero: NULL slots, which take their documented defaults; a
//!   larger, newer struct is read up to this library's `sizeof`.
//! - **Required slots.** A NULL required slot is `AGENTAO_STATUS_NULL_ARGUMENT`, naming it.
//!
//! Adding a capability: declare its `#[repr(C)]` struct in its own file here (doc comments
//! become the header's), a `host_capability!` line for it, a registration function that calls
//! [`adopt`], and its adapter; docs/c-api.md lists the files a new slot touches.

// The capability files beside this one (`compaction_controller.rs`, `file_system.rs`,
// `shell_executor.rs`, `host_tool.rs`, `mcp_registry.rs`, `memory_store.rs`, `transport.rs`,
// `hooks.rs`)
// are declared in `ffi/mod.rs`, where their place keeps the header's order.
pub(crate) mod observer;

use super::host_data::HostData;
use super::{agentao_status, Fail, FfiResult};

/// A host capability's C struct, as [`host_capability!`] declares it.
///
/// # Safety
/// An implementation promises that the all-zero value is a valid `Self` (every member a
/// pointer, an `Option` of a function pointer, an integer or a `bool`) and that `MIN_SIZE`
/// lies within `Self`.
pub(crate) unsafe trait HostVtable: Copy {
    /// The C type's name, for messages.
    const NAME: &'static str;
    /// The smallest `struct_size` accepted.
    const MIN_SIZE: usize;
    /// The host's `struct_size`.
    ///
    /// # Safety
    /// `p` points to a host struct at least up to `userdata_free`.
    unsafe fn struct_size(p: *const Self) -> u32;
    /// The userdata and its finalizer, now the library's.
    ///
    /// # Safety
    /// As for `struct_size`.
    unsafe fn owner(p: *const Self) -> HostData;
    /// The first required slot that is NULL.
    fn missing(&self) -> Option<&'static str>;
    /// Sets this library's `struct_size` on the copy.
    fn set_struct_size(&mut self, size: u32);
}

/// Declares a host capability: its C struct (with members named `struct_size`, `userdata` and
/// `userdata_free`, as every capability has), the last member every version of the
/// header had (the minimum `struct_size` ends there; it must be one pointer wide), and its
/// required slots: `host_capability!(agentao_x, minimum: member, required: [slot, ...]);`
macro_rules! host_capability {
    ($ty:ident, minimum: $min:ident, required: [$($req:ident),* $(,)?] $(,)?) => {
        // SAFETY: every member of these structs is a pointer, an optional function pointer,
        // an integer or a bool (all-zero valid), and `$min` is one of their members.
        unsafe impl $crate::ffi::host::HostVtable for $ty {
            const NAME: &'static str = stringify!($ty);
            const MIN_SIZE: usize =
                std::mem::offset_of!($ty, $min) + std::mem::size_of::<usize>();
            unsafe fn struct_size(p: *const Self) -> u32 {
                (*p).struct_size
            }
            unsafe fn owner(p: *const Self) -> $crate::ffi::host_data::HostData {
                $crate::ffi::host_data::HostData::new((*p).userdata, (*p).userdata_free)
            }
            fn missing(&self) -> Option<&'static str> {
                $(if self.$req.is_none() {
                    return Some(stringify!($req));
                })*
                None
            }
            fn set_struct_size(&mut self, size: u32) {
                self.struct_size = size;
            }
        }
    };
}
pub(crate) use host_capability;

/// A registration's first step: the userdata becomes the library's (dropping the returned
/// [`HostData`] runs the finalizer, so every failure after this releases it, and so does this
/// one's own), `struct_size` is checked, and the struct is copied with the members past an
/// older, smaller struct zeroed (NULL slots).
///
/// # Safety
/// `p` is non-NULL and points to a host struct at least `struct_size` bytes long, and at least
/// up to `userdata_free` whatever `struct_size` says.
pub(crate) unsafe fn adopt<V: HostVtable>(p: *const V) -> FfiResult<(HostData, V)> {
    let data = V::owner(p);
    let size = V::struct_size(p) as usize;
    if size < V::MIN_SIZE {
        return Err(Fail(
            agentao_status::InvalidArgument,
            format!(
                "{name}.struct_size is {size}; set it to sizeof({name})",
                name = V::NAME
            ),
        ));
    }
    // SAFETY: all-zero is a valid `V` (the trait's promise).
    let mut copy: V = std::mem::zeroed();
    // Every member of an older struct ends on the boundary of its (pointer-aligned) size, so
    // rounding down to whole pointers takes exactly the members the host's header had.
    let word = std::mem::size_of::<usize>();
    let len = size.min(std::mem::size_of::<V>()) / word * word;
    std::ptr::copy_nonoverlapping(p.cast::<u8>(), (&mut copy as *mut V).cast::<u8>(), len);
    copy.set_struct_size(std::mem::size_of::<V>() as u32);
    if let Some(slot) = copy.missing() {
        return Err(Fail(
            agentao_status::NullArgument,
            format!(
                "{name}.{slot} is NULL: `{slot}` is required",
                name = V::NAME
            ),
        ));
    }
    Ok((data, copy))
}

/// [`adopt`] for the registrations where NULL restores the library's own implementation.
///
/// # Safety
/// As for [`adopt`], when `p` is not NULL.
pub(crate) unsafe fn adopt_opt<V: HostVtable>(p: *const V) -> FfiResult<Option<(HostData, V)>> {
    if p.is_null() {
        return Ok(None);
    }
    adopt(p).map(Some)
}
