#!/usr/bin/env bash
# Runs every test: formatting and lints, the Rust tests, the C tests under ctest (plain and
# with AddressSanitizer), the examples, and the README quickstart. Installs missing system
# packages itself when it runs as root (Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

step() { printf '\n==> %s\n' "$*"; }

step "prerequisites"
need=()
command -v cc >/dev/null || need+=(build-essential)
command -v cmake >/dev/null || need+=(cmake)
command -v pkg-config >/dev/null || need+=(pkg-config)
dpkg -s libsqlite3-dev >/dev/null 2>&1 || need+=(libsqlite3-dev)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing: ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "missing packages: ${need[*]} (install them, or run as root)"; exit 1
  fi
fi
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }
rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "Rust tests"
rm -f target/validated-host-events.log
cargo test --workspace --quiet 2>&1 | tee target/cargo-test.log | grep -E '^(test result|running|failures|---- )' || true
grep -q "FAILED\|error\[" target/cargo-test.log && { cat target/cargo-test.log; exit 1; }
if [ -f target/validated-host-events.log ]; then
  echo "host events validated against the v3 schema: $(awk '{s+=$1} END {print s}' target/validated-host-events.log)"
fi

step "C tests (ctest)"
cmake -S tests/c -B build/c -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build/c --parallel 2 >/dev/null
ctest --test-dir build/c --output-on-failure --timeout 120 | tee build/ctest.log

step "C tests under AddressSanitizer (ctest)"
cmake -S tests/c -B build/c-asan -DCMAKE_BUILD_TYPE=Debug -DAGENTAO_SANITIZE=ON >/dev/null
cmake --build build/c-asan --parallel 2 >/dev/null
ctest --test-dir build/c-asan --output-on-failure --timeout 180 | tee build/ctest-asan.log

step "examples"
cargo build --release --quiet
mkdir -p build/examples
CFLAGS=(-std=c11 -Wall -Wextra -Werror -O2 -Iinclude -Ltarget/release -Wl,-rpath,"$PWD/target/release")
cc "${CFLAGS[@]}" examples/quickstart.c -lagentao -o build/examples/quickstart
build/examples/quickstart | tee build/examples/quickstart.out
grep -q '"is_answer":true' build/examples/quickstart.out
cc "${CFLAGS[@]}" examples/audit_pipeline.c -lagentao -lsqlite3 -lpthread -o build/examples/audit_pipeline
build/examples/audit_pipeline build/examples/audit.db | tee build/examples/audit.out
grep -q 'rows: [1-9]' build/examples/audit.out

step "README quickstart compiles as written"
awk '/^## Quickstart/{q=1} q&&/^```c$/{c=1;next} c&&/^```$/{exit} c' README.md > build/examples/readme_quickstart.c
cc "${CFLAGS[@]}" build/examples/readme_quickstart.c -lagentao -o build/examples/readme_quickstart
(cd build/examples && ./readme_quickstart) | tee build/examples/readme.out
grep -qx 'Hello from the agent.' build/examples/readme.out

step "all tests passed"
rust=$(grep -oE '^test result: ok\. [0-9]+ passed' target/cargo-test.log | awk '{s+=$4} END {print s+0}')
c=$(grep -ohE 'tests passed, 0 tests failed out of [0-9]+' build/ctest.log build/ctest-asan.log | awk '{s+=$NF} END {print s+0}')
echo "Rust tests: $rust, C tests (plain + ASan): $c, examples: 3"
echo "summary: $((rust + c + 3)) passed, 0 failed"
