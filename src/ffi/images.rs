//! Images with a message: the C array hosts pass, and the entry points that take one.

use std::ffi::{c_char, c_void};

use super::agent::{
    agentao_agent, agentao_delta_fn, agentao_done_fn, start, turn_ended_ok, turn_options,
    with_agent_out,
};
use super::cancel::agentao_cancel_token;
use super::stream::{agentao_stream, open_turn_stream};
use super::{agentao_error, agentao_status, guard, out_string, reentrant, required, str_arg};
use super::{Fail, FfiResult};
use crate::agent::{AgentError, Completion, TurnOptions};
use crate::llm::image::{self, ImageInput, MAX_IMAGES, MAX_IMAGE_BYTES};

/// One image sent with a message: `mime_type` (one of `image/png`, `image/jpeg`, `image/gif`,
/// `image/webp`), and `len` bytes of the image itself at `data` (raw bytes, not base64).
/// Borrowed for the call only: the library copies what it keeps.
#[repr(C)]
pub struct agentao_image {
    pub mime_type: *const c_char,
    pub data: *const u8,
    pub len: usize,
}

fn invalid(msg: String) -> Fail {
    Fail(agentao_status::InvalidArgument, msg)
}

/// The host's images, checked (count, pointers, MIME type, sizes) before any byte is copied.
unsafe fn images_arg(images: *const agentao_image, n_images: usize) -> FfiResult<Vec<ImageInput>> {
    if n_images == 0 {
        return Ok(Vec::new());
    }
    if images.is_null() {
        return Err(Fail::null("images"));
    }
    if n_images > MAX_IMAGES {
        return Err(invalid(format!(
            "images: {n_images} images, at most {MAX_IMAGES} are accepted in one message"
        )));
    }
    // SAFETY: the caller passes `n_images` readable elements at `images` (documented).
    let list = unsafe { std::slice::from_raw_parts(images, n_images) };
    let mut out = Vec::with_capacity(n_images);
    for (i, img) in list.iter().enumerate() {
        let mime = str_arg(img.mime_type, &format!("images[{i}].mime_type"))?;
        if img.data.is_null() {
            return Err(Fail::null(&format!("images[{i}].data")));
        }
        if img.len == 0 {
            return Err(invalid(format!("images[{i}]: the image is empty")));
        }
        if img.len > MAX_IMAGE_BYTES {
            return Err(invalid(format!(
                "images[{i}]: {} bytes, over the limit of {MAX_IMAGE_BYTES} bytes",
                img.len
            )));
        }
        if !image::ALLOWED_MIME_TYPES.contains(&mime) {
            return Err(invalid(format!(
                "images[{i}]: MIME type '{}' is not accepted (one of {})",
                mime.escape_default(),
                image::ALLOWED_MIME_TYPES.join(", ")
            )));
        }
        // SAFETY: the caller passes `len` readable bytes at `data` (documented).
        let bytes = unsafe { std::slice::from_raw_parts(img.data, img.len) };
        out.push(ImageInput {
            mime_type: mime.to_owned(),
            data: bytes.to_vec(),
        });
    }
    image::validate(&out).map_err(invalid)?;
    Ok(out)
}

/// `agentao_agent_chat` with images: `images` points to `n_images` `agentao_image` structs (NULL
/// when `n_images` is 0), borrowed for the call. They are sent as `image_url` data-URL parts
/// after the text and kept in the history. A bad image is refused before the turn starts,
/// with nothing sent: NULL `images`, `mime_type` or `data` is `AGENTAO_STATUS_NULL_ARGUMENT`;
/// more than 16 images, an empty image, one over 20 MiB, 50 MiB together, or a MIME type
/// other than `image/png`, `image/jpeg`, `image/gif`, `image/webp` is
/// `AGENTAO_STATUS_INVALID_ARGUMENT`, the message naming the image. Otherwise as
/// `agentao_agent_chat`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn agentao_agent_chat_images(
    agent: *mut agentao_agent,
    message: *const c_char,
    images: *const agentao_image,
    n_images: usize,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    text_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_agent_out(agent, text_out, "text_out", err_out, |agent, text_out| {
        let message = str_arg(message, "message")?;
        let images = images_arg(images, n_images)?;
        if reentrant() {
            return Err(AgentError::Reentrant.into());
        }
        let opts = TurnOptions {
            images,
            ..turn_options(max_iterations, cancel)
        };
        let outcome = turn_ended_ok(&agent.run_blocking(message, opts))?;
        text_out.write(|| out_string(&outcome.text));
        Ok(())
    })
}

/// `agentao_agent_run` with images (as `agentao_agent_chat_images`).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn agentao_agent_run_images(
    agent: *mut agentao_agent,
    message: *const c_char,
    images: *const agentao_image,
    n_images: usize,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    on_done: agentao_done_fn,
    userdata: *mut c_void,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        run_with_images(
            agent,
            message,
            images,
            n_images,
            max_iterations,
            cancel,
            on_done,
            userdata,
            Completion::Host,
        )
    })
}

/// The body of `agentao_agent_run_images` and `agentao_agent_run_handoff`: the images checked,
/// then the turn started with `on_done` run where `completion` says.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn run_with_images(
    agent: *mut agentao_agent,
    message: *const c_char,
    images: *const agentao_image,
    n_images: usize,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    on_done: agentao_done_fn,
    userdata: *mut c_void,
    completion: Completion,
) -> FfiResult<()> {
    let images = images_arg(images, n_images)?;
    start(
        agent,
        message,
        max_iterations,
        cancel,
        None,
        on_done,
        userdata,
        images,
        completion,
    )
}

/// `agentao_agent_stream_open` with images (as `agentao_agent_chat_images`): the pull stream of
/// a turn whose message carries them. On success `*stream_out` owns the stream (release with
/// `agentao_stream_free`).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_stream_open_images(
    agent: *mut agentao_agent,
    message: *const c_char,
    images: *const agentao_image,
    n_images: usize,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    stream_out: *mut *mut agentao_stream,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    open_turn_stream(
        agent,
        message,
        max_iterations,
        cancel,
        || images_arg(images, n_images),
        stream_out,
        err_out,
    )
}

/// `agentao_agent_stream` with images (as `agentao_agent_chat_images`).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn agentao_agent_stream_images(
    agent: *mut agentao_agent,
    message: *const c_char,
    images: *const agentao_image,
    n_images: usize,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    on_delta: agentao_delta_fn,
    on_done: agentao_done_fn,
    userdata: *mut c_void,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let on_delta = required(on_delta, "on_delta")?;
        let images = images_arg(images, n_images)?;
        start(
            agent,
            message,
            max_iterations,
            cancel,
            Some(on_delta),
            on_done,
            userdata,
            images,
            Completion::Host,
        )
    })
}
