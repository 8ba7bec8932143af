#!/usr/bin/env bash
# Runs every test. Each step is a file in scripts/test.d/, sourced in name order with this
# script's helpers; a step records what passed with `record`, and says clearly when and why it
# cannot run here with `skipped`. Installs missing system packages itself when it runs as root.
#
#   scripts/test.sh            every step
#   scripts/test.sh go cpp     only the steps whose file name contains one of the words
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
ROOT=$PWD

step() { printf '\n==> %s\n' "$*"; }
# record WHAT PASSED: adds PASSED tests to the summary under the name WHAT.
record() { printf '%s %s\n' "$2" "$1" >> "$ROOT/build/summary.counts"; }
# skipped WHY: the step did not run; said in the log and repeated in the summary.
skipped() { printf 'SKIPPED: %s\n' "$*" | tee -a "$ROOT/build/summary.skipped"; }
# apt_need PKG...: installs the Debian packages that are missing (root only).
apt_need() {
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing: ${missing[*]}"
    # Once per run (steps run in subshells, so a marker file rather than a variable).
    [ -f "$ROOT/build/.apt-updated" ] || { apt-get update -qq && touch "$ROOT/build/.apt-updated"; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing packages: ${missing[*]} (install them, or run as root)"; return 1
  fi
}

# readme_line PREFIX SOURCE NAME: runs the README's build-and-run line that starts with PREFIX,
# verbatim, with REPO set to this checkout, from an empty folder outside it that holds SOURCE
# as NAME (where the README says to save the quickstart); prints what the line printed.
readme_line() {
  local line dir status
  line=$(grep -m1 -F -- "$1" README.md || true)
  case "$line" in "$1"*) ;; *) echo "README has no build line starting with: $1" >&2; return 1 ;; esac
  dir=$(mktemp -d)
  cp "$2" "$dir/$3"
  status=0
  (cd "$dir" && REPO=$ROOT bash -euc "$line") || status=$?
  rm -rf "$dir"
  return $status
}

# want_step NAME: whether the step file NAME would run in this invocation.
STEP_WORDS=("$@")
want_step() {
  local w
  [ ${#STEP_WORDS[@]} -eq 0 ] && return 0
  for w in "${STEP_WORDS[@]}"; do case "$1" in *"$w"*) return 0 ;; esac; done
  return 1
}

mkdir -p build
# Steps start work in the background for a later step to wait for: work a core would otherwise
# leave idle.
# start_background PIDFILE LOG CMD...: runs CMD in a session of its own (so that stopping it
# stops what it started), its output to LOG, its process group's id in PIDFILE.
start_background() {
  local pid_file=$1 log=$2
  shift 2
  setsid "$@" > "$log" 2>&1 < /dev/null &
  echo $! > "$pid_file"
}
# wait_background PIDFILE STATUSFILE SECONDS WHAT: waits for the job to write STATUSFILE, at
# most SECONDS; stops it and fails (saying so) when it does not.
wait_background() {
  local pid deadline=$((SECONDS + $3))
  pid=$(cat "$1")
  while [ ! -f "$2" ] && kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 2; done
  [ -f "$2" ] && { rm -f "$1"; return 0; }
  stop_background "$1"
  if [ $SECONDS -ge $deadline ]; then echo "$4 did not finish in $3 s: stopped"; else echo "$4 ended without a status"; fi
  return 1
}
# stop_background PIDFILE: stops the job and what it started.
stop_background() {
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  kill -- -"$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  rm -f "$1"
}

# stop_all_background: what a run that stops at a failing step leaves running (the next run
# would also stop it, so that it cannot report into that run).
stop_all_background() {
  stop_background build/miri.pid
  scripts/lone-clone.sh clean
}
stop_all_background
rm -f build/summary.counts build/summary.skipped build/.apt-updated build/miri.status

# Disk. Cargo never deletes what it stops using, so a build tree kept between CI runs grows with
# every change of Cargo.lock, features or toolchain until a step dies halfway with "No space
# left on device". In CI, incremental state (useless on a fresh build) is neither written nor
# kept, and a tree past its budget is cleaned: one cold build instead of a full disk.
gib() { du -s --block-size=1G "$1/" 2>/dev/null | cut -f1 || echo 0; }
if [ -n "${CI:-}" ]; then
  # CI clones the checkout afresh and keeps build/ (the caches: cargo tools, npm packages, the
  # Debian root, the sanitizer and fuzz builds): cargo's tree lives there too, behind a target
  # symlink, so a run rebuilds what changed instead of every crate (CI's times matched runs
  # here with target/ deleted first, ~1.2x, not warm ones). Not in the lone clone, whose
  # target/ is an overlay mount.
  if [ -z "${AGENTAO_LONE_CLONE:-}" ] && [ ! -L target ]; then
    if [ -d target ] && [ ! -e build/target ]; then
      mv target build/target
    elif [ -d target ]; then
      echo "target/ and build/target both exist: build/target is kept, target/ deleted"
      rm -rf target
    fi
    mkdir -p build/target
    ln -s build/target target
  fi
  export CARGO_INCREMENTAL=0
  rm -rf target/*/incremental build/fuzz-target/*/incremental build/fuzz-target/*/*/incremental
  for tree in "$(realpath target)":"${AGENTAO_TARGET_BUDGET_GIB:-12}" build/fuzz-target:"${AGENTAO_FUZZ_BUDGET_GIB:-6}"; do
    dir=${tree%%:*} budget=${tree#*:}
    if [ -d "$dir" ] && [ "$(gib "$dir")" -gt "$budget" ]; then
      echo "$dir/ holds $(gib "$dir") GiB, over its budget of $budget GiB (stale builds): cleaning it"
      rm -rf "$dir"
      mkdir -p "$dir"
    fi
  done
fi
# A full run also marks what it reads of the trees, and prunes what it did not read once every
# step has passed (scripts/stale-builds.py): stale builds go at once, and the budget above is
# only the last resort.
PRUNE_STALE=
if [ -n "${CI:-}" ] && [ ${#STEP_WORDS[@]} -eq 0 ]; then
  scripts/stale-builds.py mark && PRUNE_STALE=1
fi
free_gib=$(df --block-size=1G --output=avail . | tail -1 | tr -dc 0-9)
echo "disk: ${free_gib} GiB free; target/ $(gib target) GiB, build/ $(gib build) GiB"
# A cold run wrote 10.3 GiB on a fresh clone (target/ 5.1, build/ 5.2 of which the Debian root 2.8).
[ "$free_gib" -ge 12 ] || echo "warning: a cold run writes ~12 GiB; with ${free_gib} GiB free a step may fail for lack of space"
# The library's features in every cargo command of the steps, as the C and C++ tests' CMake builds
# have them (they need agentao_test_panic): one feature set means one build of the library per
# change, shared by the Rust tests, the C tests and the rest (workspace-hack makes the
# dependencies one set too).
export AGENTAO_TEST_FEATURES=agentao/test-panic
started=$SECONDS
for f in scripts/test.d/*.sh; do
  want_step "$(basename "$f")" || continue
  t0=$SECONDS
  # Each step runs in a subshell, so what it exports (PKG_CONFIG_PATH, GOFLAGS, ...) cannot
  # leak into a later step; errexit still holds inside it (it is not in a conditional).
  set +e
  # shellcheck source=/dev/null
  (set -e; source "$f")
  rc=$?
  set -e
  if [ $rc -ne 0 ]; then
    stop_all_background
    printf '\nFAILED: step %s (exit %s)\n' "$(basename "$f" .sh)" "$rc"
    echo "summary: $(awk '{s+=$1} END {print s+0}' build/summary.counts 2>/dev/null || echo 0) passed, 1 failed"
    exit 1
  fi
  printf '    (%s: %ss)\n' "$(basename "$f" .sh)" $((SECONDS - t0))
done

step "all tests passed in $((SECONDS - started))s"
[ -f build/summary.counts ] && awk '{n=$1; $1=""; printf "  %-28s %s\n", substr($0,2), n}' build/summary.counts
[ -f build/summary.skipped ] && { echo "skipped steps:"; sed 's/^/  /' build/summary.skipped; }
# The workspace's own units go too: CI's checkout is a fresh clone, so cargo rebuilds them each
# run, and they are half of what a run leaves in target/.
[ -z "$PRUNE_STALE" ] || scripts/stale-builds.py prune --workspace
echo "summary: $(awk '{s+=$1} END {print s+0}' build/summary.counts 2>/dev/null || echo 0) passed, 0 failed"
