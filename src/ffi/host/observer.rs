//! Host-event observers: a function and its userdata per registration (no vtable), under the
//! same ownership rule as every host capability. The exported functions stay in `ffi/agent.rs`,
//! where they keep their place in the header.

use std::ffi::c_void;
use std::sync::Arc;

use crate::ffi::agent::{agent_ref, agentao_agent, agentao_event_fn};
use crate::ffi::host_data::HostData;
use crate::ffi::{out_arg, required, FfiResult};

/// `agentao_agent_add_host_event_observer`: the userdata is the library's from the start, so
/// every failure releases it.
///
/// # Safety
/// `agent` is NULL or a live agent; `id_out` is NULL or writable.
pub(crate) unsafe fn add(
    agent: *const agentao_agent,
    observer: agentao_event_fn,
    userdata: *mut c_void,
    userdata_free: Option<unsafe extern "C" fn(*mut c_void)>,
    id_out: *mut u64,
) -> FfiResult<()> {
    let data = HostData::new(userdata, userdata_free);
    let agent = agent_ref(agent)?;
    let f = required(observer, "observer")?;
    let id_out = out_arg(id_out, "id_out")?;
    let host = data.with(f);
    *id_out = agent
        .host_events()
        .add_observer(Arc::new(move |json: &str| host.call_json(json)));
    Ok(())
}
