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
}
