step "agentao-acp driven by the official ACP TypeScript client (@agentclientprotocol/sdk)"
# The Rust protocol tests of agentao-acp run in the "Rust tests" step (cargo test --workspace).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt_need nodejs npm || true
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  skipped "acp-node: node and npm are not installed (and could not be installed here), so the TypeScript ACP client cannot run"
elif [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 18 ]; then
  skipped "acp-node: node $(node --version) is older than 18 (the SDK needs web streams)"
else
  # The binary and the validator as the Rust step's `cargo test` builds them (a no-op after it).
  cargo test --workspace --features "$AGENTAO_TEST_FEATURES" --no-run --quiet
  acp_dir=build/acp-node
  mkdir -p "$acp_dir"
  cp tests/acp-node/package.json tests/acp-node/package-lock.json tests/acp-node/client.mjs "$acp_dir/"
  # npm ci only when the lock changed since the cached install.
  if ! cmp -s tests/acp-node/package-lock.json "$acp_dir/node_modules/.installed-lock" 2>/dev/null; then
    (cd "$acp_dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp tests/acp-node/package-lock.json "$acp_dir/node_modules/.installed-lock"
  fi
  rm -rf "$acp_dir/work"
  node "$acp_dir/client.mjs" "$PWD/target/debug/agentao-acp" "$PWD/$acp_dir/work" \
    "$acp_dir/transcript.jsonl" | tee "$acp_dir/out.txt"
  target/debug/examples/validate_transcript "$acp_dir/transcript.jsonl" \
    | tee -a "$acp_dir/out.txt"
  record "acp-node" "$(sed -nE 's/^acp-node: ([0-9]+) passed, 0 failed$/\1/p' "$acp_dir/out.txt")"
fi

step "agentao-acp driven by the official ACP Python SDK (agent-client-protocol)"
py_dir=build/acp-python
if ! command -v python3 >/dev/null; then
  apt_need python3 python3-venv || true
fi
if ! command -v python3 >/dev/null; then
  skipped "acp-python: python3 is not installed (and could not be installed here)"
elif ! { [ -x "$py_dir/venv/bin/python" ] || python3 -m venv "$py_dir/venv"; }; then
  skipped "acp-python: python3 cannot make a virtual environment (python3-venv missing)"
elif ! "$py_dir/venv/bin/pip" install --quiet --disable-pip-version-check \
    -r tests/acp-python/requirements.txt; then
  skipped "acp-python: agent-client-protocol could not be installed from the package registry"
else
  cargo test --workspace --features "$AGENTAO_TEST_FEATURES" --no-run --quiet
  rm -rf "$py_dir/work"
  "$py_dir/venv/bin/python" tests/acp-python/client.py "$PWD/target/debug/agentao-acp" \
    "$PWD/$py_dir/work" | tee "$py_dir/out.txt"
  record "acp-python" "$(sed -nE 's/^acp-python: ([0-9]+) passed, 0 failed$/\1/p' "$py_dir/out.txt")"
fi
