step "fuzz smoke (cargo-fuzz, every target)"
# Builds the libFuzzer targets of fuzz/ once (pinned cargo-fuzz under build/cargo-tools;
# stable toolchain with RUSTC_BOOTSTRAP=1; dev profile and no sanitizer, the cheapest build
# that still instruments coverage) and runs each target for FUZZ_SMOKE_SECONDS (default 10) from
# the committed seeds alone (FUZZ_FRESH: the corpus earlier runs grew is not replayed), two
# targets at a time (FUZZ_JOBS: each run is one busy thread, so two fill CI's two cores). A
# failure leaves its input in build/fuzz/artifacts/. Longer runs: scripts/fuzz.sh SECONDS. Cold (install + build + 8 runs) this step takes several minutes.
# The targets' fixtures (path_policy's workspace tree) must not outlive the run in the
# machine's temporary folder: each run added one before.
tmp_before=$(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'agentao-fuzz-*' 2>/dev/null | sort)
FUZZ_FRESH=1 FUZZ_JOBS=${FUZZ_JOBS:-2} FUZZ_PROFILE=${FUZZ_PROFILE:-dev} scripts/fuzz.sh "${FUZZ_SMOKE_SECONDS:-10}" | tee build/fuzz-smoke.log
left=$(comm -13 <(echo "$tmp_before") <(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'agentao-fuzz-*' 2>/dev/null | sort))
if [ -n "$left" ]; then echo "the fuzz run left in ${TMPDIR:-/tmp}: $left"; exit 1; fi
record "fuzz targets (smoke)" "$(grep -c '  ok$' build/fuzz-smoke.log)"
