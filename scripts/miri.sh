#!/usr/bin/env bash
# Runs the library's unit tests that Miri can run (step 35 of scripts/test.sh, which starts this
# in the background and reports it): installs the nightly toolchain's miri component if needed,
# writes Miri's output to stdout and its exit status to build/miri.status at the end (3 when
# Miri cannot be installed here). The build is cached under build/miri-target.
#
# Miri checks what the compiler cannot: undefined behaviour in the library's own code and in
# what it asks of its dependencies (aliasing, uninitialised reads, data races between the
# threads a test starts). The modules below are the unit tests that need no sockets, processes
# or C code (SQLite, ring), which Miri cannot run; their own threads and clocks are fine
# (isolation is off for the clock).
set -uo pipefail
cd "$(dirname "$0")/.."
MIRI_MODULES=(cancel:: handoff:: llm::assembly:: llm::request_body:: llm::retry:: panic_text:: pycompat::)
finish() { echo "$1" > build/miri.status.tmp && mv build/miri.status.tmp build/miri.status; exit "$1"; }
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal >/dev/null 2>&1 || true
fi
if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^miri'; then
  rustup component add miri rust-src --toolchain nightly >/dev/null 2>&1 || true
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  echo "unavailable: the nightly toolchain with the miri component could not be installed (rustup's server unreachable?)"
  finish 3
fi
MIRIFLAGS="-Zmiri-disable-isolation" cargo +nightly miri test --quiet --lib \
  --target-dir build/miri-target -- "${MIRI_MODULES[@]}" 2>&1
finish $?
