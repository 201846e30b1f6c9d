#!/usr/bin/env bash
# A private PostgreSQL for troupe's tests: Debian's postgresql (installed if
# missing), a cluster of its own in a directory of its own, listening on
# 127.0.0.1 only (and a Unix socket in that directory), trust authentication for
# local connections only. Idempotent: a cluster already running is reused.
#
#   eval "$(.ci/postgres.sh)"     # start (or reuse) it and export TROUPE_PG_DSN
#   .ci/postgres.sh stop          # stop it (the directory stays for next time)
#   .ci/postgres.sh destroy       # stop it and remove its directory
#
# Knobs: TROUPE_PG_DIR (default /tmp/troupe-pg), TROUPE_PG_PORT (default 55432).
# The tests create a database or schema of their own and drop it afterwards.
# Only the export line goes to stdout; everything else goes to stderr.
set -euo pipefail

dir=${TROUPE_PG_DIR:-/tmp/troupe-pg}
port=${TROUPE_PG_PORT:-55432}
data=$dir/data
log=$dir/server.log

bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  [[ -n "$d" && -x "$d/initdb" ]] && echo "$d"
}

if [[ -z "$(bindir)" ]]; then
  echo "postgres.sh: installing Debian's postgresql" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  # Debian's package creates and starts a cluster of its own; this script uses
  # its own, so stop the package's (it would take port 5432 for nothing).
  if command -v pg_ctlcluster >/dev/null; then
    pg_lsclusters -h 2>/dev/null | while read -r ver name _; do
      pg_ctlcluster "$ver" "$name" stop >&2 || true
    done
  fi
fi
bin=$(bindir)
if [[ -z "$bin" ]]; then
  echo "postgres.sh: no PostgreSQL server binaries under /usr/lib/postgresql" >&2
  exit 1
fi

# PostgreSQL refuses to run as root: as root, run it as the postgres user.
as() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "${1:-start}" in
stop)
  if [[ -f "$data/postmaster.pid" ]]; then
    as "$bin/pg_ctl" -D "$data" -m fast -w stop >&2
  fi
  exit 0
  ;;
destroy)
  if [[ -f "$data/postmaster.pid" ]]; then
    as "$bin/pg_ctl" -D "$data" -m fast -w stop >&2 || true
  fi
  rm -rf "$dir"
  exit 0
  ;;
start) ;;
*)
  echo "usage: $0 [start|stop|destroy]" >&2
  exit 2
  ;;
esac

mkdir -p "$dir"
if [[ $(id -u) -eq 0 ]]; then
  chown postgres:postgres "$dir"
fi

if [[ ! -f "$data/PG_VERSION" ]]; then
  echo "postgres.sh: initdb $data" >&2
  as "$bin/initdb" -D "$data" -U troupe -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    exit 1
  }
  # Local connections only, trusted: the socket in $dir and 127.0.0.1.
  cat >"$data/pg_hba.conf" <<'EOF'
local all all trust
host  all all 127.0.0.1/32 trust
EOF
  cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
EOF
fi

if ! as "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  echo "postgres.sh: starting PostgreSQL on 127.0.0.1:$port" >&2
  as "$bin/pg_ctl" -D "$data" -l "$log" -w -t 60 start >&2 || {
    tail -n 30 "$log" >&2 || true
    exit 1
  }
fi

# Ready means it answers a query.
for _ in $(seq 1 60); do
  if as "$bin/psql" -h 127.0.0.1 -p "$port" -U troupe -d postgres -Atqc 'select 1' >/dev/null 2>&1; then
    echo "export TROUPE_PG_DSN='postgres://troupe@127.0.0.1:$port/postgres?sslmode=disable'"
    exit 0
  fi
  sleep 0.5
done
echo "postgres.sh: PostgreSQL on 127.0.0.1:$port does not answer" >&2
exit 1
