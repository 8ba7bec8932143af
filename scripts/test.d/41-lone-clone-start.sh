step "the lone clone's build, started in the background"
# scripts/lone-clone.sh says what the lone-clone check is; our debug build is complete here, so
# the clone's copy of target/ has every dependency and its own build is the workspace's crates.
# Niced: it takes the cores the next steps leave idle. Step 95 waits for it and runs the tests.
if ! want_step 95-lone-clone.sh || [ -n "${AGENTAO_LONE_CLONE:-}" ]; then
  echo "not needed: step 95 does not run in this invocation"
elif ! git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null; then
  echo "not started: $ROOT is not a git checkout (step 95 says so)"
else
  echo "started (log: build/lone-clone-prepare.log)"
  start_background build/lone-clone.pid build/lone-clone-prepare.log \
    nice -n 19 scripts/lone-clone.sh prepare
fi
