#!/usr/bin/env bash
# Builds the library and runs the C quickstart (offline unless OPENAI_API_KEY is set).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }
command -v cc >/dev/null || { echo "a C compiler is required (apt-get install build-essential)"; exit 1; }
cargo build --release --quiet
mkdir -p build
cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/quickstart.c -Ltarget/release -lagentao \
   -Wl,-rpath,"$PWD/target/release" -o build/quickstart
exec build/quickstart
