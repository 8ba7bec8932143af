#!/bin/sh
# The libagentao benchmark, in one command:  bench/run.sh [--quick] [--only SECTION]
#   bench/run.sh --callgrind   instructions per turn and per tool-loop iteration (valgrind)
#   bench/run.sh --cpu 0       everything pinned to CPU 0: one placement for every floor (see
#                              bench/HISTORY.md, Part 8 (floor))
#   bench/run.sh --only bindings   the C++, Go and Swift layers against the C API
#                              (bench/bench_bindings.c); builds their workers first, a language
#                              without its toolchain (Swift: the Debian 13 root) skipped
# Builds the release library, the release mock server, the MCP fault server, the hyper floor and
# agentao-acp, compiles bench/bench.c with -O2
# against include/agentao.h and target/release/libagentao.so, runs it, and writes
# bench/results.json (the printed table holds the same figures). See docs/performance.md.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# The library alone first, as every test step builds it: built together with the other packages
# its dependencies' features unify differently, and each switch rebuilt it (~15 min here).
cargo build --release
cargo build --release -p mock-openai -p mcp-fault-server -p hyper-floor -p agentao-acp
mkdir -p target/bench
cc -O2 -std=c11 -Wall -Wextra -Iinclude -o target/bench/bench bench/bench.c \
   -Ltarget/release -lagentao -Wl,-rpath,"$ROOT/target/release" -lpthread
case " $* " in
*" bindings "*)
  # The workers of --only bindings, next to the bench (it finds them there). A stale worker
  # would measure an old binding: each is removed first, so a failed build means "skipped".
  rm -f target/bench/bind-cpp target/bench/bind-go
  if command -v c++ >/dev/null; then
    c++ -O2 -std=c++17 -Wall -Wextra -Iinclude -Ibindings/cpp -o target/bench/bind-cpp \
       bench/bindings/worker.cpp -Ltarget/release -lagentao -Wl,-rpath,"$ROOT/target/release" -lpthread
  else
    echo "bindings: no C++ compiler: the C++ rows are skipped"
  fi
  if command -v go >/dev/null && go version | grep -qE 'go1\.(2[3-9]|[3-9][0-9])'; then
    mkdir -p target/bench/pkgconfig
    cat > target/bench/pkgconfig/agentao.pc <<PC
Name: agentao
Description: libagentao (the release build in the repository, for the bench)
Version: 0
Cflags: -I$ROOT/include
Libs: -L$ROOT/target/release -Wl,-rpath,$ROOT/target/release -lagentao
PC
    (cd bench/bindings/go && PKG_CONFIG_PATH="$ROOT/target/bench/pkgconfig" GOFLAGS=-modcacherw \
       GOTOOLCHAIN=local GOCACHE="${GOCACHE:-$ROOT/build/go-cache}" go build -o "$ROOT/target/bench/bind-go" .)
  else
    echo "bindings: Go 1.23 or newer is not installed: the Go rows are skipped"
  fi
  # Swift only in the Debian 13 root of scripts/swift-root.sh; the script says why it cannot.
  sh bench/bindings/swift-worker/build.sh
  ;;
esac
exec target/bench/bench --mock target/release/mock-openai --hyper-floor target/release/hyper-floor --out bench/results.json "$@"
