step "C concurrency tests under ThreadSanitizer"
# A data race between the library's threads and the host's (callbacks on library threads, tokens
# fired from any thread, deferred answers from a host thread) is what the C tests exercise.
# TSan sees it only when everything that touches the memory is instrumented: the C tests, the
# library and Rust's std, so the library is built by nightly with -Zbuild-std into
# build/tsan-target (cached). The helper binaries (mock server, MCP fault server) are ordinary.
# tests/c/tsan.supp lists the dependencies' patterns TSan cannot see through, with reasons.
tsan_triple=x86_64-unknown-linux-gnu
if [ "$(uname -m)-$(uname -s)" != "x86_64-Linux" ]; then
  skipped "ThreadSanitizer: this step knows the x86_64 Linux target only (this is $(uname -m) $(uname -s))"
  return 0
fi
if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^rust-src'; then
  rustup component add rust-src --toolchain nightly >/dev/null 2>&1 || true
fi
if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^rust-src'; then
  skipped "ThreadSanitizer: nightly's rust-src (needed by -Zbuild-std) could not be installed"
  return 0
fi
RUSTFLAGS="-Zsanitizer=thread" cargo +nightly build --quiet -Zbuild-std --target "$tsan_triple" \
  -p agentao --features agentao/test-panic --target-dir build/tsan-target
cmake -S tests/c -B build/c-tsan -DCMAKE_BUILD_TYPE=Debug -DAGENTAO_TSAN=ON \
  -DAGENTAO_LIB_DIR="$ROOT/build/tsan-target/$tsan_triple/debug" >/dev/null
cmake --build build/c-tsan --parallel 2 >/dev/null
# The tests whose threads meet: callbacks on library threads, answers and cancels from host
# threads, background work, MCP and HTTP I/O. The single-threaded checks (bad input, preflight,
# permissions, panics, the virtual FS) run under ASan and valgrind; under TSan they only cost time.
TSAN_TESTS='^(test_(answer_handles|async|background|background_processes|cancel|compaction_controller|deferred|hooks|host_faults|host_tools|http|lifecycle|mcp|memory_store|registration|run_handoff|shell_executor|stream|subagents|transport)|tsan_.*)$'
ctest --test-dir build/c-tsan --output-on-failure --timeout 300 -j2 -R "$TSAN_TESTS" | tee build/ctest-tsan.log
record "C concurrency tests (TSan)" "$(grep -ohE 'tests passed, 0 tests failed out of [0-9]+' build/ctest-tsan.log | awk '{print $NF}')"
