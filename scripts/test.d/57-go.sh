step "Go binding (bindings/go): vet, tests under -race, stress, example, README quickstart"
# The binding finds the library with pkg-config. Until the install script lands, a development
# agentao.pc points at the repository's include/ and target/release (with an rpath).
if ! command -v go >/dev/null || ! go version | grep -qE 'go1\.(2[3-9]|[3-9][0-9])'; then
  skipped "Go binding: Go 1.23 or newer is not installed ($(command -v go >/dev/null && go version || echo 'no go'))"
else
  cargo build --release --quiet
  mkdir -p build/go-pkgconfig build/go
  cat > build/go-pkgconfig/agentao.pc <<PC
Name: agentao
Description: libagentao (development copy in the repository)
Version: $(awk -F'"' '/^version/ {print $2; exit}' Cargo.toml)
Cflags: -I$ROOT/include
Libs: -L$ROOT/target/release -Wl,-rpath,$ROOT/target/release -lagentao
PC
  export PKG_CONFIG_PATH="$ROOT/build/go-pkgconfig" GOCACHE="$ROOT/build/go-cache" GOFLAGS=-modcacherw GOTOOLCHAIN=local
  unformatted=$(gofmt -l bindings/go examples/go bench/bindings/go)
  [ -z "$unformatted" ] || { echo "gofmt needed: $unformatted"; false; }
  (cd bindings/go && go vet ./...)
  (cd bench/bindings/go && go vet .)  # bench/run.sh --only bindings' Go worker keeps building
  (cd bindings/go && go test -race -count=1 -json ./... > "$ROOT/build/go/test-race.json") || {
    grep -E '"Action":"(fail|output)"' build/go/test-race.json | grep -E 'FAIL|_test.go' | head -40; false; }
  go_passed=$(grep -cE '"Action":"pass".*"Test":' build/go/test-race.json)
  grep -q '"Action":"fail"' build/go/test-race.json && { echo "Go tests failed"; false; }
  echo "go test -race: $go_passed tests and subtests passed"
  record "Go tests (-race)" "$go_passed"

  # Stress: many goroutines, random cancels, closes mid-turn; GC after every allocation burst.
  (cd bindings/go && AGENTAO_STRESS_SECONDS="${AGENTAO_GO_STRESS_SECONDS:-20}" GOGC=1 GODEBUG=cgocheck=1 \
     timeout 300 go test -count=1 -run '^TestStress$' -v ./agentao/) | tee build/go/stress.log | grep -E 'stress:|^(---|ok|FAIL)'
  grep -q -- '--- PASS: TestStress' build/go/stress.log
  record "Go stress run" 1

  # The benchmarks once each, so that they keep working (figures: docs/performance.md).
  (cd bindings/go && go test -count=1 -run '^$' -bench . -benchtime 1x ./agentao/ >/dev/null)

  (cd examples/go && go vet . && go run .) | tee build/go/example.out
  grep -q 'status=ok is_answer=true tools=2' build/go/example.out
  grep -q 'summary.txt: The build uses make.' build/go/example.out
  record "Go example" 1

  rm -rf build/go/readme && mkdir -p build/go/readme
  awk '/^## Quickstart in Go/{q=1} q&&/^```go$/{c=1;next} c&&/^```$/{exit} c' README.md > build/go/readme/main.go
  cat > build/go/readme/go.mod <<MOD
module readme

go 1.23

require github.com/agentao/libagentao/bindings/go v0.0.0

replace github.com/agentao/libagentao/bindings/go => $ROOT/bindings/go
MOD
  (cd build/go/readme && go vet . && go run .) | tee build/go/readme.out
  grep -qx 'Hello from the agent.' build/go/readme.out
  record "README Go quickstart" 1
fi
