#!/usr/bin/env bash
# A throwaway Jaeger (v2, the `jaeger` binary of jaegertracing/jaeger v1.75.0: an OpenTelemetry
# collector with in-memory storage and the query API) for the telemetry tests, in build/jaeger/:
#
#   scripts/jaeger.sh build    builds the binary once (cached as build/go-tools/jaeger); a
#                              second caller waits for the first through build/jaeger/build.lock
#   scripts/jaeger.sh start    builds the binary once (cached as build/go-tools/jaeger) and
#                              starts it on free loopback ports; prints the OTLP/HTTP base URL
#   scripts/jaeger.sh stop     stops it (the traces are in memory: they go with it)
#   scripts/jaeger.sh url      the OTLP/HTTP base URL of the running server (exit 1 when none)
#   scripts/jaeger.sh query    the query API's base URL (`/api/traces?service=…` below it)
#   scripts/jaeger.sh ui       the same URL: the UI is served there too
#
# AGENTAO_JAEGER_UI=DIR serves a built jaeger-ui (its `packages/jaeger-ui/build`) as the UI:
# the module has no UI assets of its own (they are a separate npm build, embedded only by
# Jaeger's release builds), so without it the UI is a placeholder; the query API is there
# either way.
#
# Exit status 3 with a line starting "unavailable:" means Jaeger cannot run on this machine
# (no Go 1.24+, or the module proxy cannot be reached); callers turn that into a skipped step.
#
# Why not `go install …/cmd/jaeger@v1.75.0`: Jaeger's go.mod has a `replace` directive, which
# `go install pkg@version` refuses ("must not contain directives that would cause it to be
# interpreted differently than if it were the main module"). So the module is downloaded from
# the module proxy (`go mod download`) and built inside its own folder, where it is the main
# module and the replace applies, as its own build does.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
version=v1.75.0
dir=${AGENTAO_JAEGER_DIR:-$root/build/jaeger}
bin=$root/build/go-tools/jaeger
mkdir -p "$dir"

ensure_bin() {
  [ -x "$bin" ] && return 0
  # One build at a time (the test command starts one in the background): a second caller
  # waits for it, then finds the binary.
  exec 9>"$dir/build.lock"
  flock 9
  # Closed again before returning: a server started after must not hold the lock.
  if [ -x "$bin" ]; then exec 9>&-; return 0; fi
  if ! command -v go >/dev/null || ! go version | grep -qE 'go1\.(2[4-9]|[3-9][0-9])'; then
    echo "unavailable: Jaeger $version needs Go 1.24 or newer ($(command -v go >/dev/null && go version || echo 'no go'))"
    exit 3
  fi
  # Go's own build cache (not one under build/): a fresh clone on the same machine (CI's)
  # then relinks the binary in about a minute instead of compiling Jaeger's ~1,500 packages.
  export GOFLAGS=-modcacherw GOTOOLCHAIN=local
  local src
  if ! src=$(go mod download -json "github.com/jaegertracing/jaeger@$version" 2>"$dir/download.log" \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir",""))'); then
    echo "unavailable: go mod download github.com/jaegertracing/jaeger@$version failed: $(tail -1 "$dir/download.log")"
    exit 3
  fi
  [ -n "$src" ] && [ -d "$src" ] || { echo "unavailable: the module download gave no source folder"; exit 3; }
  echo "building: jaeger $version (once; cached as build/go-tools/jaeger)" >&2
  mkdir -p "$(dirname "$bin")"
  (cd "$src" && go build -trimpath -o "$bin.tmp" ./cmd/jaeger) >"$dir/build.log" 2>&1 \
    || { tail -20 "$dir/build.log" >&2; echo "jaeger build failed" >&2; exit 1; }
  mv "$bin.tmp" "$bin"
  exec 9>&-
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

running() { [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; }

start() {
  ensure_bin
  if running; then cat "$dir/otlp"; return 0; fi
  local otlp query grpc health ui=""
  if [ -n "${AGENTAO_JAEGER_UI:-}" ]; then
    ui="    ui:
      assets_path: $AGENTAO_JAEGER_UI"
  fi
  otlp=$(free_port); query=$(free_port); grpc=$(free_port); health=$(free_port)
  # Only what the tests use, on loopback: OTLP/HTTP in, memory storage, the query API and UI.
  # No own metrics endpoint (the default one is a fixed port).
  cat > "$dir/config.yaml" <<YAML
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:$query
    grpc:
      endpoint: 127.0.0.1:$grpc
$ui
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:$health
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$otlp
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
YAML
  setsid "$bin" --config "$dir/config.yaml" >"$dir/server.log" 2>&1 < /dev/null &
  echo $! > "$dir/pid"
  echo "http://127.0.0.1:$otlp" > "$dir/otlp"
  echo "http://127.0.0.1:$query" > "$dir/query"
  local i
  for i in $(seq 1 150); do
    if curl -fsS "http://127.0.0.1:$query/api/services" >/dev/null 2>&1 \
       && curl -sS -o /dev/null "http://127.0.0.1:$otlp/v1/traces" 2>/dev/null; then
      cat "$dir/otlp"; return 0
    fi
    running || break
    sleep 0.2
  done
  tail -20 "$dir/server.log" >&2
  stop
  echo "jaeger did not start" >&2
  exit 1
}

stop() {
  if running; then
    local pid
    pid=$(cat "$dir/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pid"
}

case "${1:-}" in
  build) ensure_bin ;;
  start) start ;;
  stop) stop ;;
  url) running && cat "$dir/otlp" || { echo "no jaeger runs in $dir" >&2; exit 1; } ;;
  query|ui) running && cat "$dir/query" || { echo "no jaeger runs in $dir" >&2; exit 1; } ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
