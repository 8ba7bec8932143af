//! The `web_fetch` URL policy (`permissions::url_policy`): `check_shape` on any URL text,
//! `is_disallowed` on any address in every spelling, `check_resolved` on any answer set.
//!
//! Asserts: no panic; an accepted URL is http(s), has no credentials and a host, and checking
//! its normalized form again gives the same verdict (what we check is what we fetch); an
//! accepted IP literal is public; a domain that passes is not a local name. For the address in
//! the input's first bytes: every spelling of a disallowed IPv4 address (dotted, decimal, hex,
//! octal, IPv4-mapped, 6to4, NAT64) is refused as a URL, and a resolved answer containing a
//! disallowed address is refused.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use agentao::permissions::url_policy::{check_resolved, check_shape, is_disallowed, Target};
use libfuzzer_sys::fuzz_target;

fn url_case(raw: &str) {
    let Ok(target) = check_shape(raw, &[]) else {
        return;
    };
    let url = match &target {
        Target::Literal(u) => u,
        Target::Name { url, .. } => url,
    };
    assert!(matches!(url.scheme(), "http" | "https"), "{raw:?} → {url}");
    assert!(
        url.username().is_empty() && url.password().is_none(),
        "{raw:?} → {url}"
    );
    match (&target, url.host()) {
        (Target::Literal(_), Some(url::Host::Ipv4(ip))) => {
            assert!(!is_disallowed(IpAddr::V4(ip), &[]), "{raw:?} → {ip}")
        }
        (Target::Literal(_), Some(url::Host::Ipv6(ip))) => {
            assert!(!is_disallowed(IpAddr::V6(ip), &[]), "{raw:?} → {ip}")
        }
        (Target::Name { host, .. }, Some(url::Host::Domain(d))) => {
            assert_eq!(host, d);
            let h = d.trim_end_matches('.').to_lowercase();
            assert!(
                h.contains('.') && h != "localhost" && !h.ends_with(".localhost"),
                "{h}"
            );
        }
        other => panic!("{raw:?}: target and host disagree: {other:?}"),
    }
    assert_eq!(
        check_shape(url.as_str(), &[]),
        Ok(target.clone()),
        "{raw:?} normalizes to {url}, judged differently"
    );
}

fn address_case(b: &[u8; 20]) {
    let v4 = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
    let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(&b[4..20]).expect("16 bytes"));
    let n = u32::from(v4);
    let [o0, o1, o2, o3] = v4.octets();
    if is_disallowed(IpAddr::V4(v4), &[]) {
        let spellings = [
            format!("http://{v4}/"),
            format!("http://{n}/"),
            format!("http://0x{n:x}/"),
            format!("http://0{o0:o}.0{o1:o}.0{o2:o}.0{o3:o}/"),
            format!("http://[::ffff:{v4}]/"),
            format!("http://[2002:{:x}:{:x}::1]/", n >> 16, n & 0xffff),
            format!("http://[64:ff9b::{v4}]/"),
        ];
        for s in spellings {
            assert!(
                check_shape(&s, &[]).is_err(),
                "{v4} is disallowed but {s} passes"
            );
        }
    }
    for ip in [IpAddr::V4(v4), IpAddr::V6(v6)] {
        let answers = [
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(93, 184, 215, 14)), 443),
            SocketAddr::new(ip, 443),
        ];
        let verdict = check_resolved("example.com", &answers, &[]);
        assert_eq!(
            verdict.is_err(),
            is_disallowed(ip, &[]),
            "answer {ip}: {verdict:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = <[u8; 20]>::try_from(data.get(..20).unwrap_or(&[])) {
        address_case(&b);
    }
    if let Ok(raw) = std::str::from_utf8(data) {
        url_case(raw);
    }
});
