step "OpenTelemetry: a traced session exported over OTLP/HTTP to Jaeger v1.75.0, read back through its query API"
# The exporter's failure modes (a collector down or silent) run in the "Rust tests" step; this
# one needs the real backend (tests/otel_jaeger.rs, ignored by a plain cargo test). Jaeger is
# built from the Go module proxy once and cached as build/go-tools/jaeger (scripts/jaeger.sh).
set +e
otlp=$(scripts/jaeger.sh start)
rc=$?
set -e
if [ $rc = 3 ]; then skipped "otel: Jaeger cannot run here ($otlp)"; return 0; fi
[ $rc = 0 ] || { echo "$otlp"; exit 1; }
mkdir -p build/jaeger
set +e
{ AGENTAO_JAEGER_REQUIRED=1 cargo test --features "$AGENTAO_TEST_FEATURES" --quiet --test otel_jaeger -- --ignored \
  && AGENTAO_JAEGER_REQUIRED=1 cargo test --features "$AGENTAO_TEST_FEATURES" --quiet -p agentao-acp --test otel -- --ignored; } 2>&1 \
  | tee build/jaeger/out.txt
status=${PIPESTATUS[0]}
set -e
scripts/jaeger.sh stop
[ "$status" = 0 ] || { echo "the Jaeger test failed"; exit 1; }
record "otel-jaeger" "$(sed -nE 's/^test result: ok\. ([0-9]+) passed; 0 failed.*/\1/p' build/jaeger/out.txt | awk '{s += $1} END {print s + 0}')"
