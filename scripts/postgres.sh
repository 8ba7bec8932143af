#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests, from Debian's packages, in build/pg/:
#
#   scripts/postgres.sh start    initdb (once) and start on a free loopback port; prints the URL
#   scripts/postgres.sh stop     stops it (fast shutdown); the data stays for the next start
#   scripts/postgres.sh url      the URL of the running server (exit 1 when none runs)
#   scripts/postgres.sh kill     SIGKILLs the postmaster (the "database disappears" test)
#   scripts/postgres.sh wipe     stops it and removes build/pg/
#
# Exit status 3 with a line starting "unavailable:" means PostgreSQL cannot run on this machine
# (no server binaries and no way to install them); callers turn that into a skipped step.
# The server trusts every loopback connection (user `agentao`, database `agentao`): a test
# fixture, never a deployment. PostgreSQL refuses to run as root; as root the cluster belongs
# to the `postgres` system user (created by Debian's package) and runs as that user.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${AGENTAO_PG_DIR:-$PWD/build/pg}
data=$dir/data

find_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  done
  command -v pg_ctl >/dev/null && { dirname "$(command -v pg_ctl)"; return 0; }
  return 1
}

ensure_bin() {
  bin=$(find_bin) && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing: postgresql" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } >&2 || true
    bin=$(find_bin) && return 0
  fi
  echo "unavailable: no PostgreSQL server binaries (Debian: apt-get install postgresql)"
  exit 3
}

# as_owner CMD...: runs CMD as the cluster's owner (postgres when we are root).
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

running() { [ -f "$dir/port" ] && as_owner "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; }

url() { echo "postgres://agentao@127.0.0.1:$(cat "$dir/port")/agentao"; }

start() {
  ensure_bin
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "unavailable: running as root and there is no postgres user to run the server as"
    exit 3
  fi
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  if running; then url; return 0; fi
  if [ ! -f "$data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$data" -U agentao --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; echo "initdb failed" >&2; exit 1; }
  fi
  # The same port across a stop and a start, so a client that lost the server finds it again.
  local port
  port=$(cat "$dir/port" 2>/dev/null || true)
  if [ -z "$port" ] || ss -Hltn "sport = :$port" | grep -q .; then port=$(free_port); fi
  echo "$port" > "$dir/port"
  # Small and fast: a test cluster need not survive a power cut, only a killed client.
  as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$data -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100" \
    start >/dev/null 9>&- || { tail -20 "$dir/server.log" >&2; echo "postgres did not start" >&2; exit 1; }
  # The database the tests use; created once.
  "$bin/psql" -h 127.0.0.1 -p "$port" -U agentao -d postgres -qAt \
    -c "SELECT 1 FROM pg_database WHERE datname='agentao'" | grep -q 1 \
    || "$bin/psql" -h 127.0.0.1 -p "$port" -U agentao -d postgres -q -c "CREATE DATABASE agentao" >/dev/null
  url
}

stop() {
  bin=$(find_bin) || return 0
  [ -f "$data/PG_VERSION" ] || return 0
  as_owner "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
}

# As root the server runs as `postgres`, which must reach its data folder: a checkout below a
# folder closed to others (a 0700 home) gets a folder of its own under /var/tmp instead.
others_can_reach() {
  local p
  p=$(cd "$1" && pwd -P)
  while [ "$p" != / ]; do
    [ -n "$(find "$p" -maxdepth 0 -perm -o+x)" ] || return 1
    p=$(dirname "$p")
  done
}
mkdir -p "$(dirname "$dir")"
if [ "$(id -u)" = 0 ] && [ -z "${AGENTAO_PG_DIR:-}" ] && ! others_can_reach "$(dirname "$dir")"; then
  dir=/var/tmp/agentao-pg-$(printf %s "$PWD" | sha1sum | cut -c1-12)
  data=$dir/data
fi

# Tests start the same server from parallel threads and binaries: one of them at a time. The
# server must not inherit the lock's descriptor (`9>&-` above), or it would hold it for good.
exec 9>"$dir.lock"
flock 9

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) ensure_bin; running && url || { echo "no server runs in $dir" >&2; exit 1; } ;;
  kill)
    [ -f "$data/postmaster.pid" ] && kill -9 "$(head -1 "$data/postmaster.pid")" 2>/dev/null || true ;;
  wipe) stop; rm -rf "$dir" ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
