//! URL / SSRF policy for `web_fetch` (spec §3.9), applied to the first URL and every redirect
//! hop. Host names are resolved here and the checked addresses are the only ones the fetch may
//! connect to (the caller pins them), so there is no DNS-rebinding window.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::LazyLock;
use std::time::Duration;

use ipnet::IpNet;
use url::{Host, Url};

use crate::pycompat::py_repr;

pub(crate) const MAX_REDIRECTS: usize = 20;
pub(crate) const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

const LOCAL_HOSTNAMES: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "metadata.google.internal",
];
const LOCAL_SUFFIXES: &[&str] = &[
    ".localhost",
    ".local",
    ".localdomain",
    ".internal",
    ".cluster.local",
];

const NON_PUBLIC: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "100::/64",
    "2001::/32",
    "2001:db8::/32",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
];

/// IPv6 ranges Python's `ipaddress` does not call global, beyond the table above.
const PY_PRIVATE_V6: &[&str] = &[
    "::ffff:0:0/96",
    "64:ff9b:1::/48",
    "2001::/23",
    "2002::/16",
    "3fff::/20",
    "fec0::/10",
];
const PY_GLOBAL_EXCEPTIONS_V6: &[&str] = &[
    "2001:1::1/128",
    "2001:1::2/128",
    "2001:3::/32",
    "2001:4:112::/48",
    "2001:20::/28",
    "2001:30::/28",
];

const METADATA_V4: &[Ipv4Addr] = &[
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(169, 254, 170, 23),
    Ipv4Addr::new(168, 63, 129, 16),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(192, 0, 0, 192),
    Ipv4Addr::new(169, 254, 42, 42),
];
const METADATA_V6: &[&str] = &[
    "fd00:ec2::254",
    "fd00:ec2::23",
    "fd20:ce::254",
    "fd00:42::42",
];

const NAT64_OFFSETS: &[(u8, [usize; 4])] = &[
    (32, [4, 5, 6, 7]),
    (40, [5, 6, 7, 9]),
    (48, [6, 7, 9, 10]),
    (56, [7, 9, 10, 11]),
    (64, [9, 10, 11, 12]),
    (96, [12, 13, 14, 15]),
];

fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().filter_map(|s| s.parse().ok()).collect()
}

static NON_PUBLIC_NETS: LazyLock<Vec<IpNet>> = LazyLock::new(|| nets(NON_PUBLIC));
static PY_PRIVATE_NETS: LazyLock<Vec<IpNet>> = LazyLock::new(|| nets(PY_PRIVATE_V6));
static PY_EXCEPTION_NETS: LazyLock<Vec<IpNet>> = LazyLock::new(|| nets(PY_GLOBAL_EXCEPTIONS_V6));

fn in_any(addr: IpAddr, networks: &[IpNet]) -> bool {
    networks.iter().any(|n| n.contains(&addr))
}

/// Parses allow-list tokens: CIDRs or bare IPs (a bare IP is a /32 or /128).
pub(crate) fn parse_allow_list<'a>(
    tokens: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<IpNet>, String> {
    let mut out = Vec::new();
    for token in tokens {
        let token = token.trim();
        if token.is_empty() {
            continue;
        }
        let net = match token.parse::<IpNet>() {
            Ok(n) => n.trunc(),
            Err(_) => match token.parse::<IpAddr>() {
                Ok(ip) => IpNet::from(ip),
                Err(_) => return Err(format!("'{token}' is not an IP address or CIDR")),
            },
        };
        out.push(net);
    }
    Ok(out)
}

/// `AGENTAO_WEB_FETCH_ALLOW_CIDRS` (commas or whitespace between tokens); invalid tokens are
/// skipped as the reference does.
pub(crate) fn allow_list_from_env() -> Vec<IpNet> {
    let raw = std::env::var("AGENTAO_WEB_FETCH_ALLOW_CIDRS").unwrap_or_default();
    raw.split(|c: char| c == ',' || c.is_whitespace())
        .filter_map(|t| parse_allow_list([t]).ok())
        .flatten()
        .collect()
}

fn v4_at(octets: &[u8; 16], idx: [usize; 4]) -> Ipv4Addr {
    Ipv4Addr::new(
        octets[idx[0]],
        octets[idx[1]],
        octets[idx[2]],
        octets[idx[3]],
    )
}

fn is_isatap(o: &[u8; 16]) -> bool {
    o[8..12] == [0, 0, 0x5e, 0xfe] || o[8..12] == [2, 0, 0x5e, 0xfe]
}

fn is_v4_compatible(a: &Ipv6Addr) -> bool {
    u128::from(*a) >> 32 == 0 && !a.is_loopback() && !a.is_unspecified()
}

fn nat64_local_layouts(o: &[u8; 16]) -> Vec<u8> {
    if o[8] != 0 {
        return vec![96];
    }
    for (n, range) in [(48u8, 11..16), (56, 12..16), (64, 13..16)] {
        if o[range].iter().all(|b| *b == 0) {
            return if n < 64 { vec![n] } else { vec![n, 96] };
        }
    }
    vec![96]
}

fn offsets(n: u8) -> [usize; 4] {
    NAT64_OFFSETS
        .iter()
        .find(|(len, _)| *len == n)
        .map(|(_, o)| *o)
        .unwrap_or([12, 13, 14, 15])
}

/// The IPv4 addresses an IPv6 address carries through a translation mechanism.
fn embedded_ipv4s(addr: IpAddr) -> Vec<Ipv4Addr> {
    let IpAddr::V6(a) = addr else {
        return Vec::new();
    };
    let o = a.octets();
    if let Some(v4) = a.to_ipv4_mapped() {
        return vec![v4];
    }
    if o[0] == 0x20 && o[1] == 0x02 {
        return vec![v4_at(&o, [2, 3, 4, 5])];
    }
    let ip = IpAddr::V6(a);
    if in_any(ip, &nets(&["64:ff9b::/96"])) {
        return vec![v4_at(&o, offsets(96))];
    }
    if in_any(ip, &nets(&["64:ff9b:1::/48"])) {
        let mut v: Vec<Ipv4Addr> = nat64_local_layouts(&o)
            .into_iter()
            .map(|n| v4_at(&o, offsets(n)))
            .collect();
        v.sort();
        v.dedup();
        return v;
    }
    if is_isatap(&o) || is_v4_compatible(&a) {
        return vec![v4_at(&o, offsets(96))];
    }
    Vec::new()
}

fn cloud_metadata_targets(addr: IpAddr) -> Vec<IpAddr> {
    match addr {
        IpAddr::V4(v4) => {
            if METADATA_V4.contains(&v4) {
                vec![addr]
            } else {
                Vec::new()
            }
        }
        IpAddr::V6(v6) => {
            let meta6: Vec<Ipv6Addr> = METADATA_V6.iter().filter_map(|s| s.parse().ok()).collect();
            if meta6.contains(&v6) {
                return vec![addr];
            }
            let o = v6.octets();
            let mut candidates: Vec<Ipv4Addr> = NAT64_OFFSETS
                .iter()
                .map(|(_, idx)| v4_at(&o, *idx))
                .collect();
            candidates.push(v4_at(&o, [2, 3, 4, 5]));
            if in_any(addr, &nets(&["2001::/32"])) {
                candidates.push(Ipv4Addr::from((u128::from(v6) as u32) ^ 0xFFFF_FFFF));
            }
            let mut out: Vec<IpAddr> = candidates
                .into_iter()
                .filter(|c| METADATA_V4.contains(c))
                .map(IpAddr::V4)
                .collect();
            out.sort();
            out.dedup();
            out
        }
    }
}

fn names_exactly(addr: IpAddr, allow: &[IpNet]) -> bool {
    allow
        .iter()
        .any(|n| n.prefix_len() == n.max_prefix_len() && n.network() == addr)
}

fn is_non_public(addr: IpAddr) -> bool {
    if addr == IpAddr::V4(Ipv4Addr::new(192, 0, 0, 9))
        || addr == IpAddr::V4(Ipv4Addr::new(192, 0, 0, 10))
    {
        return false;
    }
    if in_any(addr, &NON_PUBLIC_NETS) {
        return true;
    }
    matches!(addr, IpAddr::V6(_))
        && in_any(addr, &PY_PRIVATE_NETS)
        && !in_any(addr, &PY_EXCEPTION_NETS)
}

/// True when `addr` may not be fetched: a cloud metadata endpoint in any encoding (unless the
/// allow list names that exact address), or a non-public address outside the allow list.
pub fn is_disallowed(addr: IpAddr, allow: &[IpNet]) -> bool {
    if cloud_metadata_targets(addr)
        .iter()
        .any(|t| !names_exactly(*t, allow))
    {
        return true;
    }
    let mut effective: Vec<IpAddr> = embedded_ipv4s(addr).into_iter().map(IpAddr::V4).collect();
    if effective.is_empty() {
        effective.push(addr);
    } else if let IpAddr::V6(v6) = addr {
        if is_isatap(&v6.octets()) || is_v4_compatible(&v6) {
            effective.push(addr);
        }
    }
    effective
        .into_iter()
        .any(|c| (allow.is_empty() || !in_any(c, allow)) && is_non_public(c))
}

/// Where a checked URL may connect.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// An IP literal (already judged).
    Literal(Url),
    /// A host name that must resolve (and be judged) before connecting.
    Name { url: Url, host: String, port: u16 },
}

/// The checks that need no I/O: scheme, credentials, host shape, IP literals.
pub fn check_shape(raw: &str, allow: &[IpNet]) -> Result<Target, String> {
    let lower = raw.trim_start().to_ascii_lowercase();
    if !(lower.starts_with("http:") || lower.starts_with("https:")) {
        return Err(format!(
            "only http/https URLs are allowed: {}",
            py_repr(raw)
        ));
    }
    let url = match Url::parse(raw) {
        Ok(u) => u,
        Err(url::ParseError::InvalidPort) => {
            return Err(format!("invalid port in URL: {}", py_repr(raw)))
        }
        Err(url::ParseError::EmptyHost) => {
            return Err(format!("URL has no host: {}", py_repr(raw)))
        }
        Err(e) => return Err(format!("invalid URL {}: {e}", py_repr(raw))),
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http/https URLs are allowed: {}",
            py_repr(raw)
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("URLs with embedded credentials are not allowed".to_owned());
    }
    let port = url.port_or_known_default().unwrap_or(80);
    match url.host() {
        None => Err(format!("URL has no host: {}", py_repr(raw))),
        Some(Host::Ipv4(v4)) => literal(url.clone(), IpAddr::V4(v4), allow),
        Some(Host::Ipv6(v6)) => literal(url.clone(), IpAddr::V6(v6), allow),
        Some(Host::Domain(d)) => {
            let host = d.trim_end_matches('.').to_lowercase();
            if host.is_empty() {
                return Err(format!("URL has no host: {}", py_repr(raw)));
            }
            if LOCAL_HOSTNAMES.contains(&host.as_str())
                || LOCAL_SUFFIXES.iter().any(|s| host.ends_with(s))
            {
                return Err(format!("local/internal hostnames are not allowed: {host}"));
            }
            if !host.contains('.') {
                return Err(format!("single-label hostnames are not allowed: {host}"));
            }
            Ok(Target::Name {
                url: url.clone(),
                host: d.to_owned(),
                port,
            })
        }
    }
}

fn literal(url: Url, ip: IpAddr, allow: &[IpNet]) -> Result<Target, String> {
    if is_disallowed(ip, allow) {
        return Err(format!("target is a non-public address: {ip}"));
    }
    Ok(Target::Literal(url))
}

/// Judges every address a name resolved to; returns the socket addresses to pin.
pub fn check_resolved(
    host: &str,
    addrs: &[SocketAddr],
    allow: &[IpNet],
) -> Result<Vec<SocketAddr>, String> {
    let shown = host.trim_end_matches('.').to_lowercase();
    if addrs.is_empty() {
        return Err(format!("host did not resolve: {shown}"));
    }
    let mut blocked: Vec<String> = addrs
        .iter()
        .map(|a| a.ip())
        .filter(|ip| is_disallowed(*ip, allow))
        .map(|ip| ip.to_string())
        .collect();
    blocked.sort();
    blocked.dedup();
    if !blocked.is_empty() {
        let mut rendered = blocked
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if blocked.len() > 3 {
            rendered.push_str(", ...");
        }
        return Err(format!(
            "{shown} resolves to non-public address(es): {rendered}"
        ));
    }
    Ok(addrs.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn classification() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "169.254.169.254",
            "100.64.0.1",
            "168.63.129.16",
            "::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "fe80::1",
            "fc00::1",
            "::127.0.0.1",
            "224.0.0.1",
        ] {
            assert!(is_disallowed(ip(bad), &[]), "{bad}");
        }
        for good in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "192.0.0.9"] {
            assert!(!is_disallowed(ip(good), &[]), "{good}");
        }
        let allow = parse_allow_list(["127.0.0.0/8", "169.254.0.0/16"]).unwrap();
        assert!(!is_disallowed(ip("127.0.0.1"), &allow));
        // Metadata needs the exact address.
        assert!(is_disallowed(ip("169.254.169.254"), &allow));
        let exact = parse_allow_list(["169.254.169.254"]).unwrap();
        assert!(!is_disallowed(ip("169.254.169.254"), &exact));
        assert!(parse_allow_list(["nonsense"]).is_err());
    }

    #[test]
    fn shapes() {
        assert_eq!(
            check_shape("ftp://x.com/", &[]).unwrap_err(),
            "only http/https URLs are allowed: 'ftp://x.com/'"
        );
        assert_eq!(
            check_shape("http://u:p@x.com/", &[]).unwrap_err(),
            "URLs with embedded credentials are not allowed"
        );
        assert_eq!(
            check_shape("http://localhost:8/", &[]).unwrap_err(),
            "local/internal hostnames are not allowed: localhost"
        );
        assert_eq!(
            check_shape("http://db.internal/", &[]).unwrap_err(),
            "local/internal hostnames are not allowed: db.internal"
        );
        assert_eq!(
            check_shape("http://intranet/", &[]).unwrap_err(),
            "single-label hostnames are not allowed: intranet"
        );
        assert_eq!(
            check_shape("http://127.0.0.1:9/", &[]).unwrap_err(),
            "target is a non-public address: 127.0.0.1"
        );
        assert_eq!(
            check_shape("http://2130706433/", &[]).unwrap_err(),
            "target is a non-public address: 127.0.0.1"
        );
        assert_eq!(
            check_shape("http://[::1]/", &[]).unwrap_err(),
            "target is a non-public address: ::1"
        );
        assert!(matches!(
            check_shape("https://example.com/a", &[]),
            Ok(Target::Name { port: 443, .. })
        ));
        let addrs = [SocketAddr::new(ip("10.0.0.1"), 80)];
        assert_eq!(
            check_resolved("evil.example.com", &addrs, &[]).unwrap_err(),
            "evil.example.com resolves to non-public address(es): 10.0.0.1"
        );
    }
}
