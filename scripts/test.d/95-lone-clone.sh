step "a lone clone: the Rust and C steps in a fresh clone with nothing beside it"
# A stranger's `git clone` must pass the tests: everything they read has to be inside the
# repository. Clone the committed HEAD into an empty temporary folder and run the Rust and C
# steps there. The clone's target/ starts as a copy of ours, so dependencies are not rebuilt;
# build artifacts are outputs, never sources a test reads.
if [ -n "${AGENTAO_LONE_CLONE:-}" ]; then
  skipped "lone clone: already running inside one"
  return 0
fi
if ! git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null; then
  skipped "lone clone: $ROOT is not a git checkout"
  return 0
fi
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]; then
  echo "note: uncommitted changes are not in the clone; it tests HEAD $(git -C "$ROOT" rev-parse --short HEAD)"
fi
lone_parent=$(mktemp -d)
# Open like a checkout's parent: the PostgreSQL tests run their server as another user.
chmod 755 "$lone_parent"
trap 'rm -rf "$lone_parent"' EXIT
lone="$lone_parent/libagentao"
git clone -q --no-local --no-hardlinks "$ROOT" "$lone"
echo "cloned $(git -C "$lone" rev-parse --short HEAD) into $lone; beside it: $(ls -A "$lone_parent" | tr '\n' ' ')"
# Without the incremental caches: they are most of target/ (14 of 29 GiB on a dev machine, where
# copying them ran the disk out) and only speed up rebuilding edited sources, which a clone has not.
if [ -d "$ROOT/target" ]; then
  mkdir -p "$lone/target"
  (cd "$ROOT/target" && tar cf - --exclude=incremental .) | (cd "$lone/target" && tar xf -)
fi
set +e
(cd "$lone" && AGENTAO_LONE_CLONE=1 scripts/test.sh 30-rust 40-ctest) 2>&1 | tee build/lone-clone.log | grep -E '^(==>|SKIPPED|FAILED|summary|test result: FAILED|    \()'
lone_status=${PIPESTATUS[0]}
set -e
if [ "$lone_status" -ne 0 ]; then
  tail -n 80 build/lone-clone.log; echo "the lone clone failed (full log: build/lone-clone.log)"; exit 1
fi
lone_summary=$(grep -E '^summary:' build/lone-clone.log | tail -1)
echo "lone clone: $lone_summary"
record "lone clone (Rust + C steps)" "$(echo "$lone_summary" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')"
