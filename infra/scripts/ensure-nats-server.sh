#!/usr/bin/env bash
# The three-node NATS cluster tests (test/support/nats-cluster.ts) run their servers with
# `sync_interval: always`, which nats-server understands from 2.10 on; Debian bookworm ships 2.9.10,
# which refuses the field. This makes sure a nats-server >= 2.10 is at hand and prints its path as
# the last line of its output: the one on PATH when it is new enough, else Debian trixie's build
# (static, needs only libc) extracted into .artifacts/nats-server-2.10/ from the .deb below, whose
# sha256 is pinned here. Idempotent: a second call finds the extracted binary and downloads nothing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="$ROOT/.artifacts/nats-server-2.10"
BIN="$DEST/usr/sbin/nats-server"
DEB_URL="http://deb.debian.org/debian/pool/main/n/nats-server/nats-server_2.10.27-1+b2_amd64.deb"
DEB_SHA256="6d913ac987b78734c08537c2adeb1526cf735f216173a9170d94b185fcfe6f8a"

# "nats-server: v2.10.27" -> true when major.minor >= 2.10.
new_enough() {
  local v
  v="$("$1" --version 2>/dev/null | sed -n 's/.*v\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -1)"
  [ -n "$v" ] || return 1
  local major="${v%%.*}" minor="${v#*.}"
  [ "$major" -gt 2 ] || { [ "$major" -eq 2 ] && [ "$minor" -ge 10 ]; }
}

if [ -x "$BIN" ] && new_enough "$BIN"; then
  echo "$BIN"
  exit 0
fi
if on_path="$(command -v nats-server 2>/dev/null)" && new_enough "$on_path"; then
  echo "$on_path"
  exit 0
fi

[ "$(uname -m)" = "x86_64" ] || {
  echo "ensure-nats-server: no nats-server >= 2.10 on PATH and the pinned .deb is amd64 only; install nats-server 2.10+ (https://github.com/nats-io/nats-server/releases) or set NATS_SERVER_BIN" >&2
  exit 1
}
command -v dpkg-deb >/dev/null 2>&1 || {
  echo "ensure-nats-server: dpkg-deb is needed to extract $DEB_URL (apt-get install dpkg)" >&2
  exit 1
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "== nats-server >= 2.10 for the cluster tests: $DEB_URL" >&2
curl -fsSL --retry 3 -o "$tmp/nats-server.deb" "$DEB_URL" || {
  echo "ensure-nats-server: could not download $DEB_URL" >&2
  exit 1
}
got="$(sha256sum "$tmp/nats-server.deb" | cut -d' ' -f1)"
[ "$got" = "$DEB_SHA256" ] || {
  echo "ensure-nats-server: $DEB_URL has sha256 $got, expected $DEB_SHA256: refusing it" >&2
  exit 1
}
dpkg-deb -x "$tmp/nats-server.deb" "$tmp/x"
new_enough "$tmp/x/usr/sbin/nats-server" || {
  echo "ensure-nats-server: the extracted nats-server does not run or is older than 2.10" >&2
  exit 1
}
# Replaced whole, so a concurrent caller sees the old folder or the new one, never half of one.
mkdir -p "$ROOT/.artifacts"
rm -rf "$DEST.tmp.$$"
mv "$tmp/x" "$DEST.tmp.$$"
rm -rf "$DEST"
mv "$DEST.tmp.$$" "$DEST" 2>/dev/null || rm -rf "$DEST.tmp.$$"
echo "$BIN"
