//! `write_file`: create, overwrite (atomically) or append, inside the workspace only.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{arg_bool, required_str, Tool, ToolContext, ToolError};

pub struct WriteFile;

/// Python's `str(OSError)` layout, which the model-visible error strings carry.
pub fn os_error(e: &std::io::Error, path: &Path) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let full = e.to_string();
            let text = full.split(" (os error").next().unwrap_or(&full);
            format!("[Errno {code}] {text}: '{}'", path.display())
        }
        None => e.to_string(),
    }
}

/// The PathPolicy `contain_file` rule: the parent resolved through every symlink, the leaf put
/// back, and a leaf symlink's target also inside the root.
pub fn contain_file(root: &Path, raw: &str) -> Result<PathBuf, String> {
    let refuse = |resolved: &Path| {
        format!(
            "PathPolicy: refused '{raw}' — resolves to '{}', outside project_root '{}'",
            resolved.display(),
            root.display()
        )
    };
    if raw.contains('\0') {
        return Err(refuse(Path::new(&raw.replace('\0', "\\0"))));
    }
    let joined = super::normalize(&super::resolve_path(root, raw));
    let leaf = joined.file_name().map(|s| s.to_owned());
    let parent = joined.parent().unwrap_or(Path::new("/"));
    let resolved_parent = resolve_existing_prefix(parent);
    let resolved = match &leaf {
        Some(l) => resolved_parent.join(l),
        None => resolved_parent,
    };
    if !resolved.starts_with(root) || resolved == root {
        return Err(refuse(&resolved));
    }
    if let Ok(meta) = std::fs::symlink_metadata(&resolved) {
        if meta.file_type().is_symlink() {
            let target = std::fs::canonicalize(&resolved)
                .unwrap_or_else(|_| resolve_dangling_link(&resolved));
            if !target.starts_with(root) {
                return Err(refuse(&target));
            }
        }
    }
    Ok(resolved)
}

/// Canonicalizes the longest existing ancestor and re-appends the rest.
fn resolve_existing_prefix(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&existing) {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (
            existing.file_name().map(|s| s.to_owned()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

fn resolve_dangling_link(link: &Path) -> PathBuf {
    match std::fs::read_link(link) {
        Ok(t) if t.is_absolute() => super::normalize(&t),
        Ok(t) => super::normalize(&link.parent().unwrap_or(Path::new("/")).join(t)),
        Err(_) => link.to_path_buf(),
    }
}

impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Write text to a file inside the working directory, creating parent directories as needed. \
         Overwrites the file atomically unless `append` is true."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "file_path": {"type": "string", "description": "Path of the file, relative to the working directory."},
            "content": {"type": "string", "description": "The full text to write."},
            "append": {"type": "boolean", "description": "Append instead of overwriting.", "default": false}},
            "required": ["file_path", "content"]})
    }
    fn is_read_only(&self) -> bool {
        false
    }
    fn requires_confirmation(&self) -> bool {
        true
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let file_path = required_str(args, "file_path", "write_file")?;
        let content = required_str(args, "content", "write_file")?;
        let append = arg_bool(args, "append")?.unwrap_or(false);
        let path = match contain_file(ctx.workspace, file_path) {
            Ok(p) => p,
            Err(msg) => return Ok(format!("Error: {msg}")),
        };
        match write(&path, content.as_bytes(), append) {
            Ok(()) if append => Ok(format!("Successfully appended to {file_path}")),
            Ok(()) => Ok(format!("Successfully wrote to {file_path}")),
            Err(e) => Ok(format!("Error writing file: {}", os_error(&e, &path))),
        }
    }
}

fn write(path: &Path, data: &[u8], append: bool) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if append {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        return f.write_all(data);
    }
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(_) => return std::fs::write(path, data),
    };
    if meta.permissions().readonly() {
        return Err(std::io::Error::from_raw_os_error(libc::EACCES));
    }
    // Overwrite atomically: a sibling temp file renamed over the target, old mode kept.
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, meta.permissions())?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containment() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        assert!(contain_file(&root, "a/b.txt").is_ok());
        let e = contain_file(&root, "../x").unwrap_err();
        assert!(
            e.starts_with("PathPolicy: refused '../x' — resolves to '"),
            "{e}"
        );
        assert!(contain_file(&root, "/etc/passwd").is_err());
        std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap();
        assert!(contain_file(&root, "out/x").is_err());
        std::os::unix::fs::symlink("/etc/passwd", root.join("leaf")).unwrap();
        assert!(contain_file(&root, "leaf").is_err());
    }
}
