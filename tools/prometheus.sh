#!/usr/bin/env bash
# Installs Prometheus and promtool, which the tests of deploy/prometheus (promtool check/test
# rules) and the node pool end-to-end test (a real Prometheus scraping `hostplane dev` and
# evaluating every dashboard panel) run. Debian's `prometheus` package (2.42 on bookworm)
# provides both. Does nothing when both are already on PATH; safe to run again.
#
# Usage: tools/prometheus.sh        (make prometheus-tools; a prerequisite of make test)
#
# On a machine with systemd the package also enables a `prometheus` service on :9090; the tests
# do not use it (they start their own Prometheus on a free loopback port).
set -euo pipefail

log() { printf '[prometheus-tools] %s\n' "$*" >&2; }

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
  log "promtool and prometheus found: $(command -v promtool), $(command -v prometheus) ($(prometheus --version 2>&1 | head -n1))"
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  log "promtool or prometheus is missing and this machine has no apt-get."
  log "Install Prometheus 2.42 or newer (both the prometheus and promtool binaries) on PATH,"
  log "e.g. from https://prometheus.io/download/, and run this again."
  exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { log "installing needs root: run as root or install sudo"; exit 1; }
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache policy prometheus 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  log "apt-get update (the package index does not list prometheus yet)"
  "${sudo[@]}" apt-get update -q
fi
log "apt-get install -y --no-install-recommends prometheus"
"${sudo[@]}" apt-get install -y -q --no-install-recommends prometheus
log "installed: $(command -v promtool), $(command -v prometheus) ($(prometheus --version 2>&1 | head -n1))"
