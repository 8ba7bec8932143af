//! Empty on purpose: this crate exists for its Cargo.toml, which cargo-hakari generates (see the
//! root Cargo.toml's comment on the `workspace-hack` dependency).
