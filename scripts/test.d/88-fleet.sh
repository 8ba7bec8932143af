step "fleet: 4 stateless workers, 200 sessions, one PostgreSQL; one worker SIGKILLed mid-turn"
# The deployment of docs/scale-out.md in miniature: every worker embeds libagentao (C, through
# the header), sessions and audit rows live in one PostgreSQL, and any worker serves any
# session's next turn. The model is the library's scripted provider (in-process, a delay per
# call): a shared mock server would answer requests in arrival order, whichever session sent
# them, and the test needs each turn's tool call id to find its audit rows.
FLEET_SESSIONS=${FLEET_SESSIONS:-200} FLEET_TURNS=${FLEET_TURNS:-3} FLEET_WORKERS=4 FLEET_DELAY_MS=${FLEET_DELAY_MS:-15}
profile=${FLEET_PROFILE:-release}
set +e
base=$(scripts/postgres.sh start)
rc=$?
set -e
if [ $rc = 3 ]; then skipped "fleet: PostgreSQL cannot run here ($base)"; return 0; fi
[ $rc = 0 ] || { echo "$base"; exit 1; }
apt_need libpq-dev || { skipped "fleet: libpq-dev is missing"; return 0; }
if [ "$profile" = release ]; then cargo build --release --quiet -p agentao; else cargo build --quiet -p agentao; fi
out=build/fleet
rm -rf "$out" && mkdir -p "$out/work"
echo "ledger: 42" > "$out/work/fleet.txt"
lib=target/$profile
[ "$profile" = release ] || lib=target/debug
cc -std=c11 -Wall -Wextra -Werror -O2 -Iinclude -I"$(pg_config --includedir)" tests/fleet/fleet_worker.c \
  -L"$lib" -Wl,-rpath,"$PWD/$lib" -lagentao -lpq -o "$out/fleet_worker"

export PGOPTIONS="-c client_min_messages=warning"
admin=${base%/*}/postgres
url=${base%/*}/fleet
psql "$admin" -qAt -c "DROP DATABASE IF EXISTS fleet" -c "CREATE DATABASE fleet" >/dev/null
q() { psql "$url" -qAt -v ON_ERROR_STOP=1 "$@"; }
q <<SQL
CREATE TABLE fleet_work (session_id text PRIMARY KEY, turns_done int NOT NULL DEFAULT 0,
  turns_total int NOT NULL, claimed_by text, claimed_at timestamptz);
CREATE TABLE fleet_commits (session_id text NOT NULL, version bigint NOT NULL, worker text NOT NULL,
  turn_us bigint NOT NULL, commit_us bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
INSERT INTO fleet_work (session_id, turns_total)
  SELECT 'fleet-' || lpad(i::text, 3, '0'), $FLEET_TURNS FROM generate_series(1, $FLEET_SESSIONS) i;
SQL

total=$((FLEET_SESSIONS * FLEET_TURNS))
pids=()
# Started by this step, stopped by it, whatever happens (workers first).
trap 'kill -KILL "${pids[@]}" 2>/dev/null || true; scripts/postgres.sh stop || true' EXIT
t0=$(date +%s.%N)
for w in $(seq 1 $FLEET_WORKERS); do
  "$out/fleet_worker" "$w" "$url" "$PWD/$out/work" "$FLEET_DELAY_MS" > "$out/worker$w.out" 2> "$out/worker$w.err" &
  pids+=($!)
done
# Kill worker 1 once a quarter of the turns are in, while it holds a session (in a turn).
victim_session=""
for _ in $(seq 1 1200); do
  done_n=$(q -c "SELECT count(*) FROM fleet_commits")
  if [ "$done_n" -ge $((total / 4)) ]; then
    victim_session=$(q -c "SELECT session_id FROM fleet_work WHERE claimed_by = '1'")
    [ -n "$victim_session" ] && { kill -KILL "${pids[0]}"; break; }
  fi
  sleep 0.05
done
[ -n "$victim_session" ] || { echo "fleet: never caught worker 1 in a turn"; exit 1; }
wait "${pids[0]}" 2>/dev/null || true
killed_at=$(q -c "SELECT clock_timestamp()")
echo "SIGKILLed worker 1 during a turn of $victim_session after $done_n committed turns"
for p in "${pids[@]:1}"; do
  timeout 170 tail --pid="$p" -f /dev/null || { echo "fleet: a worker did not finish"; kill "${pids[@]}" 2>/dev/null; exit 1; }
  wait "$p" || { echo "fleet: worker exited with $?"; cat "$out"/worker*.err; exit 1; }
done
t1=$(date +%s.%N)

# Every session holds every turn, each turn's message exactly once.
q -c "SELECT count(*) FROM agent_sessions WHERE session_id LIKE 'fleet-%' AND version = $FLEET_TURNS" | grep -qx "$FLEET_SESSIONS" \
  || { echo "fleet: not every session reached version $FLEET_TURNS"; exit 1; }
bad=$(q -c "SELECT count(*) FROM agent_sessions s, generate_series(1, s.version) k
  WHERE s.session_id LIKE 'fleet-%' AND (length(s.document) - length(replace(s.document,
    'fleet-turn-' || k || '-' || s.session_id || ';', ''))) / length('fleet-turn-' || k || '-' || s.session_id || ';') <> 1")
[ "$bad" = 0 ] || { echo "fleet: $bad committed turns are missing or doubled in their documents"; exit 1; }
# No version was committed twice (every commit the workers saw succeed, the victim's included).
dups=$(q -c "SELECT count(*) FROM (SELECT 1 FROM fleet_commits GROUP BY session_id, version HAVING count(*) > 1) d")
[ "$dups" = 0 ] || { echo "fleet: $dups versions were committed twice"; exit 1; }
# The victim's session was finished by the others.
q -c "SELECT count(*) FROM fleet_commits WHERE session_id = '$victim_session' AND worker <> '1' AND at > '$killed_at'" | grep -qv '^0$' \
  || { echo "fleet: $victim_session was not resumed by another worker"; exit 1; }
# Every committed turn's tool call has its started and completed audit rows.
missing=$(q -c "SELECT count(*) FROM agent_sessions s, generate_series(1, s.version) k
  WHERE s.session_id LIKE 'fleet-%' AND (SELECT count(DISTINCT a.payload->>'phase') FROM agent_audit a
    WHERE a.tenant_id = 'fleet' AND a.session_id = s.session_id AND a.event_type = 'tool_lifecycle'
      AND a.payload->>'tool_call_id' = 'call_' || k) < 2")
[ "$missing" = 0 ] || { echo "fleet: $missing committed turns lack audit rows"; exit 1; }

turns=$(q -c "SELECT count(*) FROM fleet_commits")
rows=$(q -c "SELECT count(*) FROM agent_audit WHERE tenant_id = 'fleet'")
pct() { q -c "SELECT round((percentile_cont($1) WITHIN GROUP (ORDER BY $2) / 1000.0)::numeric, 1) FROM fleet_commits"; }
# Every turn saw its session_committed event (a negative time: it did not).
q -c "SELECT count(*) FROM fleet_commits WHERE commit_us < 0" | grep -qx 0 || { echo "fleet: a turn had no session_committed event"; exit 1; }
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
printf 'fleet: %s turns (%s sessions x %s) in %.1f s: %.1f turns/s; commit latency p50 %s ms, p99 %s ms; turn latency (resume + 2 model calls of %s ms + tool + commit) p50 %s ms, p99 %s ms; %s audit rows, %s session rows\n' \
  "$turns" "$FLEET_SESSIONS" "$FLEET_TURNS" "$secs" "$(awk -v n="$turns" -v s="$secs" 'BEGIN { print n / s }')" "$(pct 0.5 commit_us)" "$(pct 0.99 commit_us)" \
  "$FLEET_DELAY_MS" "$(pct 0.5 turn_us)" "$(pct 0.99 turn_us)" "$rows" \
  "$(q -c "SELECT count(*) FROM agent_sessions WHERE session_id LIKE 'fleet-%'")"
grep -h "conflicts" "$out"/worker*.err || true
record "fleet (4 workers, SIGKILL)" 1
