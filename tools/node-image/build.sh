#!/usr/bin/env bash
# Builds hostplane-node, the image of a real Kubernetes node run as a Docker container (as kind
# and Cluster API's Docker provider do): a Debian bookworm root from Debian's packages alone
# (mmdebstrap --variant=minbase: systemd as init, containerd, runc, the CNI plugins, Ignition),
# imported with `docker import`, so no registry is needed. It boots like an Ignition-based OS:
# on its first boot hostplane-ignition.service applies /etc/hostplane/userdata.ign (mounted by
# whoever starts the container) with Debian's Ignition, once (hostplane-firstboot beside this
# script says how).
#
# The image is tagged hostplane-node:<hash> and hostplane-node:latest and labelled
# dev.hostplane.content=<hash>, <hash> covering this script, the first-boot files and the package
# list; an image with that label ends the script at once. The root's tarball is cached, so a
# machine whose Docker images were wiped imports it again without mmdebstrap. Root only
# (mmdebstrap's root mode); installs mmdebstrap when missing. About 1.5 minutes cold, a second
# warm.
#
# A container of it needs (Docker refuses --privileged here):
#   docker run -d --cap-add=ALL --cap-drop=SYS_RESOURCE --security-opt seccomp=unconfined
#     --security-opt apparmor=unconfined --security-opt systempaths=unconfined --device /dev/kmsg
#     -v /sys/fs/cgroup:/sys/fs/cgroup:rw --tmpfs /run --tmpfs /tmp -e container=docker
#     -v <volume>:/var/lib/containerd [-v config.ign:/etc/hostplane/userdata.ign:ro] hostplane-node
# with /var/lib/containerd on a volume: containerd's overlayfs snapshotter fails on the
# container's own (fuse-overlayfs) root.
#
# Usage: tools/node-image/build.sh        (make node-image)
# Cache:  ${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}/node-image/<hash>.tar
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}/node-image
image=hostplane-node
suite=bookworm
packages=(systemd systemd-sysv dbus containerd runc ignition containernetworking-plugins iproute2
  iptables ca-certificates conntrack kmod util-linux mount socat procps)
# No logins on consoles: a container has none, and with `docker run -t` systemd's getty
# generator would start a login prompt on the tty. (Nothing else fails: minbase brings no udev.)
masked=(getty.target console-getty.service)

log() { printf '[node-image] %s\n' "$*" >&2; }

command -v docker >/dev/null || { log "needs the docker CLI and a running Docker engine"; exit 1; }
hash=$({
  cat "$here/build.sh" "$here/hostplane-firstboot" "$here/hostplane-ignition.service"
  printf '%s\n' "${packages[@]}"
} | sha256sum | cut -c1-16)
tag=$image:$hash

# tag_latest ID: both tags on the image, which may have lost them.
tag_latest() { docker tag "$1" "$tag" && docker tag "$1" "$image:latest"; }

existing=$(docker images -q --filter "label=dev.hostplane.content=$hash" | sed -n 1p)
if [ -n "$existing" ]; then
  tag_latest "$existing"
  log "$tag is up to date (image $existing)"
  exit 0
fi

tarball=$cache/$hash.tar
# import: the cached root as $tag and latest. SIGRTMIN+3 is what makes systemd as PID 1 shut
# down (SIGTERM would only make it re-execute itself). The label goes on last: an image that
# carries it is complete.
import() {
  local changes=(--change 'CMD ["/sbin/init"]' --change 'ENV container=docker') out base
  if ! out=$(docker import "${changes[@]}" --change 'STOPSIGNAL SIGRTMIN+3' \
    --change "LABEL dev.hostplane.content=$hash" "$tarball" "$tag" 2>&1); then
    case $out in *"stopsignal is not a valid change command"*) ;; *) log "$out"; return 1 ;; esac
    # Docker 20.10 takes no STOPSIGNAL in import: a build of metadata only (no layer) adds it.
    base=$(docker import "${changes[@]}" "$tarball")
    out=$(printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\nLABEL dev.hostplane.content=%s\n' "$base" "$hash" |
      DOCKER_BUILDKIT=0 docker build -q -t "$tag" - 2>&1) || { log "$out"; return 1; }
  fi
  docker tag "$tag" "$image:latest"
  log "$tag imported ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%d MB", $1/1e6}'))"
}
if [ -f "$tarball" ]; then
  log "importing the cached root $tarball"
  import
  exit 0
fi

[ "$(id -u)" -eq 0 ] || { log "building the root needs root (mmdebstrap's root mode); run it as root"; exit 1; }
. "$here/../lib/debian.sh"
command -v mmdebstrap >/dev/null ||
  apt_install mmdebstrap "Install mmdebstrap (it builds the node image's Debian root) and run this again."

# host_uri SUITE: the URI this machine's apt fetches SUITE from (one-line or deb822 sources), so
# the image comes from the mirror the host already reaches.
host_uri() {
  local files=() f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && files+=("$f")
  done
  [ ${#files[@]} -gt 0 ] || return 0
  awk -v want="$1" '
    function flush(  n, s, u) {
      if (types ~ /(^| )deb( |$)/ && enabled != "no")
        for (n = split(suites, s, " "); n > 0; n--) if (s[n] == want) { split(uris, u, " "); print u[1]; found = 1; exit }
      types = uris = suites = enabled = ""
    }
    FNR == 1 { flush() }
    /^[ \t]*#/ { next }
    /^deb[ \t]/ { line = $0; gsub(/\[[^]]*\]/, "", line); split(line, f, " "); if (f[3] == want) { print f[2]; found = 1; exit }; next }
    /^[ \t]*$/ { flush(); next }
    { key = tolower($1); sub(/^[^:]*:[ \t]*/, "") }
    key == "types:" { types = $0 } key == "uris:" { uris = $0 } key == "suites:" { suites = $0 }
    key == "enabled:" { enabled = tolower($0) }
    END { if (!found) flush() }
  ' "${files[@]}"
}
main=$(host_uri "$suite"); main=${main:-http://deb.debian.org/debian}
updates=$(host_uri "$suite-updates"); updates=${updates:-$main}
security=$(host_uri "$suite-security"); security=${security:-http://deb.debian.org/debian-security}

mkdir -p "$cache"
work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
root=$work/root
log "building $tag from $main ($suite, minbase: ${packages[*]})"
start=$SECONDS
mmdebstrap --mode=root --variant=minbase --quiet \
  --include="$(IFS=,; echo "${packages[*]}")" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  "$suite" "$root" \
  "deb $main $suite main" "deb $updates $suite-updates main" "deb $security $suite-security main"

# What a stock Ignition-based OS needs to boot as a container, nothing more:
# - SELinux declared disabled, with a policy name: Debian's Ignition 2.14 relabels what its files
#   stage wrote with the policy SELINUXTYPE names, and fails without one (hostplane-firstboot
#   gives it a setfiles that does nothing).
mkdir -p "$root/etc/selinux"
printf 'SELINUX=disabled\nSELINUXTYPE=default\n' > "$root/etc/selinux/config"
# - an empty machine-id: systemd makes a new one in each container on its first boot.
: > "$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
# - the first boot, and no login prompts.
install -m 0755 "$here/hostplane-firstboot" "$root/usr/local/sbin/hostplane-firstboot"
install -m 0644 "$here/hostplane-ignition.service" "$root/etc/systemd/system/hostplane-ignition.service"
chroot "$root" systemctl -q enable hostplane-ignition.service
chroot "$root" systemctl -q mask "${masked[@]}"

tar --numeric-owner --xattrs --xattrs-include='security.capability' -C "$root" -cf "$work/root.tar" .
mv "$work/root.tar" "$tarball"
find "$cache" -maxdepth 1 -name '*.tar' ! -name "$hash.tar" -delete
import
log "$tag built in $((SECONDS - start)) s"
