//! The built-in tools, one file per tool; the services they share (file system, shell
//! executor, secrets, result formatting) stay in the parent `tools` module.

pub mod ask_user;
pub mod glob;
pub mod list_directory;
pub mod read_file;
pub mod replace;
pub mod save_memory;
pub mod search;
pub mod shell;
pub mod todo;
pub mod web_fetch;
pub mod write_file;

// The tools name the shared argument helpers and services as `super::…`; these imports keep
// those paths valid here.
use super::{
    arg_bool, arg_f64, arg_i64, arg_str, fs, git_launch, required_str, result_format, shell_exec,
    Tool, ToolContext, ToolError,
};
