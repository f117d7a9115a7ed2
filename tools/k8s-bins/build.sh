#!/usr/bin/env bash
# Builds the release binaries hostplane runs (etcd and, per Kubernetes release, kube-apiserver,
# kube-controller-manager and kube-scheduler) from the Go module proxy into a cache outside the
# source tree, version-stamped, and skips whatever is already built from the same module files.
#
# Usage: build.sh [version ...]     (default: every release under tools/k8s-bins/v*)
#        build.sh --newest          etcd and the newest release only: what the default cluster
#                                   and the management plane need (make run builds the rest in
#                                   the background while it serves)
# Cache:  ${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}/releases/v<version>/
#         ${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}/etcd/<etcd version>/etcd
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools=$(dirname "$here")
cache=${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}
export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod

stamp_of() { cat "$@" "$here/build.sh" | sha256sum | cut -c1-16; }

log() { printf '[k8s-bins] %s\n' "$*" >&2; }

build_etcd() {
  local mod="$tools/etcd"
  local v; v=$(sed -n 's/^require go.etcd.io\/etcd\/server\/v3 \(v[^ ]*\)$/\1/p' "$mod/go.mod")
  local out="$cache/etcd/$v" stamp; stamp=$(stamp_of "$mod/go.mod" "$mod/go.sum" "$mod/main.go")
  if [ -x "$out/etcd" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then return; fi
  log "building etcd $v into $out (about 1 minute cold)"
  mkdir -p "$out"
  local start=$SECONDS
  (cd "$mod" && go build -trimpath \
     -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=hostplane" -o "$out/etcd.tmp" .)
  mv "$out/etcd.tmp" "$out/etcd"
  echo "$stamp" > "$out/.stamp"
  log "etcd $v built in $((SECONDS-start))s"
}

build_release() {
  local version=$1 mod="$here/v$1"
  [ -f "$mod/go.mod" ] || { log "no tools module for release $version (run tools/k8s-bins/gen-module.sh $version)"; exit 2; }
  local out="$cache/releases/v$version" stamp; stamp=$(stamp_of "$mod/go.mod" "$mod/go.sum")
  if [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/kube-scheduler" ] \
     && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then return; fi
  local major=${version%%.*} rest=${version#*.}; local minor=${rest%%.*}
  local ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $pkg.gitVersion=v$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ld="$ld -X $pkg.gitTreeState=clean -X $pkg.gitCommit=0000000000000000000000000000000000000000"
    ld="$ld -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  log "building Kubernetes v$version (kube-apiserver, kube-controller-manager, kube-scheduler) into $out; about 10 minutes cold"
  mkdir -p "$out/.tmp"
  # While the marker names a live builder, hostplane reports the release as Building
  # (pkg/release BuildState) and clusters that ask for it wait instead of failing.
  echo $$ > "$out/.building"
  trap 'rm -f "$out/.building"' EXIT
  local start=$SECONDS
  (cd "$mod" && go build -trimpath -ldflags "$ld" -o "$out/.tmp/" \
     k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
  mv "$out"/.tmp/* "$out/" && rmdir "$out/.tmp"
  echo "$stamp" > "$out/.stamp"
  rm -f "$out/.building"; trap - EXIT
  log "Kubernetes v$version built in $((SECONDS-start))s"
}

newest=false
if [ "${1:-}" = --newest ]; then newest=true; shift; fi
versions=("$@")
if [ ${#versions[@]} -eq 0 ]; then
  for d in "$here"/v*/; do d=${d%/}; versions+=("${d##*/v}"); done
  # newest first: it is what the default cluster and the management plane use
  IFS=$'\n' versions=($(printf '%s\n' "${versions[@]}" | sort -rV)); unset IFS
  if $newest; then versions=("${versions[0]}"); fi
fi
build_etcd
for v in "${versions[@]}"; do build_release "$v"; done
