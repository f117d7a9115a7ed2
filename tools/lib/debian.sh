# Sourced by the tools scripts that install a test dependency from Debian's packages
# (tools/prometheus.sh, tools/chromium.sh). The caller defines log().
#
# apt_install PACKAGE HINT: installs PACKAGE with apt-get (no recommends), running apt-get update
# first when the index does not list it yet, through sudo when not root. Without apt-get it
# prints HINT (how to install it by hand) and fails.
apt_install() {
  local pkg=$1 hint=$2
  if ! command -v apt-get >/dev/null; then
    log "$pkg is missing and this machine has no apt-get."
    log "$hint"
    return 1
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { log "installing needs root: run as root or install sudo"; return 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    log "apt-get update (the package index does not list $pkg yet)"
    "${sudo[@]}" apt-get update -q
  fi
  log "apt-get install -y --no-install-recommends $pkg"
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "$pkg"
}
