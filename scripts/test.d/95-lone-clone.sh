step "a lone clone: the Rust and C steps in a fresh clone with nothing beside it"
# scripts/lone-clone.sh says what this checks and how.
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
set +e
scripts/lone-clone.sh run
lone_status=$?
set -e
grep -E '^(==>|SKIPPED|FAILED|summary|hidden beside|test result: FAILED|    \()' build/lone-clone.log
if [ "$lone_status" -ne 0 ]; then
  tail -n 80 build/lone-clone.log; echo "the lone clone failed (full log: build/lone-clone.log)"; exit 1
fi
lone_summary=$(grep -E '^summary:' build/lone-clone.log | tail -1)
echo "lone clone: $lone_summary"
record "lone clone (Rust + C steps)" "$(echo "$lone_summary" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')"
