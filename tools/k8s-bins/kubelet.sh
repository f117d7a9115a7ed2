#!/usr/bin/env bash
# Builds the node binaries of one Kubernetes release (default: the newest, the management
# plane's): the kubelet and kube-proxy, from the same tools module as that release's other
# binaries, into the same cache directory, and skips them when they are already built from the
# same module files. kube-proxy costs about 20 s more: nearly all its packages are the kubelet's.
#
# A separate script with its own stamp (.kubelet-stamp) on purpose: build.sh stamps each release
# with a hash that covers build.sh itself, so adding the kubelet there would invalidate every
# cached release and rebuild all of them. This script never touches build.sh's stamps.
#
# The build runs in a private copy of the module: `go build` may add go.sum lines for packages
# only the kubelet imports, and a changed go.sum in tools/k8s-bins/v<version> would change
# build.sh's stamp too.
#
# Usage: kubelet.sh [version]        (make kubelet; a prerequisite of make mgmt-test)
# Cache:  ${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}/releases/v<version>/{kubelet,kube-proxy}
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}
export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { printf '[kubelet] %s\n' "$*" >&2; }

version=${1:-}
if [ -z "$version" ]; then
  version=$(for d in "$here"/v*/; do d=${d%/}; echo "${d##*/v}"; done | sort -rV | sed -n 1p)
fi
mod="$here/v$version"
[ -f "$mod/go.mod" ] || { log "no tools module for release $version (run tools/k8s-bins/gen-module.sh $version)"; exit 2; }
out="$cache/releases/v$version"
stamp=$(cat "$mod/go.mod" "$mod/go.sum" "$here/kubelet.sh" | sha256sum | cut -c1-16)
if [ -x "$out/kubelet" ] && [ -x "$out/kube-proxy" ] && [ "$(cat "$out/.kubelet-stamp" 2>/dev/null)" = "$stamp" ]; then exit 0; fi

major=${version%%.*} rest=${version#*.}; minor=${rest%%.*}
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $pkg.gitVersion=v$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ld="$ld -X $pkg.gitTreeState=clean -X $pkg.gitCommit=0000000000000000000000000000000000000000"
  ld="$ld -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
log "building kubelet and kube-proxy v$version into $out (about 8 minutes cold)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$mod/go.mod" "$mod/go.sum" "$work/"
mkdir -p "$out/.node-tmp"
start=$SECONDS
(cd "$work" && go build -trimpath -ldflags "$ld" -o "$out/.node-tmp/" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
mv "$out/.node-tmp/kubelet" "$out/.node-tmp/kube-proxy" "$out/" && rmdir "$out/.node-tmp"
echo "$stamp" > "$out/.kubelet-stamp"
log "kubelet and kube-proxy v$version built in $((SECONDS-start))s"
