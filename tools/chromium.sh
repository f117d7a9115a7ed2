#!/usr/bin/env bash
# Installs Chromium, which the web console's end-to-end test (test/e2e, TestConsole_*) drives
# headless through chromedp. Debian's `chromium` package provides it. Does nothing when a
# chromium is already on PATH; safe to run again.
#
# Usage: tools/chromium.sh        (make chromium-tools; a prerequisite of make test)
set -euo pipefail

log() { printf '[chromium-tools] %s\n' "$*" >&2; }

if command -v chromium >/dev/null; then
  log "chromium found: $(command -v chromium) ($(chromium --version 2>/dev/null | head -n1))"
  exit 0
fi

. "$(dirname "$0")/lib/debian.sh"
apt_install chromium "Install Chromium (or Google Chrome) so that a 'chromium' executable is on PATH, or set HOSTPLANE_CHROMIUM to its path, and run this again."
log "installed: $(command -v chromium) ($(chromium --version 2>/dev/null | head -n1))"
