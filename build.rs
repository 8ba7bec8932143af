//! Generates the C header into OUT_DIR on every build. The committed `include/agentao.h` is
//! refreshed only on request (`AGENTAO_UPDATE_HEADER=1 cargo build`), and a test keeps the two
//! equal, so the header never drifts silently.

use std::path::PathBuf;

fn main() {
    let crate_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("agentao.h");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=AGENTAO_UPDATE_HEADER");

    let mut config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml is valid");
    let v = |k: &str| std::env::var(k).expect("cargo sets the version");
    let (major, minor, patch) = (
        v("CARGO_PKG_VERSION_MAJOR"),
        v("CARGO_PKG_VERSION_MINOR"),
        v("CARGO_PKG_VERSION_PATCH"),
    );
    let number = major.parse::<u32>().unwrap_or(0) * 1_000_000
        + minor.parse::<u32>().unwrap_or(0) * 1_000
        + patch.parse::<u32>().unwrap_or(0);
    config.after_includes = Some(format!(
        "\n#define AGENTAO_VERSION \"{}\"\n#define AGENTAO_VERSION_MAJOR {major}\n#define AGENTAO_VERSION_MINOR {minor}\n#define AGENTAO_VERSION_PATCH {patch}\n/* MAJOR * 1000000 + MINOR * 1000 + PATCH, as agentao_version_number() */\n#define AGENTAO_VERSION_NUMBER {number}\n",
        v("CARGO_PKG_VERSION")
    ));
    match cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
    {
        Ok(bindings) => {
            bindings.write_to_file(&out);
            if std::env::var_os("AGENTAO_UPDATE_HEADER").is_some() {
                bindings.write_to_file(crate_dir.join("include/agentao.h"));
            }
        }
        // A syntax error in src/ is reported by rustc with a better message than cbindgen's.
        Err(e) => println!("cargo:warning=cbindgen could not generate the header: {e}"),
    }
    println!("cargo:rustc-env=AGENTAO_GENERATED_HEADER={}", out.display());
    set_soname(&major, &minor);
}

/// The SONAME policy of docs/bindings.md: before 1.0 every minor release may break the ABI
/// (`libagentao.so.0.MINOR`), from 1.0 only a major one (`libagentao.so.MAJOR`).
fn set_soname(major: &str, minor: &str) {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let soname = if major == "0" {
        format!("libagentao.so.0.{minor}")
    } else {
        format!("libagentao.so.{major}")
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    // A program linked against target/<profile>/libagentao.so records the SONAME as its
    // dependency, so the uninstalled library needs a link of that name beside it (the C tests,
    // the examples and the bindings run against target/ without installing).
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    #[cfg(unix)]
    if let Some(profile_dir) = out_dir.ancestors().nth(3) {
        let link = profile_dir.join(&soname);
        let target = std::path::Path::new("libagentao.so");
        if std::fs::read_link(&link).ok().as_deref() != Some(target) {
            let _ = std::fs::remove_file(&link);
            if let Err(e) = std::os::unix::fs::symlink(target, &link) {
                println!("cargo:warning=cannot link {}: {e}", link.display());
            }
        }
    }
}
