#!/usr/bin/env bash
# Builds CoreDNS (tools/coredns: the version go.mod pins, with the plugins guest clusters'
# Corefile uses) into a cache outside the source tree, and skips it when already built from the
# same files. hostplane dev pushes it to its registry as hostplane/coredns, the DNS server of
# guest clusters on real nodes (pkg/addons).
#
# Usage: tools/coredns/build.sh      (make coredns; a prerequisite of make run and make test)
# Cache:  ${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}/coredns/<version>/coredns
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}
export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { printf '[coredns] %s\n' "$*" >&2; }

v=$(sed -n 's/^require github.com\/coredns\/coredns \(v[^ ]*\)$/\1/p' "$here/go.mod")
[ -n "$v" ] || { log "no github.com/coredns/coredns version in $here/go.mod"; exit 2; }
out="$cache/coredns/$v"
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/build.sh" | sha256sum | cut -c1-16)
if [ -x "$out/coredns" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then exit 0; fi
log "building CoreDNS $v into $out (about 2 minutes cold on 2 cores)"
start=$SECONDS
mkdir -p "$out"
(cd "$here" && go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=hostplane" -o "$out/coredns.tmp" .)
mv "$out/coredns.tmp" "$out/coredns"
echo "$stamp" > "$out/.stamp"
log "CoreDNS $v built in $((SECONDS-start))s"
