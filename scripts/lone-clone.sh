#!/usr/bin/env bash
# The lone-clone check of scripts/test.sh: a stranger's `git clone` must pass the tests, so
# everything they read has to be inside the repository. HEAD is cloned into an empty temporary
# folder (nothing beside it), and the Rust and C steps run there.
#
#   scripts/lone-clone.sh prepare   clones HEAD and builds what those steps build; the clone's
#                                   folder goes to build/lone-clone.dir, the status of the
#                                   build to build/lone-clone.status
#   scripts/lone-clone.sh run       runs the two steps in the prepared clone (their log:
#                                   build/lone-clone.log), then deletes it
#   scripts/lone-clone.sh clean     deletes a clone an interrupted run left
#
# Step 41 starts `prepare` in the background, niced, once our own debug build is complete: the
# clone's build (the workspace's crates again, in their new folder; the dependencies come with
# the copy of our target/) then takes the cores the later steps leave idle, and step 95 only
# runs the tests. Build artifacts are outputs, never sources a test reads.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

clean() {
  if [ -f build/lone-clone.dir ]; then
    local parent
    parent=$(dirname "$(cat build/lone-clone.dir)")
    rm -rf "$parent" || echo "could not remove all of $parent" >&2
    rm -f build/lone-clone.dir
  fi
  rm -f build/lone-clone.status
}

prepare() {
  clean
  local parent lone
  parent=$(mktemp -d)
  # Open like a checkout's parent: the PostgreSQL tests run their server as another user.
  chmod 755 "$parent"
  lone="$parent/libagentao"
  echo "$lone" > build/lone-clone.dir
  git clone -q --no-local --no-hardlinks "$ROOT" "$lone"
  echo "cloned $(git -C "$lone" rev-parse --short HEAD) into $lone; beside it: $(ls -A "$parent" | tr '\n' ' ')"
  # Without the incremental caches: they are most of target/ (14 of 29 GiB on a dev machine,
  # where copying them ran the disk out) and only speed up rebuilding edited sources, which a
  # clone has not. Without the release build either: the Rust and C steps use the debug one.
  if [ -d target ]; then
    mkdir -p "$lone/target"
    (cd target && tar cf - --exclude=incremental --exclude=./release .) | (cd "$lone/target" && tar xf -)
  fi
  # What steps 30 and 40 build (with their features); if they change and this does not,
  # step 95 builds the rest itself, in the foreground.
  local features=${AGENTAO_TEST_FEATURES:-agentao/test-panic}
  (
    cd "$lone"
    cargo build --quiet -p mcp-fault-server
    cargo test --workspace --features "$features" --quiet --no-run
    cmake -S tests/c -B build/c -DCMAKE_BUILD_TYPE=Debug >/dev/null
    cmake --build build/c --parallel 2 >/dev/null
  )
}

run() {
  local lone status
  lone=$(cat build/lone-clone.dir)
  set +e
  (cd "$lone" && AGENTAO_LONE_CLONE=1 scripts/test.sh 30-rust 40-ctest) > build/lone-clone.log 2>&1
  status=$?
  set -e
  clean
  return $status
}

case "${1:-}" in
  prepare)
    status=0
    prepare || status=$?
    echo "$status" > build/lone-clone.status
    exit $status
    ;;
  run) run ;;
  clean) clean ;;
  *) sed -n '2,12p' "$0"; exit 2 ;;
esac
