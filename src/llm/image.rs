//! Images in a user message (spec §4.3, §5.2): what a host passes, the limits it is checked
//! against, and the `image_url` data-URL part the Chat Completions wire sends.
//!
//! A user message with images is kept in history as the wire shape itself
//! (`{"role":"user","content":[{"type":"text",…},{"type":"image_url",…}]}`, a
//! [`Message::Host`]), so history get/set round-trips it byte for byte and every wire reads the
//! same parts.

use base64::Engine;
use serde_json::{json, Map, Value};

use super::Message;

/// MIME types a model accepts as images on every wire this library speaks.
pub const ALLOWED_MIME_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];
/// The largest image, in bytes (decoded): the OpenAI API's own limit per image.
pub const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;
/// The most images in one message.
pub const MAX_IMAGES: usize = 16;
/// The most image bytes in one message, all images together.
pub const MAX_TOTAL_IMAGE_BYTES: usize = 50 * 1024 * 1024;
/// What one image counts in the token estimate: providers bill a high-detail image at about a
/// thousand tokens, whatever its encoded size.
pub(crate) const IMAGE_TOKENS: u64 = 1_000;

/// One image a host passes with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInput {
    pub mime_type: String,
    /// The image's bytes (not base64).
    pub data: Vec<u8>,
}

/// Checks the images of one message; the error names the first bad one.
pub fn validate(images: &[ImageInput]) -> Result<(), String> {
    if images.len() > MAX_IMAGES {
        return Err(format!(
            "images: {} images, at most {MAX_IMAGES} are accepted in one message",
            images.len()
        ));
    }
    let mut total = 0usize;
    for (i, img) in images.iter().enumerate() {
        if !ALLOWED_MIME_TYPES.contains(&img.mime_type.as_str()) {
            return Err(format!(
                "images[{i}]: MIME type '{}' is not accepted (one of {})",
                img.mime_type.escape_default(),
                ALLOWED_MIME_TYPES.join(", ")
            ));
        }
        if img.data.is_empty() {
            return Err(format!("images[{i}]: the image is empty"));
        }
        if img.data.len() > MAX_IMAGE_BYTES {
            return Err(format!(
                "images[{i}]: {} bytes, over the limit of {MAX_IMAGE_BYTES} bytes",
                img.data.len()
            ));
        }
        total += img.data.len();
    }
    if total > MAX_TOTAL_IMAGE_BYTES {
        return Err(format!(
            "images: {total} bytes together, over the limit of {MAX_TOTAL_IMAGE_BYTES} bytes"
        ));
    }
    Ok(())
}

/// The user message `text` with `images` as content parts (the text first).
pub(crate) fn user_message_with_images(text: String, images: &[ImageInput]) -> Message {
    let mut parts = vec![json!({"type": "text", "text": text})];
    for img in images {
        let b64 = base64::engine::general_purpose::STANDARD.encode(&img.data);
        parts.push(json!({"type": "image_url", "image_url": {"url": format!("data:{};base64,{b64}", img.mime_type)}}));
    }
    let mut m = Map::new();
    m.insert("role".into(), json!("user"));
    m.insert("content".into(), Value::Array(parts));
    Message::Host(m)
}

/// The content parts of a message, when its content is a list.
pub(crate) fn parts(m: &Message) -> Option<&Vec<Value>> {
    match m {
        Message::Host(map) => map.get("content").and_then(Value::as_array),
        _ => None,
    }
}

/// The MIME type of an `image_url` part (`None` for other parts).
pub(crate) fn image_part_mime(part: &Value) -> Option<&str> {
    if part.get("type").and_then(Value::as_str) != Some("image_url") {
        return None;
    }
    let url = part.pointer("/image_url/url").and_then(Value::as_str)?;
    Some(
        url.strip_prefix("data:")
            .and_then(|u| u.split(';').next())
            .unwrap_or("image"),
    )
}

/// The message with every image part replaced by text: `replace(index, mime)` gives the text
/// of the image `index` (counted in the message). Text parts are joined; the result is a plain
/// user message. `None` when the message has no image.
pub(crate) fn without_images(
    m: &Message,
    mut replace: impl FnMut(usize, &str) -> String,
) -> Option<Message> {
    let parts = parts(m)?;
    if !parts.iter().any(|p| image_part_mime(p).is_some()) {
        return None;
    }
    let mut text = String::new();
    let mut n = 0;
    for p in parts {
        let piece = match image_part_mime(p) {
            Some(mime) => {
                n += 1;
                replace(n - 1, mime)
            }
            None => p
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        };
        if !text.is_empty() && !piece.is_empty() {
            text.push('\n');
        }
        text.push_str(&piece);
    }
    Some(Message::User(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(len: usize) -> ImageInput {
        ImageInput {
            mime_type: "image/png".into(),
            data: vec![1; len],
        }
    }

    #[test]
    fn bad_images_are_named() {
        assert!(validate(&[png(10)]).is_ok());
        let e = validate(&[png(10), png(0)]).unwrap_err();
        assert!(e.starts_with("images[1]: the image is empty"), "{e}");
        let e = validate(&[ImageInput {
            mime_type: "image/svg+xml".into(),
            data: vec![1],
        }])
        .unwrap_err();
        assert!(e.contains("'image/svg+xml' is not accepted"), "{e}");
        let e = validate(&[png(50 * 1024 * 1024)]).unwrap_err();
        assert!(e.contains("over the limit"), "{e}");
        let e = validate(&vec![png(1); 17]).unwrap_err();
        assert!(e.contains("at most 16"), "{e}");
        let e = validate(&[
            png(MAX_IMAGE_BYTES),
            png(MAX_IMAGE_BYTES),
            png(MAX_IMAGE_BYTES),
        ])
        .unwrap_err();
        assert!(e.contains("together"), "{e}");
    }

    #[test]
    fn a_message_with_images_is_the_wire_shape_and_reads_back() {
        let m = user_message_with_images("look".into(), &[png(3)]);
        let j = serde_json::to_value(&m).unwrap();
        assert_eq!(
            j,
            json!({"role": "user", "content": [{"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AQEB"}}]})
        );
        let back = Message::from_host(j.as_object().unwrap().clone());
        assert_eq!(back, m);
        let plain = without_images(&m, |i, mime| {
            format!("<attachment uri=\"inline:image-{i}\" mimetype=\"{mime}\"/>")
        })
        .unwrap();
        assert_eq!(
            plain,
            Message::User(
                "look\n<attachment uri=\"inline:image-0\" mimetype=\"image/png\"/>".into()
            )
        );
    }
}
