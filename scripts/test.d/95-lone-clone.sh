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
# Step 41 started the clone's build in the background; run alone, this step builds it here.
if [ -f build/lone-clone.pid ]; then
  wait_background build/lone-clone.pid build/lone-clone.status 2400 "the lone clone's build" \
    || { cat build/lone-clone-prepare.log; exit 1; }
else
  scripts/lone-clone.sh prepare > build/lone-clone-prepare.log 2>&1 || true
fi
cat build/lone-clone-prepare.log
if [ ! -d "$(cat build/lone-clone.dir 2>/dev/null || echo /nonexistent)" ]; then
  echo "the lone clone could not be made (log above)"; exit 1
fi
prepared=$(cat build/lone-clone.status 2>/dev/null || echo none)
# A failed build is not the verdict: the steps build again in the clone and say what failed.
[ "$prepared" = 0 ] || echo "the clone's build ended with status $prepared; the steps build what is missing"
set +e
scripts/lone-clone.sh run
lone_status=$?
set -e
grep -E '^(==>|SKIPPED|FAILED|summary|test result: FAILED|    \()' build/lone-clone.log
if [ "$lone_status" -ne 0 ]; then
  tail -n 80 build/lone-clone.log; echo "the lone clone failed (full log: build/lone-clone.log)"; exit 1
fi
lone_summary=$(grep -E '^summary:' build/lone-clone.log | tail -1)
echo "lone clone: $lone_summary"
record "lone clone (Rust + C steps)" "$(echo "$lone_summary" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')"
