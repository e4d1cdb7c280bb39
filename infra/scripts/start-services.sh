#!/usr/bin/env bash
# Starts PostgreSQL and NATS (with JetStream) from locally installed binaries when they are not
# running, then waits until both answer. Idempotent: safe to run when everything is up.
# For Docker instead: docker compose -f infra/compose.yaml up -d
set -euo pipefail

PGHOST="${PGHOST:-127.0.0.1}"
PGPORT="${PGPORT:-5432}"
NATS_HOST="${NATS_HOST:-127.0.0.1}"
NATS_PORT="${NATS_PORT:-4222}"

pg_up() { pg_isready -q -h "$PGHOST" -p "$PGPORT" >/dev/null 2>&1; }
nats_up() { (exec 3<>"/dev/tcp/$NATS_HOST/$NATS_PORT") >/dev/null 2>&1; }

wait_for() { # name check-fn seconds
  local name=$1 check=$2 deadline=$((SECONDS + $3))
  until "$check"; do
    if ((SECONDS >= deadline)); then
      echo "$name: did not come up within $3 s" >&2
      return 1
    fi
    sleep 0.5
  done
}

if pg_up; then
  echo "postgres: ready (already running on $PGHOST:$PGPORT)"
else
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  elif command -v pg_ctl >/dev/null 2>&1 && [ -n "${PGDATA:-}" ]; then
    pg_ctl -D "$PGDATA" -l "${PGDATA}/server.log" start || true
  else
    echo "postgres: not running on $PGHOST:$PGPORT and no local cluster to start." >&2
    echo "  Start it with: docker compose -f infra/compose.yaml up -d   (or set PGDATA for pg_ctl)" >&2
    exit 1
  fi
  wait_for postgres pg_up 60
  echo "postgres: started"
fi

if nats_up; then
  echo "nats: ready (already running on $NATS_HOST:$NATS_PORT)"
else
  if [ -x /usr/sbin/nats-server ]; then
    mkdir -p /var/lib/nats-server
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
      -a "$NATS_HOST" -p "$NATS_PORT" -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  elif command -v nats-server >/dev/null 2>&1; then
    store="${TMPDIR:-/tmp}/drover-nats"
    mkdir -p "$store"
    nohup nats-server -a "$NATS_HOST" -p "$NATS_PORT" -js -sd "$store" >"$store/server.log" 2>&1 &
  else
    echo "nats: not running on $NATS_HOST:$NATS_PORT and no nats-server binary found." >&2
    echo "  Start it with: docker compose -f infra/compose.yaml up -d" >&2
    exit 1
  fi
  wait_for nats nats_up 60
  echo "nats: started"
fi
