#!/usr/bin/env bash
# Builds clusterctl (Cluster API's CLI) from the Go module proxy at the Cluster API version in
# go.mod here (the one nodepoold runs), version-stamped, into a cache outside the source tree,
# and skips it when already built from the same module files. The e2e test TestClusterctlDescribe
# runs `clusterctl describe cluster` with it against hostplane's management kube-apiserver.
#
# Usage: tools/clusterctl/build.sh      (make clusterctl; a prerequisite of make test)
# Cache:  ${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}/clusterctl/<version>/clusterctl
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}
export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { printf '[clusterctl] %s\n' "$*" >&2; }

v=$(sed -n 's/^[[:space:]]*sigs.k8s.io\/cluster-api \(v[^ ]*\)$/\1/p' "$here/go.mod" | head -n1)
[ -n "$v" ] || { log "no sigs.k8s.io/cluster-api requirement in $here/go.mod"; exit 2; }
out="$cache/clusterctl/$v"
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/build.sh" | sha256sum | cut -c1-16)
if [ -x "$out/clusterctl" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then exit 0; fi

major=${v#v}; major=${major%%.*}; minor=${v#v*.}; minor=${minor%%.*}
pkg=sigs.k8s.io/cluster-api/version
ld="-s -w -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
ld="$ld -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
log "building clusterctl $v into $out (about 4 minutes cold on 2 cores)"
mkdir -p "$out"
start=$SECONDS
(cd "$here" && go build -trimpath -ldflags "$ld" -o "$out/clusterctl.tmp" .)
mv "$out/clusterctl.tmp" "$out/clusterctl"
echo "$stamp" > "$out/.stamp"
log "clusterctl $v built in $((SECONDS-start))s"
