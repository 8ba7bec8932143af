//! `write_file` (spec §1.4): create, overwrite (atomically) or append, inside the workspace only.

use serde_json::{Map, Value};

use super::fs::os_error;
use super::{arg_bool, required_str, tool_metadata, Tool, ToolContext, ToolError};
use crate::permissions::path_policy;

pub(crate) struct WriteFile;

/// The ValueError Python raises for a path with a NUL byte in it (the tool does not catch it, so
/// the model reads `Error executing <tool>: embedded null byte`).
pub(crate) fn nul_error() -> ToolError {
    ToolError::new("ValueError", "embedded null byte")
}

impl Tool for WriteFile {
    tool_metadata! {
        name: "write_file",
        description: "Write content to a file. If the file does not exist, the tool creates it. To add the \
         content at the end of the file, set `append` to true. Use this tool for new files and \
         small files. To change part of an existing file, use `replace`. A replace call sends \
         less text, is easier to review, and does not delete text by accident.",
        parameters: {"type": "object", "properties": {
            "file_path": {"type": "string", "description": "Path to the file to write"},
            "content": {"type": "string", "description": "Content to write to the file"},
            "append": {"type": "boolean", "description": "Append instead of overwrite (default: false)"}},
            "required": ["file_path", "content"]},
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let file_path = required_str(args, "file_path", "write_file")?;
        let content = required_str(args, "content", "write_file")?;
        let append = arg_bool(args, "append")?.unwrap_or(false);
        if file_path.contains('\0') {
            return Err(nul_error());
        }
        let path = match path_policy::contain_file(ctx.workspace, file_path) {
            Ok(p) => p,
            Err(msg) => return Ok(format!("Error: {msg}")),
        };
        match ctx
            .services
            .fs()
            .write_bytes(&path, content.as_bytes(), append)
        {
            Ok(()) if append => Ok(format!("Successfully appended to {file_path}")),
            Ok(()) => Ok(format!("Successfully wrote to {file_path}")),
            Err(e) => Ok(format!("Error writing file: {}", os_error(&e, &path))),
        }
    }
}
