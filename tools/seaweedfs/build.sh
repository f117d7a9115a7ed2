#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (an S3-compatible object store) from the Go module proxy, pinned
# below, into a cache outside the source tree, and skips it when already built. The tests of
# componentd's S3 backup store run it as the real S3 server they store etcd snapshots in.
# SeaweedFS's go.mod has replace directives, so `go install pkg@version` refuses it: the
# module's source is downloaded and built in place.
#
# Usage: tools/seaweedfs/build.sh      (make s3-tools; a prerequisite of make test)
# Cache:  ${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}/seaweedfs/<version>/weed
set -euo pipefail
v=v0.0.0-20261109003541-7506e5f91cd6
mod=github.com/seaweedfs/seaweedfs
cache=${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}
out="$cache/seaweedfs/$v"
export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { printf '[seaweedfs] %s\n' "$*" >&2; }

stamp=$(sha256sum "$0" | cut -c1-16)
if [ -x "$out/weed" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then exit 0; fi
log "building SeaweedFS $v into $out (several minutes cold on 2 cores)"
start=$SECONDS
src=$(go mod download -json "$mod@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { log "go mod download $mod@$v gave no source directory"; exit 1; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
mkdir -p "$out"
(cd "$work" && go build -trimpath -ldflags "-s -w" -o "$out/weed.tmp" ./weed)
mv "$out/weed.tmp" "$out/weed"
echo "$stamp" > "$out/.stamp"
log "SeaweedFS built in $((SECONDS-start))s"
