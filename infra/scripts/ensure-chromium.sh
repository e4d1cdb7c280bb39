#!/usr/bin/env bash
# The browser test (test/browser) drives Debian's Chromium at /usr/bin/chromium. On a fresh
# machine, install it without questions where we can (root with apt-get); otherwise say what to do.
# Only the browser and what it depends on: recommended packages (avahi, printer drivers, ~125 of
# them) are of no use to a headless test.
set -u
[ -x /usr/bin/chromium ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing Debian's chromium for the browser test (apt-get install -y --no-install-recommends chromium)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } </dev/null && exit 0
fi
echo "the browser test needs Debian's chromium at /usr/bin/chromium: run 'sudo apt-get install -y --no-install-recommends chromium'" >&2
exit 1
