step "Miri: the pure-Rust unit tests that can run under it"
# Miri checks what the compiler cannot: undefined behaviour in the library's own code and in
# what it asks of its dependencies (aliasing, uninitialised reads, data races between the
# threads a test starts). The modules below are the unit tests that need no sockets, processes
# or C code (SQLite, ring), which Miri cannot run; their own threads and clocks are fine
# (isolation is off for the clock). The build is cached under build/miri-target.
MIRI_MODULES=(cancel:: handoff:: llm::assembly:: llm::request_body:: llm::retry:: panic_text:: pycompat::)
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal >/dev/null 2>&1 || true
fi
if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^miri'; then
  rustup component add miri rust-src --toolchain nightly >/dev/null 2>&1 || true
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  skipped "Miri: the nightly toolchain with the miri component could not be installed (rustup's server unreachable?)"
else
  set +e
  MIRIFLAGS="-Zmiri-disable-isolation" timeout 1500 cargo +nightly miri test --quiet --lib \
    --target-dir build/miri-target -- "${MIRI_MODULES[@]}" 2>&1 | tee build/miri.log | grep -E '^(test result|error|failures)'
  miri_status=${PIPESTATUS[0]}
  set -e
  if [ "$miri_status" -ne 0 ]; then tail -n 60 build/miri.log; echo "Miri failed (status $miri_status)"; exit 1; fi
  record "Miri unit tests" "$(grep -oE '^test result: ok\. [0-9]+ passed' build/miri.log | awk '{s+=$4} END {print s+0}')"
fi
