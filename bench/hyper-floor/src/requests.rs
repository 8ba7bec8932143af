//! The request file: the bodies the library sent, as the mock's `--raw-requests-out` writes them
//! (one body a line, byte for byte). `bench.c` adds the same HTTP head to each for its raw client;
//! `client.rs` sends the same head through hyper.

use std::path::Path;

use bytes::Bytes;

/// The bodies of one request file, in the order the library sent them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestBodies(pub Vec<Bytes>);

impl RequestBodies {
    /// Splits a request file's bytes into its bodies (one a line; blank lines are not bodies).
    pub fn parse(file: &[u8]) -> Result<RequestBodies, String> {
        let bodies: Vec<Bytes> = file
            .split(|&b| b == b'\n')
            .filter(|line| !line.is_empty())
            .map(Bytes::copy_from_slice)
            .collect();
        if bodies.is_empty() {
            return Err("no request in the file".into());
        }
        Ok(RequestBodies(bodies))
    }

    pub fn read(path: &Path) -> Result<RequestBodies, String> {
        let file = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        RequestBodies::parse(&file).map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_body_a_line_in_order() {
        let b = RequestBodies::parse(b"{\"a\":1}\n{\"b\":\"x y\"}\n").unwrap();
        assert_eq!(
            b.0,
            vec![
                Bytes::from_static(b"{\"a\":1}"),
                Bytes::from_static(b"{\"b\":\"x y\"}")
            ]
        );
    }

    #[test]
    fn a_last_line_without_newline_is_a_body_and_blank_lines_are_not() {
        let b = RequestBodies::parse(b"\n{\"a\":1}\n\n{\"b\":2}").unwrap();
        assert_eq!(b.0.len(), 2);
        assert_eq!(b.0[1], Bytes::from_static(b"{\"b\":2}"));
    }

    #[test]
    fn an_empty_file_is_an_error() {
        assert!(RequestBodies::parse(b"").is_err());
        assert!(RequestBodies::parse(b"\n\n").is_err());
    }
}
