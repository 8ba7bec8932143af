//! The built-in tools, one file per tool; the services they share (file system, shell
//! executor, secrets, result formatting) stay in the parent `tools` module.

pub(crate) mod ask_user;
pub(crate) mod glob;
pub(crate) mod list_directory;
pub(crate) mod read_file;
pub(crate) mod replace;
pub(crate) mod save_memory;
pub(crate) mod search;
pub(crate) mod shell;
pub(crate) mod todo;
pub(crate) mod web_fetch;
pub(crate) mod write_file;

// The tools name the shared argument helpers and services as `super::…`; these imports keep
// those paths valid here.
use super::{
    arg_bool, arg_f64, arg_i64, arg_str, fs, required_str, result_format, shell_exec,
    tool_metadata, ReadTarget, Tool, ToolContext, ToolError,
};
