//! How MCP results reach the model, as the reference renders them (`agentao/mcp/resources.py`):
//! text joined with newlines; an image as `[image: <mime>, <size>]`; an embedded resource as its
//! text, or its blob decoded (textual types) or saved under the tool-output directory; a
//! resource link as one bracketed line; `structuredContent` only when there is no content; and
//! an `isError` result prefixed `MCP tool error: `.

use std::io::Write;
use std::path::PathBuf;

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::tools::SpillDir;

/// Every blob is checked against this before it is decoded.
pub(crate) const MAX_BLOB_BYTES: usize = 10 * 1024 * 1024;
const SAVED_RESOURCE_PREFIX: &str = "mcp-resource_";

/// The decoded length of a base64 string, without decoding it.
pub(crate) fn decoded_size(b64: &str) -> usize {
    let padding = if b64.ends_with("==") {
        2
    } else if b64.ends_with('=') {
        1
    } else {
        0
    };
    (b64.len() * 3 / 4).saturating_sub(padding)
}

pub(crate) fn format_size(size: usize) -> String {
    match size {
        1 => "1 byte".into(),
        s if s < 1024 => format!("{s} bytes"),
        s if s < 1024 * 1024 => format!("{:.1} KiB", s as f64 / 1024.0),
        s => format!("{:.1} MiB", s as f64 / (1024.0 * 1024.0)),
    }
}

fn is_textual_mime(mime: Option<&str>) -> bool {
    let m = mime
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    !m.is_empty()
        && (m.starts_with("text/")
            || matches!(
                m.as_str(),
                "application/json" | "application/xml" | "application/javascript"
            )
            || m.ends_with("+json")
            || m.ends_with("+xml"))
}

fn extension(uri: &str, mime: Option<&str>) -> String {
    let tail = uri
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("");
    if let Some((_, ext)) = tail.rsplit_once('.') {
        if (1..=8).contains(&ext.len()) && ext.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return format!(".{}", ext.to_ascii_lowercase());
        }
    }
    match mime.unwrap_or("").split(';').next().unwrap_or("").trim() {
        "image/png" => ".png",
        "image/jpeg" => ".jpg",
        "image/gif" => ".gif",
        "image/webp" => ".webp",
        "image/svg+xml" => ".svg",
        "application/pdf" => ".pdf",
        "application/zip" => ".zip",
        "application/gzip" => ".gz",
        "audio/mpeg" => ".mp3",
        "audio/wav" => ".wav",
        "video/mp4" => ".mp4",
        _ => "",
    }
    .to_owned()
}

/// Writes `data` as `mcp-resource_<ts>_<uid><ext>` (mode 0600, never over an existing file).
fn save_binary(
    spill: &SpillDir,
    data: &[u8],
    uri: &str,
    mime: Option<&str>,
) -> std::io::Result<PathBuf> {
    let dir = spill.prepare()?;
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let uid = uuid::Uuid::new_v4().simple().to_string();
    let path = dir.join(format!(
        "{SAVED_RESOURCE_PREFIX}{ts}_{}{}",
        &uid[..6],
        extension(uri, mime)
    ));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    opts.open(&path)?.write_all(data)?;
    Ok(path)
}

/// A blob as text: size-checked first, then decoded as text or saved under `save_dir`.
pub(crate) fn render_blob(
    uri: &str,
    mime: Option<&str>,
    b64: &str,
    save_dir: Option<&SpillDir>,
) -> String {
    let shown = mime.unwrap_or("application/octet-stream");
    let size = decoded_size(b64);
    if size > MAX_BLOB_BYTES {
        return format!(
            "[Binary resource {uri} ({shown}, {}) not decoded: over the {} limit]",
            format_size(size),
            format_size(MAX_BLOB_BYTES)
        );
    }
    let Ok(data) = base64::engine::general_purpose::STANDARD.decode(b64) else {
        return format!("Error: the server returned malformed base64 for {uri}");
    };
    if is_textual_mime(mime) {
        return match String::from_utf8(data) {
            Ok(s) => s,
            Err(_) => {
                format!("Error: the content of {uri} is typed {shown} but is not valid UTF-8")
            }
        };
    }
    let size = format_size(data.len());
    let Some(dir) = save_dir else {
        return format!(
            "[Binary resource {uri} ({shown}, {size}) not saved: this session has no working directory]"
        );
    };
    match save_binary(dir, &data, uri, mime) {
        Ok(path) => format!(
            "[Binary resource {uri} ({shown}, {size}) saved to {}]",
            path.display()
        ),
        Err(e) => format!("[Binary resource {uri} ({shown}, {size}) could not be saved: {e}]"),
    }
}

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn resource_link(block: &Value, read_hint: Option<&str>) -> String {
    let uri = s(block, "uri").unwrap_or("");
    let mut text = format!("[Resource {uri}");
    if let Some(label) = s(block, "title")
        .or_else(|| s(block, "name"))
        .filter(|l| !l.is_empty())
    {
        text.push_str(&format!(" \"{label}\""));
    }
    let mut details = Vec::new();
    if let Some(m) = s(block, "mimeType").filter(|m| !m.is_empty()) {
        details.push(m.to_owned());
    }
    if let Some(size) = block.get("size").and_then(Value::as_u64) {
        details.push(format_size(size as usize));
    }
    if !details.is_empty() {
        text.push_str(&format!(" ({})", details.join(", ")));
    }
    if let Some(d) = s(block, "description").filter(|d| !d.is_empty()) {
        text.push_str(&format!(": {d}"));
    }
    if let Some(server) = read_hint {
        text.push_str(&format!(
            ". Read it with read_mcp_resource(server=\"{server}\", uri=\"{uri}\")"
        ));
    }
    text + "]"
}

/// A `tools/call` result (its JSON) as the text the model reads, and whether it is an error.
pub fn render_call_result(
    result: &Value,
    save_dir: Option<&SpillDir>,
    read_hint: Option<&str>,
) -> (String, bool) {
    let empty = Vec::new();
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let many = content.len() > 1;
    let mut parts: Vec<String> = Vec::with_capacity(content.len());
    for block in content {
        match s(block, "type").unwrap_or("") {
            "text" => parts.push(s(block, "text").unwrap_or("").to_owned()),
            "image" => parts.push(format!(
                "[image: {}, {}]",
                s(block, "mimeType").unwrap_or("None"),
                format_size(decoded_size(s(block, "data").unwrap_or("")))
            )),
            "resource" => {
                let r = block.get("resource").unwrap_or(&Value::Null);
                let uri = s(r, "uri").unwrap_or("unknown");
                if let Some(text) = s(r, "text") {
                    parts.push(if many {
                        format!("--- {uri} ---\n{text}")
                    } else {
                        text.to_owned()
                    });
                } else if let Some(blob) = s(r, "blob") {
                    parts.push(render_blob(uri, s(r, "mimeType"), blob, save_dir));
                } else {
                    parts.push(format!("[resource: {uri}]"));
                }
            }
            "resource_link" => parts.push(resource_link(block, read_hint)),
            other => parts.push(format!("[{other}]")),
        }
    }
    if content.is_empty() {
        if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
            parts.push(structured.to_string());
        }
    }
    let text = parts.join("\n");
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        (format!("MCP tool error: {text}"), true)
    } else {
        (text, false)
    }
}

/// A `tools/call` result as the text the model reads, and whether it is an error: as
/// [`render_call_result`] renders its JSON. The common result, text blocks only, is read from
/// rmcp's type as it is (a single block's text moved, not copied); any other is rendered from
/// its JSON.
pub fn render_tool_result(
    mut result: CallToolResult,
    save_dir: Option<&SpillDir>,
    read_hint: Option<&str>,
) -> (String, bool) {
    let all_text = !result.content.is_empty()
        && result
            .content
            .iter()
            .all(|b| matches!(b, ContentBlock::Text(_)));
    if !all_text {
        return match serde_json::to_value(&result) {
            Ok(json) => render_call_result(&json, save_dir, read_hint),
            Err(e) => (format!("MCP tool error: {e}"), false),
        };
    }
    let mut text = String::new();
    for (i, block) in result.content.iter_mut().enumerate() {
        if let ContentBlock::Text(t) = block {
            if i == 0 {
                text = std::mem::take(&mut t.text);
            } else {
                text.push('\n');
                text.push_str(&t.text);
            }
        }
    }
    if result.is_error == Some(true) {
        (format!("MCP tool error: {text}"), true)
    } else {
        (text, false)
    }
}

/// A `resources/read` result as `read_mcp_resource` returns it.
pub(crate) fn render_read(uri: &str, result: &Value, save_dir: Option<&SpillDir>) -> String {
    let empty = Vec::new();
    let contents = result
        .get("contents")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    if contents.is_empty() {
        return format!("The server returned no content for {uri}");
    }
    let parts: Vec<String> = contents
        .iter()
        .map(|item| {
            let item_uri = s(item, "uri").unwrap_or(uri);
            let body = if let Some(text) = s(item, "text") {
                text.to_owned()
            } else if let Some(blob) = s(item, "blob") {
                render_blob(item_uri, s(item, "mimeType"), blob, save_dir)
            } else {
                format!("[Resource {item_uri} carried neither text nor blob]")
            };
            if contents.len() > 1 {
                format!("--- {item_uri} ---\n{body}")
            } else {
                body
            }
        })
        .collect();
    parts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_blocks_render_as_the_reference() {
        let r = json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "body"}},
            {"type": "resource_link", "uri": "test://x", "name": "X", "mimeType": "text/plain", "size": 2048, "description": "d"},
            {"type": "audio", "data": ""}
        ]});
        let (text, err) = render_call_result(&r, None, Some("ev"));
        assert!(!err);
        assert_eq!(
            text,
            "one\n[image: image/png, 8 bytes]\n--- file:///a.txt ---\nbody\n\
             [Resource test://x \"X\" (text/plain, 2.0 KiB): d. Read it with \
             read_mcp_resource(server=\"ev\", uri=\"test://x\")]\n[audio]"
        );
    }

    #[test]
    fn errors_structured_content_and_blobs() {
        let (t, e) = render_call_result(
            &json!({"content": [{"type": "text", "text": "bad"}], "isError": true}),
            None,
            None,
        );
        assert_eq!((t.as_str(), e), ("MCP tool error: bad", true));
        let (t, _) = render_call_result(
            &json!({"content": [], "structuredContent": {"a": 1}}),
            None,
            None,
        );
        assert_eq!(t, "{\"a\":1}");
        let blob = json!({"content": [{"type": "resource", "resource": {"uri": "x://b", "mimeType": "application/json", "blob": "eyJhIjoxfQ=="}}]});
        assert_eq!(render_call_result(&blob, None, None).0, "{\"a\":1}");
        let bin = json!({"content": [{"type": "resource", "resource": {"uri": "x://b.bin", "blob": "AAEC"}}]});
        assert_eq!(
            render_call_result(&bin, None, None).0,
            "[Binary resource x://b.bin (application/octet-stream, 3 bytes) not saved: this session has no working directory]"
        );
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillDir::unconfined(dir.path().to_path_buf());
        let saved = render_call_result(&bin, Some(&spill), None).0;
        assert!(saved.contains("saved to "), "{saved}");
        let path = saved
            .split("saved to ")
            .nth(1)
            .unwrap()
            .trim_end_matches(']');
        assert_eq!(std::fs::read(path).unwrap(), vec![0, 1, 2]);
        assert!(path.ends_with(".bin"));
        let bad =
            json!({"content": [{"type": "resource", "resource": {"uri": "x://c", "blob": "!!"}}]});
        assert_eq!(
            render_call_result(&bad, None, None).0,
            "Error: the server returned malformed base64 for x://c"
        );
    }

    /// The typed rendering gives what the JSON rendering gives, text-only results (read from
    /// the type) and every other shape (rendered from its JSON) alike.
    #[test]
    fn the_typed_result_renders_as_its_json() {
        let results = [
            json!({"content": [{"type": "text", "text": "one"}]}),
            json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}, {"type": "text", "text": "c\nd"}], "isError": false}),
            json!({"content": [{"type": "text", "text": "bad"}], "isError": true}),
            json!({"content": [{"type": "text", "text": "t", "annotations": {"priority": 0.5}}], "structuredContent": {"a": 1}}),
            json!({"content": [{"type": "text", "text": "one"}, {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}], "isError": true}),
            json!({"content": [{"type": "resource_link", "uri": "test://x", "name": "X"}]}),
            json!({"content": [], "structuredContent": {"a": [1, null]}}),
            json!({"content": [], "structuredContent": null}),
            json!({"isError": true}),
        ];
        for r in results {
            let typed: CallToolResult = serde_json::from_value(r.clone()).unwrap();
            assert_eq!(
                render_tool_result(typed, None, Some("ev")),
                render_call_result(&r, None, Some("ev")),
                "{r}"
            );
        }
    }
}
