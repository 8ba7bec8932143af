step "examples"
cargo build --release --quiet
mkdir -p build/examples
CFLAGS=(-std=c11 -Wall -Wextra -Werror -O2 -Iinclude -Ltarget/release -Wl,-rpath,"$PWD/target/release")
cc "${CFLAGS[@]}" examples/quickstart.c -lagentao -o build/examples/quickstart
# workspace_removed OUT: the demo whose output is OUT removed the working directory it named.
workspace_removed() {
  local dir
  dir=$(sed -n 's/^working directory: \(.*\) (removed at exit)$/\1/p' "$1")
  [ -n "$dir" ] || { echo "$1: the demo named no working directory"; return 1; }
  [ ! -e "$dir" ] || { echo "$1: the demo left $dir behind"; return 1; }
}
build/examples/quickstart | tee build/examples/quickstart.out
grep -q '"is_answer":true' build/examples/quickstart.out
workspace_removed build/examples/quickstart.out
cc "${CFLAGS[@]}" examples/audit_pipeline.c -lagentao -lsqlite3 -lpthread -o build/examples/audit_pipeline
build/examples/audit_pipeline build/examples/audit.db | tee build/examples/audit.out
grep -q 'rows: [1-9]' build/examples/audit.out
grep -qE '^[0-9]+ +subagent_lifecycle +call_check +sub-agent: ledger-checker +spawned +child [0-9a-f-]{36}$' build/examples/audit.out
grep -qE '^[0-9]+ +subagent_lifecycle +call_check +sub-agent: ledger-checker +completed +usage 730\+30 tokens$' build/examples/audit.out
grep -q '^session usage (sub-agent included): {"prompt_tokens":730,"completion_tokens":30,' build/examples/audit.out
# The same pipeline through the library's PostgreSQL audit sink, where a server can run.
set +e
pg_url=$(scripts/postgres.sh start)
pg_rc=$?
set -e
if [ $pg_rc = 0 ] && apt_need libpq-dev; then
  cc "${CFLAGS[@]}" -I"$(pg_config --includedir)" -DAUDIT_POSTGRES examples/audit_pipeline.c -lagentao -lsqlite3 -lpq \
    -lpthread -o build/examples/audit_pipeline_pg
  build/examples/audit_pipeline_pg --postgres "$pg_url" | tee build/examples/audit_pg.out
  grep -qE '^audit sink: [1-9][0-9]* written, 0 dropped$' build/examples/audit_pg.out
  grep -qE '^subagent_lifecycle +call_check +sub-agent: ledger-checker +completed$' build/examples/audit_pg.out
  grep -qE '^tool_lifecycle +call_wipe +write_file +failed/cancelled$' build/examples/audit_pg.out
  [ "$(grep -c '^rows: 16$' build/examples/audit_pg.out)" = 1 ]
  scripts/postgres.sh stop
else
  skipped "examples: audit_pipeline's PostgreSQL mode (${pg_url:-no libpq-dev})"
fi
cc "${CFLAGS[@]}" examples/sandboxed_host.c -lagentao -lpthread -o build/examples/sandboxed_host
build/examples/sandboxed_host | tee build/examples/sandboxed_host.out
grep -q '^\[output\] querying the ticket database' build/examples/sandboxed_host.out
grep -q '^\[memory\] stored .*"key_normalized":"ticket_t_42_owner"' build/examples/sandboxed_host.out
grep -q '^\[policy\] run_shell_command: .*"outcome":"deny"' build/examples/sandboxed_host.out
grep -qx '\[fs\] wrote 12 byte(s) to T-42.md in memory' build/examples/sandboxed_host.out
grep -qx '\[fs\] read T-42.md from memory: owner: Dana' build/examples/sandboxed_host.out
grep -qx '\[disk\] workspace/notes never reached the disk' build/examples/sandboxed_host.out
# Deciding `git status` asks the host's executor where the repository lies, then it runs there.
grep -q '^\[audit\] git rev-parse --absolute-git-dir --git-common-dir --show-toplevel (in ' build/examples/sandboxed_host.out
grep -q '^\[audit\] git status (in ' build/examples/sandboxed_host.out
grep -qx '\[output\] On branch main' build/examples/sandboxed_host.out
grep -q '^\[refused\] .*"call_id":"call_6","status":"cancelled".*"error":"denied by permission engine"' build/examples/sandboxed_host.out
grep -qx '\[audit\] executor released; commands run: 2' build/examples/sandboxed_host.out
grep -qx '\[answer\] OK: T-42 is owned by Dana; I saved that for later.' build/examples/sandboxed_host.out
record "C examples" 3

step "README quickstart compiles as written"
awk '/^## Quickstart/{q=1} q&&/^```c$/{c=1;next} c&&/^```$/{exit} c' README.md > build/examples/readme_quickstart.c
cc "${CFLAGS[@]}" build/examples/readme_quickstart.c -lagentao -o build/examples/readme_quickstart
(cd build/examples && ./readme_quickstart) | tee build/examples/readme.out
grep -qx 'Hello from the agent.' build/examples/readme.out
# The README's own build-and-run line, verbatim, from a folder outside the checkout.
readme_line 'cc -I"$REPO/include" quickstart.c' build/examples/readme_quickstart.c quickstart.c \
  | tee build/examples/readme_line.out
grep -qx 'Hello from the agent.' build/examples/readme_line.out
record "README quickstarts" 2

step "The demos on each wire, against mock-openai"
# The C and Go demos choose the wire from the environment as a user's run would (OPENAI_* and
# AGENTAO_WIRE, or ANTHROPIC_*); mock-openai serves their script on all three wires, and the
# request bodies it received must be the chosen wire's.
cargo build --release --quiet -p mock-openai
mkdir -p build/examples/wires
cat > build/examples/wires/script.json <<'JSON'
{"responses": [
 {"text": "Let me look at the notes first.",
  "tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"file_path": "notes.txt"}}]},
 {"tool_calls": [{"id": "call_2", "name": "write_file",
   "arguments": {"file_path": "summary.txt", "content": "The build uses make.\n"}}]},
 {"text": "I read notes.txt and wrote a one-line summary to summary.txt."}
]}
JSON
# demo_on_wire WIRE OUT COMMAND...: runs the demo against a fresh mock on WIRE, output to OUT.
demo_on_wire() {
  local wire=$1 out=$2 d=build/examples/wires mock_pid port=
  shift 2
  rm -f "$d/port" "$d/requests.jsonl"
  target/release/mock-openai --script "$d/script.json" --port-file "$d/port" \
    --requests-out "$d/requests.jsonl" --no-stdin >/dev/null &
  mock_pid=$!
  for _ in $(seq 200); do [ -s "$d/port" ] && break; sleep 0.05; done
  port=$(cat "$d/port")
  case "$wire" in
    anthropic) env -u OPENAI_API_KEY ANTHROPIC_API_KEY=sk-mock ANTHROPIC_BASE_URL="http://127.0.0.1:$port" \
                 ANTHROPIC_MODEL=mock-model "$@" ;;
    *) env -u ANTHROPIC_API_KEY OPENAI_API_KEY=sk-mock OPENAI_BASE_URL="http://127.0.0.1:$port/v1" \
         OPENAI_MODEL=mock-model AGENTAO_WIRE="$wire" "$@" ;;
  esac > "$out" 2>&1 || { cat "$out"; kill "$mock_pid"; return 1; }
  kill "$mock_pid"; wait "$mock_pid" 2>/dev/null || true
  # Each wire's tool shape is its own: Chat Completions nests `function`, Anthropic has
  # `input_schema`, Responses flat functions with `strict`.
  case "$wire" in
    openai) grep -q '"function":{' "$d/requests.jsonl" ;;
    anthropic) grep -q '"input_schema":' "$d/requests.jsonl" ;;
    openai-responses) grep -q '"strict":false' "$d/requests.jsonl" ;;
  esac || { echo "$out: the mock did not receive $wire requests"; return 1; }
  [ "$(wc -l < "$d/requests.jsonl")" -eq 3 ] || { echo "$out: expected 3 requests"; return 1; }
}
for wire in openai anthropic openai-responses; do
  demo_on_wire "$wire" "build/examples/wires/c-$wire.out" build/examples/quickstart
  grep -q '"is_answer":true' "build/examples/wires/c-$wire.out"
  workspace_removed "build/examples/wires/c-$wire.out"
done
record "C demo on each wire" 3
if ! command -v go >/dev/null || ! go version | grep -qE 'go1\.(2[3-9]|[3-9][0-9])'; then
  skipped "Go demo on each wire: Go 1.23 or newer is not installed"
else
  mkdir -p build/go-pkgconfig
  cat > build/go-pkgconfig/agentao.pc <<PC
Name: agentao
Description: libagentao (development copy in the repository)
Version: $(awk -F'"' '/^version/ {print $2; exit}' Cargo.toml)
Cflags: -I$ROOT/include
Libs: -L$ROOT/target/release -Wl,-rpath,$ROOT/target/release -lagentao
PC
  (cd examples/go && PKG_CONFIG_PATH="$ROOT/build/go-pkgconfig" GOCACHE="$ROOT/build/go-cache" \
     GOFLAGS=-modcacherw GOTOOLCHAIN=local go build -o "$ROOT/build/examples/go-demo" .)
  for wire in openai anthropic openai-responses; do
    demo_on_wire "$wire" "build/examples/wires/go-$wire.out" build/examples/go-demo
    grep -q 'status=ok is_answer=true tools=2' "build/examples/wires/go-$wire.out"
    grep -q 'summary.txt: The build uses make.' "build/examples/wires/go-$wire.out"
  done
  record "Go demo on each wire" 3
fi
