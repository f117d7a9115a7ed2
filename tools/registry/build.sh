#!/usr/bin/env bash
# Builds the CNCF Distribution registry (github.com/distribution/distribution/v3's
# cmd/registry, pinned below) from the Go module proxy into a cache outside the source tree,
# and skips it when already built. hostplane dev runs it as the OCI registry guest nodes pull
# their images from (pkg/registry). Its module is built alone (GOWORK=off): its dependencies
# (cloud storage drivers, OpenTelemetry) stay out of the workspace's version selection.
#
# Usage: tools/registry/build.sh      (make registry; a prerequisite of make test)
# Cache:  ${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}/registry/<version>/registry
set -euo pipefail
v=v3.1.2
mod=github.com/distribution/distribution/v3
cache=${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}
out="$cache/registry/$v"
export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { printf '[registry] %s\n' "$*" >&2; }

stamp=$(sha256sum "$0" | cut -c1-16)
if [ -x "$out/registry" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then exit 0; fi
log "building the Distribution registry $v into $out (about 2 minutes cold on 2 cores)"
start=$SECONDS
src=$(go mod download -json "$mod@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { log "go mod download $mod@$v gave no source directory"; exit 1; }
mkdir -p "$out"
(cd "$src" && go build -trimpath -ldflags "-s -w" -o "$out/registry.tmp" ./cmd/registry)
mv "$out/registry.tmp" "$out/registry"
echo "$stamp" > "$out/.stamp"
log "registry built in $((SECONDS-start))s"
