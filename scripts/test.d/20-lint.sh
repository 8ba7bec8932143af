step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo hakari: workspace-hack is fresh"
# workspace-hack (see Cargo.toml) must list what every member's dependencies need, or builds of
# different selections compile their dependencies again. Pinned, installed once under
# build/cargo-tools like cargo-fuzz.
CARGO_HAKARI_VERSION=0.9.36
tools=$ROOT/build/cargo-tools
if ! "$tools/bin/cargo-hakari" --version 2>/dev/null | grep -q " $CARGO_HAKARI_VERSION\$"; then
  echo "installing cargo-hakari $CARGO_HAKARI_VERSION under build/cargo-tools"
  cargo install cargo-hakari --version "$CARGO_HAKARI_VERSION" --locked --root "$tools" --quiet
fi
PATH=$tools/bin:$PATH
cargo hakari generate --diff --quiet || { echo "workspace-hack is stale: run cargo hakari generate"; exit 1; }
cargo hakari manage-deps --dry-run --quiet || { echo "a member lacks workspace-hack: run cargo hakari manage-deps"; exit 1; }
cargo hakari verify

step "the test command's own scripts (tests/scripts)"
python3 -m unittest discover -s tests/scripts -p '*_test.py' 2> build/scripts-tests.log \
  || { cat build/scripts-tests.log; exit 1; }
tail -n 3 build/scripts-tests.log
record "test command scripts" "$(grep -oE '^Ran [0-9]+' build/scripts-tests.log | grep -oE '[0-9]+')"
