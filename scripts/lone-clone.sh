#!/usr/bin/env bash
# The lone-clone check of scripts/test.sh: a stranger's `git clone` must pass the tests, so
# everything they read has to be inside the repository. HEAD is cloned into an empty temporary
# folder, and the Rust and C steps run in the clone with nothing beside it.
#
#   scripts/lone-clone.sh run     clones HEAD and runs the two steps there (their log:
#                                 build/lone-clone.log), then deletes the clone
#   scripts/lone-clone.sh clean   deletes a clone an interrupted run left
#
# Where it can, the clone runs at this checkout's own path, in a private mount namespace
# (`unshare -m`, root): the clone is mounted over the checkout, everything beside it is hidden
# behind empty mounts, and target/ is ours under an overlay whose writes go to the clone's
# folder. The clone's files get the modification times of our identical files, so cargo finds
# the workspace built (same paths, same sources) and rebuilds only what HEAD changes; the tests
# then read the clone's files and nothing else. Without a namespace (not root, no overlayfs,
# or a toolchain beside the checkout; or AGENTAO_LONE_CLONE_OWN_PATH=1), the clone runs at its
# own path and its workspace crates are built there first (minutes more; the log says which way
# it ran and why).
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
}

# What the steps themselves need and must stay visible: hiding what is beside the checkout
# must not hide any of these.
toolchain_paths() {
  local p
  for p in cargo rustc cc c++ cmake python3 git; do command -v "$p" || true; done
  rustc --print sysroot 2>/dev/null || true
  echo "${CARGO_HOME:-$HOME/.cargo}"
  echo "${RUSTUP_HOME:-$HOME/.rustup}"
  echo "$HOME"
}

# beside_checkout: what is in the checkout's parent folder but the checkout, one per line.
beside_checkout() {
  local sibling
  for sibling in "$(dirname "$ROOT")"/* "$(dirname "$ROOT")"/.[!.]*; do
    if [ -e "$sibling" ] && [ "$sibling" != "$ROOT" ]; then echo "$sibling"; fi
  done
}

# in_place_blocker: empty when the clone can run at our path; otherwise why it cannot.
in_place_blocker() {
  local parent sibling tool
  parent=$(dirname "$ROOT")
  [ -z "${AGENTAO_LONE_CLONE_OWN_PATH:-}" ] || { echo "AGENTAO_LONE_CLONE_OWN_PATH is set"; return; }
  [ "$parent" != / ] || { echo "the checkout's parent is /"; return; }
  [ "$(id -u)" = 0 ] || { echo "not root (a mount namespace needs it)"; return; }
  local probe overlay_ok
  probe=$(mktemp -d)
  mkdir "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
  overlay_ok=$(unshare -m --propagation private sh -c "mount -t overlay overlay \
    -o lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work $probe/merged && echo yes" 2>/dev/null || true)
  rm -rf "$probe"
  [ "$overlay_ok" = yes ] || { echo "unshare -m or an overlay mount was refused"; return; }
  while IFS= read -r tool; do
    tool=$(realpath -m "$tool")
    while IFS= read -r sibling; do
      case "$tool/" in "$(realpath -m "$sibling")/"*) echo "$tool is beside the checkout ($sibling)"; return ;; esac
    done < <(beside_checkout)
  done < <(toolchain_paths)
}

# copy_times CLONE: gives the clone's tracked files and folders our modification times where
# ours are HEAD's too (cargo compares times, and a folder's time counts for a build script's
# rerun-if-changed=src); a file we changed keeps the clone's new time, so cargo rebuilds it.
copy_times() {
  python3 - "$ROOT" "$1" <<'PY'
import os, subprocess, sys
root, lone = sys.argv[1], sys.argv[2]
def git(*args, cwd):
    out = subprocess.run(["git", "-C", cwd, *args], capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]
changed = set(git("diff", "--name-only", "-z", "HEAD", cwd=root))
def same_time(rel):
    try:
        st = os.lstat(os.path.join(root, rel))
    except FileNotFoundError:
        return
    os.utime(os.path.join(lone, rel), ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
for rel in git("ls-files", "-z", cwd=lone):
    if rel not in changed:
        same_time(rel)
for folder, _, _ in os.walk(lone, topdown=False):
    rel = os.path.relpath(folder, lone)
    if rel.split(os.sep)[0] not in (".git", "target"):
        same_time(rel)
PY
}

# The namespace's mounts, then the steps; runs inside `unshare -m` (arguments: the clone's
# parent folder, the clone).
in_place() {
  local parent=$1 lone=$2 sibling beside
  mount -t overlay overlay \
    -o "lowerdir=$ROOT/target,upperdir=$parent/target-writes,workdir=$parent/overlay-work" "$lone/target"
  mount --rbind "$lone" "$ROOT"
  beside=$(beside_checkout)
  while IFS= read -r sibling; do
    if [ -z "$sibling" ]; then
      continue
    elif [ -d "$sibling" ]; then
      mount -t tmpfs -o ro,size=4k,mode=0555 hidden "$sibling"
      [ -z "$(ls -A "$sibling")" ] || { echo "could not hide $sibling"; return 1; }
    else
      mount --bind -o ro /dev/null "$sibling"
      [ ! -s "$sibling" ] || { echo "could not hide $sibling"; return 1; }
    fi
  done <<< "$beside"
  beside=$(echo "$beside" | xargs -rd '\n' -n1 basename | tr '\n' ' ')
  echo "hidden beside $ROOT: ${beside:0:300}"
  cd "$ROOT"
  AGENTAO_LONE_CLONE=1 scripts/test.sh 30-rust 40-ctest
}

run() {
  clean
  local parent lone blocker status
  parent=$(mktemp -d)
  # Open like a checkout's parent: the PostgreSQL tests run their server as another user.
  chmod 755 "$parent"
  lone="$parent/libagentao"
  echo "$lone" > build/lone-clone.dir
  git clone -q --no-local --no-hardlinks "$ROOT" "$lone"
  echo "cloned $(git -C "$lone" rev-parse --short HEAD) into $lone"
  blocker=$(in_place_blocker)
  set +e
  if [ -z "$blocker" ] && [ -d target ]; then
    echo "the clone runs at $ROOT in a private mount namespace, with what is beside it hidden and target/ ours under an overlay"
    copy_times "$lone"
    mkdir -p "$lone/target" "$parent/target-writes" "$parent/overlay-work"
    unshare -m --propagation private bash -c "$(declare -f beside_checkout in_place); set -euo pipefail;
      ROOT=$(printf %q "$ROOT"); in_place $(printf %q "$parent") $(printf %q "$lone")" > build/lone-clone.log 2>&1
    status=$?
  else
    echo "the clone runs at its own path, so its workspace crates are built there first: ${blocker:-no target/ to reuse}"
    echo "beside it: $(ls -A "$parent" | tr '\n' ' ')"
    # Our dependencies come along (not the incremental caches, most of target/ on a dev machine,
    # nor the release build: the two steps use the debug one).
    if [ -d target ]; then
      mkdir -p "$lone/target"
      (cd target && tar cf - --exclude=incremental --exclude=./release .) | (cd "$lone/target" && tar xf -)
    fi
    (cd "$lone" && AGENTAO_LONE_CLONE=1 scripts/test.sh 30-rust 40-ctest) > build/lone-clone.log 2>&1
    status=$?
  fi
  set -e
  clean
  return $status
}

case "${1:-}" in
  run) run ;;
  clean) clean ;;
  *) sed -n '2,8p' "$0"; exit 2 ;;
esac
