step "new-project recipes from the docs, run verbatim outside the checkout against the installed prefix"
# Each recipe is a `## ...` section of a doc whose commands and files scripts/doc-recipe.py
# extracts as written; it runs in an empty folder outside the checkout, with PREFIX set to the
# prefix step 80 installed (installed here when that step did not run), and nothing else of
# the checkout in reach but what the environment below stands in for (a module proxy for
# `go get`). Each recipe's wall time is printed.
prefix="$ROOT/build/prefix"
{ [ -f "$prefix/lib/pkgconfig/agentao.pc" ] && [ -x "$prefix/bin/agentao-acp" ]; } || scripts/install.sh --prefix "$prefix" --libdir lib --acp
recipes_dir="$ROOT/build/recipes"
rm -rf "$recipes_dir" && mkdir -p "$recipes_dir"

# run_recipe NAME FILE SECTION [VAR=VALUE...]: runs the recipe in a fresh folder under /tmp
# with the given environment; its output goes to build/recipes/NAME.out.
run_recipe() {
  local name=$1 file=$2 section=$3 dir started status=0
  shift 3
  python3 scripts/doc-recipe.py "$file" "$section" > "$recipes_dir/$name.sh"
  dir=$(mktemp -d "${TMPDIR:-/tmp}/agentao-recipe-$name.XXXXXX")
  case "$dir" in "$ROOT"/*) echo "the recipe folder $dir is inside the checkout"; return 1 ;; esac
  started=$EPOCHREALTIME
  (cd "$dir" && env PREFIX="$prefix" "$@" bash -euo pipefail "$recipes_dir/$name.sh") \
    > "$recipes_dir/$name.out" 2>&1 || status=$?
  printf 'recipe %s (%s, "%s"): %.1f s, status %s\n' "$name" "$file" "$section" \
    "$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN {print b - a}')" "$status" | tee -a "$recipes_dir/times.txt"
  [ "$status" = 0 ] || { cat "$recipes_dir/$name.out"; rm -rf "$dir"; return 1; }
  rm -rf "$dir"
}

# C (pkg-config, CMake) and C++: docs/new-project.md.
apt_need pkg-config cmake
run_recipe c-pkgconfig docs/new-project.md "C with pkg-config"
grep -qx 'Hello from C.' build/recipes/c-pkgconfig.out
run_recipe c-cmake docs/new-project.md "C with CMake"
grep -qx 'Hello from CMake.' build/recipes/c-cmake.out
run_recipe cpp docs/new-project.md "C++"
grep -qx 'Hello from C++.' build/recipes/cpp.out
grep -qx 'stream items: 3' build/recipes/cpp.out
record "C and C++ recipes (pkg-config, CMake; installed prefix)" 3

# An ACP client in Python: the official SDK from PyPI, against the installed agentao-acp.
if ! command -v python3 >/dev/null || ! python3 -m venv --help >/dev/null 2>&1; then
  skipped "Python ACP recipe: python3 with venv is not installed"
else
  if run_recipe acp-python docs/new-project.md "An ACP client in Python"; then
    grep -qx 'agent: Hello over ACP.' build/recipes/acp-python.out
    grep -qx 'stop: end_turn' build/recipes/acp-python.out
    record "ACP client recipe (Python SDK, installed agentao-acp)" 1
  elif grep -qE 'NewConnectionError|Temporary failure in name resolution|Network is unreachable' build/recipes/acp-python.out; then
    skipped "Python ACP recipe: pip could not reach the package registry"
  else
    exit 1
  fi
fi

# An ACP client in TypeScript: the official SDK from npm, run with tsx.
if ! command -v node >/dev/null || ! command -v npm >/dev/null \
   || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 18 ]; then
  skipped "TypeScript ACP recipe: node 18+ and npm are not installed"
elif run_recipe acp-ts docs/new-project.md "An ACP client in TypeScript"; then
  grep -qx 'agent: Hello over ACP.' build/recipes/acp-ts.out
  grep -qx 'stop: end_turn' build/recipes/acp-ts.out
  record "ACP client recipe (TypeScript SDK, installed agentao-acp)" 1
elif grep -qE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT' build/recipes/acp-ts.out; then
  skipped "TypeScript ACP recipe: npm could not reach the package registry"
else
  exit 1
fi

# Go: `go get` of the tagged module through a file-based GOPROXY (scripts/go-proxy.sh), the
# path a user takes through the public proxy.
if ! command -v go >/dev/null || ! go version | grep -qE 'go1\.(2[3-9]|[3-9][0-9])'; then
  skipped "Go recipe: Go 1.23 or newer is not installed"
else
  go_module=$(awk '$1 == "module" {print $2; exit}' bindings/go/go.mod)
  go_version="v$(awk -F'"' '/^version/ {print $2; exit}' Cargo.toml)"
  # The docs spell the module path go.mod declares, at the library's version.
  grep -qxF "go get $go_module@$go_version" bindings/go/README.md \
    || { echo "bindings/go/README.md does not say 'go get $go_module@$go_version'"; exit 1; }
  rm -rf build/go-proxy
  scripts/go-proxy.sh build/go-proxy "$go_version"
  go_modcache=$(mktemp -d "${TMPDIR:-/tmp}/agentao-gomod.XXXXXX")
  run_recipe go bindings/go/README.md "Use it from a new project" \
    GOPROXY="file://$ROOT/build/go-proxy" GONOSUMDB="$go_module" GOFLAGS="-mod=mod -modcacherw" \
    GOMODCACHE="$go_modcache" GOCACHE="$ROOT/build/go-cache" GOTOOLCHAIN=local
  rm -rf "$go_modcache"
  grep -qx 'Hello from the agent.' build/recipes/go.out
  grep -qx 'delta: Streamed ' build/recipes/go.out
  grep -qx 'delta: as it comes.' build/recipes/go.out
  grep -q "downloading $go_module $go_version" build/recipes/go.out
  record "Go recipe (go get through a GOPROXY, installed prefix)" 1
fi
