#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ (cargo-fuzz) for a set time each and prints the
# executions per target. One instrumented build serves every target.
#
#   scripts/fuzz.sh [SECONDS-PER-TARGET] [TARGET...]     (default: 60 s, every target)
#
# Environment: FUZZ_SANITIZER=none|address (default none: safe Rust needs no ASan, and the
# build is faster), FUZZ_PROFILE=release|dev (default release), FUZZ_JOBS (parallel targets,
# default 1). cargo-fuzz is installed once, pinned, under build/cargo-tools. It runs on the
# stable toolchain with RUSTC_BOOTSTRAP=1 (cargo-fuzz passes -Z flags with a sanitizer); a
# nightly toolchain is used only if the stable build fails and nightly is installed.
#
# Corpora: fuzz/corpus/<target> are the committed seeds (read only here); what a run finds goes
# to build/fuzz/corpus/<target>, or with FUZZ_FRESH=1 to an emptied build/fuzz/fresh/<target>
# (a smoke run then starts from the seeds alone, however long earlier runs grew the corpus).
# A crash leaves its input in build/fuzz/artifacts/ and fails the script; turn it into a test
# in tests/fuzz_regressions.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CARGO_FUZZ_VERSION=0.13.1
secs=${1:-60}
[ $# -gt 0 ] && shift
sanitizer=${FUZZ_SANITIZER:-none}
profile=${FUZZ_PROFILE:-release}
mapfile -t all < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^agentao-fuzz$')
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

tools=$ROOT/build/cargo-tools
if ! "$tools/bin/cargo-fuzz" --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
  echo "installing cargo-fuzz $CARGO_FUZZ_VERSION under build/cargo-tools"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --root "$tools" --quiet
fi
export PATH=$tools/bin:$PATH

flags=(-s "$sanitizer" --target-dir "$ROOT/build/fuzz-target")
if [ "$profile" = dev ]; then flags+=(--dev); out=debug; else flags+=(-O); out=release; fi
echo "building the fuzz targets ($profile, sanitizer $sanitizer)"
if ! RUSTC_BOOTSTRAP=1 cargo fuzz build "${flags[@]}"; then
  if rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "stable + RUSTC_BOOTSTRAP failed; retrying with the nightly toolchain"
    cargo +nightly fuzz build "${flags[@]}"
  else
    echo "the fuzz build failed and no nightly toolchain is installed"; exit 1
  fi
fi
bin=$ROOT/build/fuzz-target/x86_64-unknown-linux-gnu/$out

# Per-target input size: long enough for real commands and documents, short enough that the
# per-input timeout proves the linear-time bound of the scanners.
max_len() { case $1 in hardline) echo 65536 ;; rules | config) echo 16384 ;; *) echo 8192 ;; esac; }

run_one() {
  local t=$1 log=$ROOT/build/fuzz/logs/$1.log
  local corpus=$ROOT/build/fuzz/corpus/$t
  if [ "${FUZZ_FRESH:-0}" = 1 ]; then corpus=$ROOT/build/fuzz/fresh/$t; rm -rf "$corpus"; fi
  mkdir -p "$corpus" "$ROOT/build/fuzz/artifacts"
  local dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  local rc=0 t0=$SECONDS
  # A temporary folder of the run's own: a target's fixture (path_policy's workspace tree) goes
  # with it, even from a run killed midway (removed by the next).
  local tmp=$ROOT/build/fuzz/tmp/$t
  rm -rf "$tmp" && mkdir -p "$tmp"
  TMPDIR=$tmp "$bin/$t" "$corpus" "fuzz/corpus/$t" "${dict[@]}" \
    -max_total_time="$secs" -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$ROOT/build/fuzz/artifacts/$t-" -print_final_stats=1 </dev/null >"$log" 2>&1 || rc=$?
  rm -rf "$tmp"
  local execs rate took=$((SECONDS - t0))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [ $rc = 0 ]; then
    printf '%-14s %6ss %12s execs %8s/s  ok\n' "$t" "$took" "${execs:-?}" "${rate:-?}"
  else
    printf '%-14s %6ss %12s execs %8s/s  FAILED (exit %s)\n' "$t" "$took" "${execs:-?}" "${rate:-?}" "$rc"
    grep -E "panicked|ERROR: libFuzzer|Test unit written|SUMMARY" "$log" | head -8 | sed 's/^/    /'
    echo "    log: $log; reproduce: $bin/$t <artifact>"
    return 1
  fi
}

mkdir -p build/fuzz/logs
failed=()
jobs=${FUZZ_JOBS:-1}
echo "running ${#targets[@]} target(s), ${secs}s each, $jobs at a time"
if [ "$jobs" -le 1 ]; then
  for t in "${targets[@]}"; do run_one "$t" || failed+=("$t"); done
else
  export -f run_one max_len; export ROOT bin secs
  printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} || failed+=(some)
fi
[ ${#failed[@]} -eq 0 ] || { echo "fuzzing found failures: ${failed[*]}"; exit 1; }
echo "fuzz: ${#targets[@]} targets, no failures"
