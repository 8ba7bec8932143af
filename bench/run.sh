#!/bin/sh
# The libagentao benchmark, in one command:  bench/run.sh [--quick] [--only SECTION]
#   bench/run.sh --callgrind   instructions per turn and per tool-loop iteration (valgrind)
#   bench/run.sh --cpu 0       everything pinned to CPU 0: one placement for every floor (see
#                              bench/HISTORY.md, Part 8 (floor))
# Builds the release library, the release mock server, the MCP fault server, the hyper floor and
# agentao-acp, compiles bench/bench.c with -O2
# against include/agentao.h and target/release/libagentao.so, runs it, and writes
# bench/results.json (the printed table holds the same figures). See docs/performance.md.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
cargo build --release -p agentao -p mock-openai -p mcp-fault-server -p hyper-floor -p agentao-acp
mkdir -p target/bench
cc -O2 -std=c11 -Wall -Wextra -Iinclude -o target/bench/bench bench/bench.c \
   -Ltarget/release -lagentao -Wl,-rpath,"$ROOT/target/release" -lpthread
exec target/bench/bench --mock target/release/mock-openai --hyper-floor target/release/hyper-floor --out bench/results.json "$@"
