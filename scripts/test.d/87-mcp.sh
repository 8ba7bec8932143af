step "MCP client against @modelcontextprotocol/server-everything and server-filesystem (npm)"
# The fault-server tests (tests/mcp_faults.rs) run in the "Rust tests" step; this one runs the
# tests that need the real servers (tests/mcp_servers.rs, ignored by a plain cargo test).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt_need nodejs npm || true
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  skipped "mcp-node: node and npm are not installed (and could not be installed here), so the npm MCP servers cannot run"
else
  mcp_dir=build/mcp-node
  mkdir -p "$mcp_dir"
  cp tests/mcp-node/package.json tests/mcp-node/package-lock.json "$mcp_dir/"
  # npm ci only when the lock changed since the cached install.
  if ! cmp -s tests/mcp-node/package-lock.json "$mcp_dir/node_modules/.installed-lock" 2>/dev/null; then
    (cd "$mcp_dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp tests/mcp-node/package-lock.json "$mcp_dir/node_modules/.installed-lock"
  fi
  AGENTAO_MCP_NODE="$PWD/$mcp_dir" cargo test --workspace --features "$AGENTAO_TEST_FEATURES" --quiet --test mcp_servers -- --ignored 2>&1 \
    | tee "$mcp_dir/out.txt"
  record "mcp-node" "$(sed -nE 's/^test result: ok\. ([0-9]+) passed; 0 failed.*/\1/p' "$mcp_dir/out.txt")"
fi
