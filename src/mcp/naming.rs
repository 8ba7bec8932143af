//! `mcp_<server>_<tool>`: the reference's tool names (`agentao/mcp/tool.py`).
//!
//! Characters outside `[A-Za-z0-9_]` become `_`. A name longer than 64 characters (OpenAI's
//! limit on function names) or one where a non-ASCII character was replaced is cut to make
//! room for `_` and 8 hex digits of SHA-256 over `server \0 tool`: stable across connects and
//! processes, so a permission rule naming the tool keeps meaning the same tool.

use sha2::{Digest, Sha256};

pub(crate) const MAX_TOOL_NAME_LEN: usize = 64;
const HASH_LEN: usize = 8;

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The model-facing name of `tool` on `server`.
pub(crate) fn tool_name(server: &str, tool: &str) -> String {
    let name = format!("mcp_{}_{}", sanitize(server), sanitize(tool));
    let lossy = !(server.is_ascii() && tool.is_ascii());
    if name.len() <= MAX_TOOL_NAME_LEN && !lossy {
        return name;
    }
    let digest = Sha256::new()
        .chain_update(server.as_bytes())
        .chain_update([0u8])
        .chain_update(tool.as_bytes())
        .finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let suffix = format!("_{}", &hex[..HASH_LEN]);
    // Every character is ASCII after sanitising, so byte and character counts agree.
    let keep = name.len().min(MAX_TOOL_NAME_LEN - suffix.len());
    format!("{}{suffix}", &name[..keep])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_through_with_invalid_characters_replaced() {
        assert_eq!(tool_name("fs", "read_file"), "mcp_fs_read_file");
        assert_eq!(tool_name("my-server", "get-sum"), "mcp_my_server_get_sum");
        assert_eq!(tool_name("a.b", "c d"), "mcp_a_b_c_d");
    }

    #[test]
    fn long_and_non_ascii_names_get_the_hash_suffix() {
        // Values computed with the reference's make_mcp_tool_name.
        let n = tool_name("srv", "查询");
        assert_eq!(n, "mcp_srv____7f7226b1");
        assert_eq!(tool_name("srv", "搜索"), "mcp_srv____55df05a7");
        let long = "t".repeat(80);
        let n = tool_name("server", &long);
        assert_eq!(
            n,
            "mcp_server_tttttttttttttttttttttttttttttttttttttttttttt_5601f10f"
        );
        // Exactly 64 fits without a suffix.
        let fits = "x".repeat(64 - "mcp_s_".len());
        assert_eq!(tool_name("s", &fits).len(), 64);
        assert!(!tool_name("s", &fits).contains("_x_"));
    }
}
