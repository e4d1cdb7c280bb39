#!/usr/bin/env bash
# Starts PostgreSQL and NATS (with JetStream) from locally installed binaries when they are not
# answering, then waits (up to WAIT_SECONDS, default 60, each) until both do. Prints one line per
# service: "<name>: ready (already running)" or "<name>: started". Idempotent: when everything is
# up it starts nothing and exits 0. Exits non-zero, saying why, when a service cannot be started.
#
# For Docker instead: docker compose -f infra/compose.yaml up -d
#
# Environment: PGHOST (127.0.0.1), PGPORT (5432), NATS_HOST (127.0.0.1), NATS_PORT (4222),
# WAIT_SECONDS (60).
set -euo pipefail

PGHOST="${PGHOST:-127.0.0.1}"
PGPORT="${PGPORT:-5432}"
NATS_HOST="${NATS_HOST:-127.0.0.1}"
NATS_PORT="${NATS_PORT:-4222}"
WAIT_SECONDS="${WAIT_SECONDS:-60}"

tcp_open() { # host port
  if command -v timeout >/dev/null 2>&1; then
    # shellcheck disable=SC2016 # $1/$2 expand in the inner bash
    timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" >/dev/null 2>&1
  else
    (exec 3<>"/dev/tcp/$1/$2") >/dev/null 2>&1
  fi
}

pg_up() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$PGHOST" -p "$PGPORT" >/dev/null 2>&1
  else
    # No client tools (e.g. a laptop running only the compose file): a TCP connect will do.
    tcp_open "$PGHOST" "$PGPORT"
  fi
}

nats_up() { tcp_open "$NATS_HOST" "$NATS_PORT"; }

# wait_for NAME CHECK [PID] : polls CHECK until it succeeds or WAIT_SECONDS pass. With PID, gives up
# early when that process has exited.
wait_for() {
  local name=$1 check=$2 pid=${3:-} deadline=$((SECONDS + WAIT_SECONDS))
  until "$check"; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "$name: the server process ($pid) exited before it answered" >&2
      return 1
    fi
    if ((SECONDS >= deadline)); then
      echo "$name: not answering after ${WAIT_SECONDS} s" >&2
      return 1
    fi
    sleep 0.5
  done
}

show_log() { # file
  if [ -r "$1" ]; then
    echo "  last lines of $1:" >&2
    tail -n 10 "$1" | cut -c1-300 | sed "s/^/    /" >&2
  fi
}

# ---------------------------------------------------------------- PostgreSQL
if pg_up; then
  echo "postgres: ready (already running)"
else
  pg_log=""
  version=""
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    # Debian's layout: /etc/postgresql/<version>/main. Take the newest version that has a main cluster.
    version=$(for d in /etc/postgresql/*/main; do if [ -d "$d" ]; then basename "$(dirname "$d")"; fi; done |
      sort -V | tail -n 1)
  fi
  if [ -n "$version" ]; then
    echo "postgres: not answering on $PGHOST:$PGPORT; starting cluster $version/main"
    pg_log="/var/log/postgresql/postgresql-$version-main.log"
    # Non-zero also when the cluster is already running (but, say, still recovering): wait either way.
    pg_ctlcluster --skip-systemctl-redirect "$version" main start ||
      echo "postgres: pg_ctlcluster exited $? (waiting for it anyway)" >&2
  elif command -v pg_ctl >/dev/null 2>&1 && [ -n "${PGDATA:-}" ]; then
    echo "postgres: not answering on $PGHOST:$PGPORT; starting pg_ctl -D $PGDATA"
    pg_log="$PGDATA/server.log"
    pg_ctl -D "$PGDATA" -l "$pg_log" start ||
      echo "postgres: pg_ctl exited $? (waiting for it anyway)" >&2
  else
    echo "postgres: not answering on $PGHOST:$PGPORT, and there is no local cluster to start." >&2
    echo "  Start it with Docker:  docker compose -f infra/compose.yaml up -d" >&2
    echo "  or start your own PostgreSQL (or set PGDATA to a cluster for pg_ctl) and run this again." >&2
    exit 1
  fi
  if ! wait_for postgres pg_up; then
    show_log "$pg_log"
    exit 1
  fi
  echo "postgres: started"
fi

# ---------------------------------------------------------------- NATS with JetStream
if nats_up; then
  echo "nats: ready (already running)"
else
  nats_pid=""
  nats_log=""
  if [ -x /usr/sbin/nats-server ] && [ "$(id -u)" = 0 ] &&
    [ "$NATS_HOST" = 127.0.0.1 ] && [ "$NATS_PORT" = 4222 ]; then
    # Debian's package, as root, on the default address: the same command as the CI machine's.
    # (start-stop-daemon --oknodo matches any running /usr/sbin/nats-server, so it is used only for
    # the default port; other ports take the branch below.)
    echo "nats: not answering on $NATS_HOST:$NATS_PORT; starting /usr/sbin/nats-server"
    nats_log=/var/log/nats-server.log
    mkdir -p /var/lib/nats-server
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
      -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l "$nats_log"
  else
    bin=""
    if command -v nats-server >/dev/null 2>&1; then
      bin=$(command -v nats-server)
    elif [ -x /usr/sbin/nats-server ]; then
      bin=/usr/sbin/nats-server
    else
      echo "nats: not answering on $NATS_HOST:$NATS_PORT, and no nats-server binary was found." >&2
      echo "  Start it with Docker:  docker compose -f infra/compose.yaml up -d" >&2
      echo "  or install nats-server (2.9 or later) and run this again." >&2
      exit 1
    fi
    store="${TMPDIR:-/tmp}/drover-nats-$NATS_PORT"
    mkdir -p "$store"
    nats_log="$store/server.log"
    echo "nats: not answering on $NATS_HOST:$NATS_PORT; starting $bin (data in $store)"
    # Its own session, output to a file: it outlives this script and holds none of its pipes.
    launcher=(nohup)
    if command -v setsid >/dev/null 2>&1; then launcher=(setsid nohup); fi
    "${launcher[@]}" "$bin" -a "$NATS_HOST" -p "$NATS_PORT" -js -sd "$store" >"$nats_log" 2>&1 </dev/null &
    nats_pid=$!
  fi
  if ! wait_for nats nats_up "$nats_pid"; then
    show_log "$nats_log"
    exit 1
  fi
  echo "nats: started"
fi
