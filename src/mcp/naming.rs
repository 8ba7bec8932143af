//! `mcp_<server>_<tool>`: the reference's tool names (`agentao/mcp/tool.py`).
//!
//! Characters outside `[A-Za-z0-9_]` become `_`. A name longer than 64 characters (OpenAI's
//! limit on function names) or one where a non-ASCII character was replaced is cut to make
//! room for `_` and 8 hex digits of SHA-256 over `server \0 tool`: stable across connects and
//! processes, so a permission rule naming the tool keeps meaning the same tool.
//!
//! The reference's names are not unique: `a`'s `b_c` and `a_b`'s `c` are both `mcp_a_b_c`, and
//! so are `x-y` and `x_y` of one server. [`assign`] gives such tools the hashed form too, so no
//! name can mean a tool of another server (a permission rule is written against a name), and
//! refuses a tool only when even that form is taken.

use std::collections::{BTreeSet, HashMap};

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

/// The reference's model-facing name of `tool` on `server`.
fn tool_name(server: &str, tool: &str) -> String {
    let name = format!("mcp_{}_{}", sanitize(server), sanitize(tool));
    let lossy = !(server.is_ascii() && tool.is_ascii());
    if name.len() <= MAX_TOOL_NAME_LEN && !lossy {
        return name;
    }
    hashed(name, server, tool)
}

/// The reference's hashed form of `name`, the sanitised name of `tool` on `server`.
fn hashed(name: String, server: &str, tool: &str) -> String {
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

/// What one listed tool is offered as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Under the reference's name.
    Named(String),
    /// Under the hashed form: the reference's name could also be another tool's.
    Renamed(String),
    /// Not offered: `name`, the form it would have had, is already another tool's (or the
    /// server listed the same tool twice).
    Refused { name: String },
}

impl Offered {
    /// The name it is offered under, if it is.
    pub(crate) fn name(&self) -> Option<&str> {
        match self {
            Offered::Named(n) | Offered::Renamed(n) => Some(n),
            Offered::Refused { .. } => None,
        }
    }
}

/// One configured server and the tool names it listed (none while not connected).
pub(crate) struct Listing<'a> {
    pub(crate) server: &'a str,
    pub(crate) tools: Vec<&'a str>,
}

/// Names every listed tool, one [`Offered`] per tool in the order given.
///
/// A tool keeps the reference's name only when that name cannot mean anything else: it does
/// not begin with another configured server's `mcp_<server>_` (connected or not, so which
/// servers are up never changes what a name means) and no other tool has it. Otherwise it is
/// hashed, over its own server and name. A name still taken after that goes to the first tool
/// in server order and the rest are refused.
pub(crate) fn assign(servers: &[Listing<'_>]) -> Vec<Vec<Offered>> {
    let prefixes: Vec<String> = servers
        .iter()
        .map(|l| format!("mcp_{}_", sanitize(l.server)))
        .collect();
    let plain: Vec<Vec<String>> = servers
        .iter()
        .map(|l| l.tools.iter().map(|t| tool_name(l.server, t)).collect())
        .collect();
    // Distinct (server, tool) pairs per reference name: a tool listed twice is one tool.
    let mut owners: HashMap<&str, BTreeSet<(usize, &str)>> = HashMap::new();
    for (si, l) in servers.iter().enumerate() {
        for (ti, t) in l.tools.iter().enumerate() {
            owners.entry(&plain[si][ti]).or_default().insert((si, t));
        }
    }
    let mut taken = BTreeSet::new();
    servers
        .iter()
        .enumerate()
        .map(|(si, l)| {
            l.tools
                .iter()
                .enumerate()
                .map(|(ti, t)| {
                    let name = &plain[si][ti];
                    let foreign = prefixes
                        .iter()
                        .enumerate()
                        .any(|(sj, p)| sj != si && name.starts_with(p.as_str()));
                    let shared = owners.get(name.as_str()).is_some_and(|o| o.len() > 1);
                    let offered = if foreign || shared {
                        Offered::Renamed(hashed(
                            format!("mcp_{}_{}", sanitize(l.server), sanitize(t)),
                            l.server,
                            t,
                        ))
                    } else {
                        Offered::Named(name.clone())
                    };
                    match offered.name() {
                        Some(n) if !taken.insert(n.to_owned()) => {
                            Offered::Refused { name: n.to_owned() }
                        }
                        _ => offered,
                    }
                })
                .collect()
        })
        .collect()
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

    fn names(servers: &[(&str, &[&str])]) -> Vec<Vec<Offered>> {
        let listings: Vec<Listing<'_>> = servers
            .iter()
            .map(|(s, t)| Listing {
                server: s,
                tools: t.to_vec(),
            })
            .collect();
        assign(&listings)
    }

    #[test]
    fn names_that_could_mean_another_servers_tool_are_hashed_on_both_sides() {
        let got = names(&[("a", &["b_c", "d"]), ("a_b", &["c"])]);
        assert_eq!(
            got,
            vec![
                vec![
                    Offered::Renamed("mcp_a_b_c_662f0bbb".into()),
                    Offered::Named("mcp_a_d".into())
                ],
                vec![Offered::Renamed("mcp_a_b_c_0c1d18f5".into())],
            ]
        );
        // The same whether `a` listed its tools or not: `a_b`'s name never depends on it.
        let got = names(&[("a", &[]), ("a_b", &["c"])]);
        assert_eq!(got[1], vec![Offered::Renamed("mcp_a_b_c_0c1d18f5".into())]);
        // Servers whose names sanitise alike share every name.
        let got = names(&[("a-b", &["x"]), ("a_b", &["y"])]);
        assert!(got
            .iter()
            .flatten()
            .all(|o| matches!(o, Offered::Renamed(_))));
    }

    #[test]
    fn names_alike_on_one_server_are_hashed_and_a_repeat_is_refused() {
        let got = names(&[("s", &["x-y", "x_y", "d", "d", "e"])]);
        assert_eq!(
            got[0],
            vec![
                Offered::Renamed("mcp_s_x_y_5bcffd2e".into()),
                Offered::Renamed("mcp_s_x_y_5fb6de5e".into()),
                Offered::Named("mcp_s_d".into()),
                Offered::Refused {
                    name: "mcp_s_d".into()
                },
                Offered::Named("mcp_s_e".into()),
            ]
        );
    }

    #[test]
    fn a_name_taken_even_hashed_goes_to_the_first_server() {
        // `s`'s tool literally named like `t`'s hashed `x-y`.
        let got = names(&[("s", &["x-y", "x_y"]), ("s2", &["q"])]);
        let hashed = got[0][0].name().unwrap().to_owned();
        let tail = hashed.strip_prefix("mcp_s_").unwrap().to_owned();
        let got = names(&[("s", &["x-y", "x_y", &tail])]);
        assert_eq!(got[0][0], Offered::Renamed(hashed.clone()));
        assert_eq!(got[0][2], Offered::Refused { name: hashed });
    }
}
