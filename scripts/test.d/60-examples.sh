step "examples"
cargo build --release --quiet
mkdir -p build/examples
CFLAGS=(-std=c11 -Wall -Wextra -Werror -O2 -Iinclude -Ltarget/release -Wl,-rpath,"$PWD/target/release")
cc "${CFLAGS[@]}" examples/quickstart.c -lagentao -o build/examples/quickstart
build/examples/quickstart | tee build/examples/quickstart.out
grep -q '"is_answer":true' build/examples/quickstart.out
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
