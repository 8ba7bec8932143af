//! The committed header is exactly what cbindgen generates now, and its version macros agree
//! with Cargo.toml and with `agentao_version*()`.

#[test]
fn committed_header_is_fresh() {
    let generated = std::fs::read_to_string(env!("AGENTAO_GENERATED_HEADER"))
        .expect("build.rs generated the header");
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/agentao.h"))
            .expect("include/agentao.h is committed");
    assert!(
        generated == committed,
        "include/agentao.h is stale: regenerate it with `AGENTAO_UPDATE_HEADER=1 cargo build` and commit it"
    );
}

#[test]
fn version_macros_match_cargo_toml() {
    let header =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/agentao.h")).unwrap();
    let cargo =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let version = cargo
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("Cargo.toml has a package version");
    let parts: Vec<u32> = version.split('.').map(|p| p.parse().unwrap()).collect();
    let define = |name: &str| -> String {
        header
            .lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} is defined"))
            .trim()
            .to_owned()
    };
    assert_eq!(define("AGENTAO_VERSION"), format!("\"{version}\""));
    assert_eq!(define("AGENTAO_VERSION_MAJOR"), parts[0].to_string());
    assert_eq!(define("AGENTAO_VERSION_MINOR"), parts[1].to_string());
    assert_eq!(define("AGENTAO_VERSION_PATCH"), parts[2].to_string());
    let number = parts[0] * 1_000_000 + parts[1] * 1_000 + parts[2];
    assert_eq!(define("AGENTAO_VERSION_NUMBER"), number.to_string());
    // agentao_version() and agentao_version_number() are checked against these macros by the
    // C test test_lifecycle.c, through the real library.
    assert_eq!(agentao::ffi::library::agentao_version_number(), number);
}

#[test]
fn committed_schema_is_the_reference_v3() {
    // The exported copy (agentao_host_events_schema) is compared with this file by the C tests.
    let ours = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/schema/host.events.v3.schema.json"
    ))
    .unwrap();
    let reference = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/host.events.v3.schema.json"
    ))
    .expect("tests/conformance/host.events.v3.schema.json");
    assert_eq!(ours, reference);
}

#[test]
fn committed_acp_schema_is_the_reference_and_exported() {
    let ours = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/schema/host.acp.schema.json"
    ))
    .unwrap();
    let reference = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/host.acp.schema.json"
    ))
    .expect("tests/conformance/host.acp.schema.json");
    assert_eq!(ours, reference);
    // The C export hands out the static below (its bytes are checked by test_lifecycle.c).
    let exported = agentao::ffi::library::agentao_host_acp_schema();
    let schema = agentao::ffi::library::acp_schema();
    assert_eq!(exported, schema.as_ptr());
    assert_eq!(schema.to_str().unwrap(), reference);
}

#[test]
fn header_comments_have_no_rustdoc_link_syntax() {
    // cbindgen copies doc comments verbatim: a rustdoc link would reach the C programmer as
    // `[`name`]` text.
    let header =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/agentao.h")).unwrap();
    let leaks: Vec<(usize, &str)> = header
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("[`") || l.contains("`]") || l.contains("]("))
        .map(|(i, l)| (i + 1, l))
        .collect();
    assert!(
        leaks.is_empty(),
        "rustdoc link syntax in the header: {leaks:?}"
    );
}

#[test]
fn every_status_constant_has_its_own_name() {
    // The names come from the enum itself; each header constant must name itself.
    let header =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/agentao.h")).unwrap();
    let mut seen = 0;
    for line in header.lines() {
        let Some(rest) = line.trim().strip_prefix("AGENTAO_STATUS_") else {
            continue;
        };
        let (name, value) = rest.split_once(" = ").expect("explicit status values");
        let code: i32 = value.trim_end_matches(',').parse().unwrap();
        let got = agentao::ffi::agentao_status_name(code);
        // SAFETY: agentao_status_name returns a static NUL-terminated string.
        let got = unsafe { std::ffi::CStr::from_ptr(got) }.to_str().unwrap();
        assert_eq!(got, name, "status {code}");
        seen += 1;
    }
    assert!(seen >= 18, "found {seen} status constants");
    let unknown = unsafe { std::ffi::CStr::from_ptr(agentao::ffi::agentao_status_name(seen)) };
    assert_eq!(unknown.to_str().unwrap(), "UNKNOWN");
    let negative = unsafe { std::ffi::CStr::from_ptr(agentao::ffi::agentao_status_name(-1)) };
    assert_eq!(negative.to_str().unwrap(), "UNKNOWN");
}
