//! `list_directory`: directories first, then files, case-insensitively sorted.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::{arg_bool, arg_str, Tool, ToolContext, ToolError};

pub struct ListDirectory;

impl Tool for ListDirectory {
    fn name(&self) -> &str {
        "list_directory"
    }
    fn description(&self) -> &str {
        "List the entries of a directory: subdirectories first, then files with their sizes. \
         With `recursive`, every descendant is listed relative to the directory."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "directory_path": {"type": "string", "description": "Directory to list (default: the working directory).", "default": "."},
            "recursive": {"type": "boolean", "description": "List all descendants.", "default": false}},
            "required": []})
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn requires_confirmation(&self) -> bool {
        false
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let p = arg_str(args, "directory_path")?.unwrap_or(".");
        let recursive = arg_bool(args, "recursive")?.unwrap_or(false);
        let path = match ctx.resolve_read(p) {
            Ok(path) => path,
            Err(msg) => return Ok(msg),
        };
        if !path.exists() {
            return Ok(format!("Error: Directory {p} does not exist"));
        }
        if !path.is_dir() {
            return Ok(format!("Error: {p} is not a directory"));
        }
        let mut entries = Vec::new();
        if let Err(e) = collect(&path, "", recursive, ctx, &mut entries) {
            return Ok(format!(
                "Error listing directory: {}",
                super::write_file::os_error(&e, &path)
            ));
        }
        entries.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.key.cmp(&b.key)));
        let mut out = format!("Directory: {p}\n\n");
        let lines: Vec<String> = entries
            .iter()
            .map(|e| {
                if e.is_dir {
                    format!("[DIR]  {}/", e.name)
                } else {
                    format!("[FILE] {} ({} bytes)", e.name, e.size)
                }
            })
            .collect();
        out.push_str(&lines.join("\n"));
        Ok(out)
    }
}

struct Entry {
    name: String,
    key: String,
    is_dir: bool,
    size: u64,
}

fn collect(
    dir: &Path,
    prefix: &str,
    recursive: bool,
    ctx: &ToolContext<'_>,
    out: &mut Vec<Entry>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        if ctx.cancel.is_cancelled() {
            return Ok(());
        }
        let entry = entry?;
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        // Follows symlinks for the kind and size, as Path.is_dir() does, but never recurses into
        // a linked directory, so a symlink loop cannot run away.
        let meta = std::fs::metadata(entry.path()).or_else(|_| entry.metadata())?;
        let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(false);
        let is_dir = meta.is_dir();
        out.push(Entry {
            key: name.to_lowercase(),
            size: if is_dir { 0 } else { meta.len() },
            name: name.clone(),
            is_dir,
        });
        if recursive && is_dir && !is_link {
            collect(&entry.path(), &format!("{name}/"), true, ctx, out)?;
        }
    }
    Ok(())
}
