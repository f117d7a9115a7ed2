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

if ! command -v apt-get >/dev/null; then
  log "chromium is missing and this machine has no apt-get."
  log "Install Chromium (or Google Chrome) so that a 'chromium' executable is on PATH, or set"
  log "HOSTPLANE_CHROMIUM to its path, and run this again."
  exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { log "installing needs root: run as root or install sudo"; exit 1; }
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache policy chromium 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  log "apt-get update (the package index does not list chromium yet)"
  "${sudo[@]}" apt-get update -q
fi
log "apt-get install -y --no-install-recommends chromium"
"${sudo[@]}" apt-get install -y -q --no-install-recommends chromium
log "installed: $(command -v chromium) ($(chromium --version 2>/dev/null | head -n1))"
