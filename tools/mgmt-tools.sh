#!/usr/bin/env bash
# Installs what the real management cluster (pkg/mgmtcluster, test/integration/mgmtcluster)
# runs beside the release binaries: containerd and runc, Debian's containernetworking-plugins
# (bridge, host-local, loopback under /usr/lib/cni), iproute2 and util-linux's nsenter. Does
# nothing for what is already there; safe to run again. The kubelet is built by
# tools/k8s-bins/kubelet.sh (make kubelet).
#
# Usage: tools/mgmt-tools.sh        (make mgmt-tools; a prerequisite of make mgmt-test)
set -euo pipefail

log() { printf '[mgmt-tools] %s\n' "$*" >&2; }

. "$(dirname "$0")/lib/debian.sh"
need() { # need CHECK PACKAGE
  if eval "$1" >/dev/null 2>&1; then return; fi
  apt_install "$2" "Install $2 (the management cluster's nodes need it) and run this again."
}
need 'command -v containerd && command -v ctr' containerd
need 'command -v runc' runc
need 'test -x /usr/lib/cni/bridge && test -x /usr/lib/cni/host-local && test -x /usr/lib/cni/loopback' containernetworking-plugins
need 'command -v ip' iproute2
need 'command -v nsenter' util-linux
need 'command -v iptables' iptables
log "containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | sed -n 's/^runc version //p'), CNI plugins in /usr/lib/cni"
