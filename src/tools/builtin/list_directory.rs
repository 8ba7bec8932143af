//! `list_directory` (spec §1.6): directories first, then files, case-insensitively sorted.

use serde_json::{Map, Value};

use super::fs::os_error;
use super::{arg_bool, arg_str, tool_metadata, ReadTarget, Tool, ToolContext, ToolError};
use crate::permissions::listed_paths::Listed;

pub(crate) struct ListDirectory;

impl Tool for ListDirectory {
    tool_metadata! {
        name: "list_directory",
        read_only: true,
        description: "List the contents of a directory, showing files and subdirectories.",
        parameters: {"type": "object", "properties": {
            "directory_path": {"type": "string", "description": "Directory to list. Default: the working directory."},
            "recursive": {"type": "boolean", "description": "If true, also list the contents of each subdirectory. Default false.", "default": false}},
            "required": []},
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let p = arg_str(args, "directory_path")?.unwrap_or(".");
        let recursive = arg_bool(args, "recursive")?.unwrap_or(false);
        let path = match ctx.existing_for_read(p, ReadTarget::Directory) {
            Ok(path) => path,
            Err(text) => return Ok(text),
        };
        let fs = ctx.services.fs();
        if !fs.is_dir(&path) {
            return Ok(format!("Error: {p} is not a directory"));
        }
        // (is_dir, lower-cased sort key, line)
        let mut rows: Vec<(bool, String, String)> = Vec::new();
        let mut listed = ctx.listed_paths();
        if recursive {
            let stop = || ctx.cancel.is_cancelled();
            let entries = match fs.walk(&path, None, &stop) {
                Ok(e) => e,
                Err(e) => return Ok(format!("Error listing directory: {}", os_error(&e, &path))),
            };
            for entry in entries {
                let item = &entry.path;
                let rel = item
                    .strip_prefix(&path)
                    .unwrap_or(item)
                    .to_string_lossy()
                    .into_owned();
                let key = item.to_string_lossy().to_lowercase();
                match listed.check(item) {
                    Listed::Outside => continue,
                    Listed::LinkOut => {
                        rows.push((false, key, outside_link_row(&rel)));
                        continue;
                    }
                    Listed::Inside => {}
                }
                if entry.is_dir {
                    rows.push((true, key, format!("[DIR]  {rel}/")));
                } else {
                    let size = fs.stat(item).map(|s| s.size).unwrap_or(0);
                    rows.push((false, key, format!("[FILE] {rel} ({size} bytes)")));
                }
            }
        } else {
            let entries = match fs.list_dir(&path) {
                Ok(e) => e,
                Err(e) => return Ok(format!("Error listing directory: {}", os_error(&e, &path))),
            };
            for e in entries {
                let key = e.name.to_lowercase();
                match listed.check(&path.join(&e.name)) {
                    Listed::Outside => continue,
                    Listed::LinkOut => {
                        rows.push((false, key, outside_link_row(&e.name)));
                        continue;
                    }
                    Listed::Inside => {}
                }
                if e.is_dir {
                    rows.push((true, key, format!("[DIR]  {}/", e.name)));
                } else {
                    rows.push((false, key, format!("[FILE] {} ({} bytes)", e.name, e.size)));
                }
            }
        }
        rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let lines: Vec<&str> = rows.iter().map(|r| r.2.as_str()).collect();
        Ok(format!("Directory: {p}\n\n{}", lines.join("\n")))
    }
}

/// A link the workspace holds, with nothing of what it leads to (a deviation: the reference
/// lists the target's kind and size).
fn outside_link_row(name: &str) -> String {
    format!("[LINK] {name} (leads outside the workspace)")
}
