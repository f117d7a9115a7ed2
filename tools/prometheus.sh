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

. "$(dirname "$0")/lib/debian.sh"
apt_install prometheus "Install Prometheus 2.42 or newer (both the prometheus and promtool binaries) on PATH, e.g. from https://prometheus.io/download/, and run this again."
log "installed: $(command -v promtool), $(command -v prometheus) ($(prometheus --version 2>&1 | head -n1))"
