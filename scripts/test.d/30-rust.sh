step "Rust tests"
rm -f target/validated-host-events.log
cargo test --workspace --quiet 2>&1 | tee target/cargo-test.log | grep -E '^(test result|running|failures|---- )' || true
if grep -q "FAILED\|error\[" target/cargo-test.log; then cat target/cargo-test.log; exit 1; fi
if [ -f target/validated-host-events.log ]; then
  echo "host events validated against the v3 schema: $(awk '{s+=$1} END {print s}' target/validated-host-events.log)"
fi
record "Rust tests" "$(grep -oE '^test result: ok\. [0-9]+ passed' target/cargo-test.log | awk '{s+=$4} END {print s+0}')"
