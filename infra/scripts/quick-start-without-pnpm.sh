#!/usr/bin/env bash
# Runs the README's quick-start line exactly as written, on a PATH where no pnpm exists: the line a
# newcomer with only Node, Postgres and NATS types first must work there.
# The line is read from the README (the quick-start block's line with "pnpm" and "demo"), so the
# README and this check cannot drift apart.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

line=$(awk '/^## Quick start/{q=1} q && /^```sh/{b=1; next} b && /^```/{exit} b && /demo/ {print; exit}' README.md |
  sed 's/[[:space:]]*#.*$//')
if [ -z "$line" ]; then
  echo "quick-start: no demo line found in the README's Quick start block" >&2
  exit 1
fi

# A bin directory with everything on this PATH except pnpm (and pnpx): Node, npm, npx and the
# ordinary tools stay, as on a machine that never installed pnpm.
nopnpm=$(mktemp -d)
trap 'rm -rf "$nopnpm"' EXIT
IFS=: read -r -a dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
  [ -d "$dir" ] || continue
  for tool in "$dir"/*; do
    name=$(basename "$tool")
    case $name in pnpm | pnpx | pnpm.* | pnpx.*) continue ;; esac
    [ -e "$nopnpm/$name" ] || ln -s "$tool" "$nopnpm/$name" 2>/dev/null || true
  done
done

# A database of its own, dropped afterwards: the demo's default database keeps every earlier demo's
# runs and records (a re-run finds them already here), and this check must not depend on them.
database="drover_quickstart_$$"
base="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/drover}"
export DATABASE_URL="${base%/*}/$database"
trap 'rm -rf "$nopnpm"; psql "${base%/*}/postgres" -qc "drop database if exists $database with (force)" >/dev/null 2>&1 || true' EXIT

echo "quick-start: running, with no pnpm on PATH, in database $database: $line"
PATH="$nopnpm" bash -c 'if command -v pnpm >/dev/null; then echo "pnpm is still on PATH" >&2; exit 1; fi'
PATH="$nopnpm" bash -c "$line" </dev/null
