#!/usr/bin/env bash
# Builds one image per program FROM scratch around a static binary, with a CA bundle and a
# non-root user, so `make images` needs no registry. Usage: build.sh clusterd pkid ... hostplane
# Images are tagged hostplane/<name>:dev (override with HOSTPLANE_IMAGE_TAG).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tag=${HOSTPLANE_IMAGE_TAG:-dev}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
printf 'nonroot:x:65532:65532:nonroot:/data:/sbin/nologin\n' > "$ctx/passwd"
for name in "$@"; do
  pkg=./services/$name/cmd/$name
  [ "$name" = hostplane ] && pkg=./cmd/hostplane
  echo "[images] building $name"
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ctx/$name" "$pkg")
  cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY passwd /etc/passwd
COPY $name /usr/local/bin/$name
USER 65532:65532
WORKDIR /data
ENTRYPOINT ["/usr/local/bin/$name"]
DOCKERFILE
  docker build -q -t "hostplane/$name:$tag" "$ctx" >/dev/null
  echo "[images] hostplane/$name:$tag"
  rm -f "$ctx/$name"
done
