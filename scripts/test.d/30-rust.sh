step "Rust tests"
rm -f target/validated-host-events.log target/cargo-test.log
# The fault tests run target/debug/mcp-fault-server, another package's binary, which
# `cargo test` does not rebuild: a cached target/ would hold an older one.
cargo build --quiet -p mcp-fault-server
# What `cargo test` runs, two test binaries at a time (scripts/test-binaries.py says why). Its
# status decides (a linker crash or a test binary killed by a signal prints no "FAILED" line);
# the grep only trims the log shown.
set +e
scripts/test-binaries.py target/cargo-test.log --workspace --features "$AGENTAO_TEST_FEATURES" --quiet
cargo_status=$?
set -e
grep -E '^(test result|failures|---- )' target/cargo-test.log || true
# The PostgreSQL tests start build/pg/ and leave it up for the next test binary: stop it here, so
# no server outlives the step (in a lone clone, its folder is deleted after).
scripts/postgres.sh stop >/dev/null 2>&1 || true
if [ "$cargo_status" -ne 0 ] || grep -q "FAILED\|error\[" target/cargo-test.log; then
  cat target/cargo-test.log 2>/dev/null || echo "(no test ran: the build failed, above)"
  echo "the tests exited with status $cargo_status"; exit 1
fi
if [ -f target/validated-host-events.log ]; then
  echo "host events validated against the v3 schema: $(awk '{s+=$1} END {print s}' target/validated-host-events.log)"
fi
record "Rust tests" "$(grep -oE '^test result: ok\. [0-9]+ passed' target/cargo-test.log | awk '{s+=$4} END {print s+0}')"
