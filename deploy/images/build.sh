#!/usr/bin/env bash
# Builds hostplane's images FROM scratch around static binaries, with a CA bundle, a non-root
# user (65532) and writable /data, /secrets (a volume shared by the daemons) and /tmp, so `make images` needs no registry.
#
#   build.sh [name...]     default: every image
#
# Images (tagged hostplane/<name>:$HOSTPLANE_IMAGE_TAG, default dev):
#   clusterd nodepoold componentd pkid infrad ignitiond   the six daemons; componentd also
#                          carries every release's etcd, kube-apiserver, kube-controller-manager
#                          and kube-scheduler (HOSTPLANE_CACHE_DIR=/opt/hostplane/cache), and
#                          hostplane-karpenter, the autoscaler, beside componentd
#   localcloud             the simulated cloud's machines
#   hostplane              the CLI
#   gateway                `hostplane gateway`: the API gateway in front of the daemons
#   management             `hostplane management`: etcd, kube-apiserver and kube-controller-manager
#                          (garbage collector, namespace controller) of the newest release
#   nats                   nats-server (the version hostplane's go.mod pins), JetStream enabled
#                          by the config the deployment passes
# Release binaries come from the cache `make k8s-bins` fills; run it first.
# Each image is labelled with a hash of everything it is built from (its binaries, release
# binaries and Dockerfile); an image whose label already matches is not built again, and the Go
# binaries are kept in ${HOSTPLANE_CACHE_DIR:-~/.cache/hostplane}/images/bin, where `go build`
# does not link them again while they are current. So a second `make images` takes seconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tag=${HOSTPLANE_IMAGE_TAG:-dev}
cache=${HOSTPLANE_CACHE_DIR:-$HOME/.cache/hostplane}
all=(clusterd nodepoold componentd pkid infrad ignitiond localcloud hostplane gateway management nats)
[ $# -gt 0 ] || set -- "${all[@]}"

bin=$cache/images/bin
mkdir -p "$bin"
trap 'rm -rf "${ctx:-}"' EXIT
declare -A built
export CGO_ENABLED=0
build() { # build <output> <module dir> <package>, once a run (go build skips the link when current)
  [ -n "${built[$1]:-}" ] && return
  (cd "$root/$2" && go build -trimpath -ldflags "-s -w" -o "$bin/$1" "$3") || { echo "build.sh: go build $3 failed" >&2; exit 1; }
  built[$1]=1
}

# newest release and its etcd, as pkg/release knows them
latest=$(ls "$cache/releases" 2>/dev/null | sort -V | tail -1)

for name in "$@"; do
  ctx=$(mktemp -d)
  mkdir -p "$ctx/data" "$ctx/tmp" "$ctx/opt"
  chmod 1777 "$ctx/tmp"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/data:/sbin/nologin\n' > "$ctx/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$ctx/group"
  entry="\"/usr/local/bin/$name\""
  env=""
  case $name in
    clusterd|nodepoold|componentd|pkid|infrad|ignitiond|localcloud)
      build "$name" . "./services/$name/cmd/$name"
      cp "$bin/$name" "$ctx/$name" ;;
    hostplane|gateway|management)
      build hostplane cmd/hostplane .
      cp "$bin/hostplane" "$ctx/$name"
      [ "$name" = hostplane ] || entry="\"/usr/local/bin/$name\", \"$name\"" ;;
    nats)
      # the nats-server release hostplane's pkg/go.mod requires, built from its own module
      v=$(cd "$root/pkg" && GOWORK=off go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
      mkdir -p "$bin/nats-$v"
      GOBIN="$bin/nats-$v" GOWORK=off GOFLAGS= go install -trimpath -ldflags "-s -w" "github.com/nats-io/nats-server/v2@$v" || exit 1
      cp "$bin/nats-$v/nats-server" "$ctx/nats" ;;
    *) echo "build.sh: unknown image $name (want: ${all[*]})" >&2; exit 2 ;;
  esac
  case $name in
    componentd|management)
      [ -n "$latest" ] || { echo "build.sh: no release binaries in $cache; run make k8s-bins" >&2; exit 1; }
      releases=$(ls "$cache/releases")
      [ "$name" = management ] && releases=$latest
      for r in $releases; do
        mkdir -p "$ctx/opt/cache/releases/$r"
        for b in kube-apiserver kube-controller-manager kube-scheduler; do
          [ "$name" = management ] && [ "$b" = kube-scheduler ] && continue
          cp "$cache/releases/$r/$b" "$ctx/opt/cache/releases/$r/$b"
        done
      done
      mkdir -p "$ctx/opt/cache/etcd"
      cp -r "$cache/etcd/." "$ctx/opt/cache/etcd/"
      find "$ctx/opt/cache" -name '.stamp' -o -name '.tmp' | xargs rm -rf
      env="ENV HOSTPLANE_CACHE_DIR=/opt/hostplane/cache" ;;
  esac
  extra=""
  if [ "$name" = componentd ]; then
    # the autoscaler componentd runs per cluster with an autoscaled pool, found beside it
    build hostplane-karpenter cmd/hostplane-karpenter .
    cp "$bin/hostplane-karpenter" "$ctx/hostplane-karpenter"
    extra="COPY hostplane-karpenter /usr/local/bin/hostplane-karpenter"
  fi
  cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY passwd group /etc/
COPY --chown=65532:65532 data /data
COPY --chown=65532:65532 data /secrets
COPY tmp /tmp
COPY opt/ /opt/hostplane/
COPY $name /usr/local/bin/$name
$extra
$env
ENV HOME=/data TMPDIR=/tmp
USER 65532:65532
WORKDIR /data
ENTRYPOINT [$entry]
DOCKERFILE
  # The image's content: every file of the context with its mode and owner-to-be, and the
  # Dockerfile. An image labelled with the same hash is current.
  content=$(cd "$ctx" && find . -type f -printf '%p %m\n' | sort | while read -r f m; do
      printf '%s %s %s\n' "$(sha256sum < "$f" | cut -c1-64)" "$m" "$f"; done | sha256sum | cut -c1-32)
  if [ "$(docker image inspect -f '{{index .Config.Labels "dev.hostplane.content"}}' "hostplane/$name:$tag" 2>/dev/null)" = "$content" ]; then
    echo "[images] hostplane/$name:$tag is current"
    rm -rf "$ctx"
    continue
  fi
  echo "LABEL dev.hostplane.content=$content" >> "$ctx/Dockerfile"
  echo "[images] building hostplane/$name:$tag"
  # (the legacy builder's deprecation notice is noise here; errors are shown)
  out=$(docker build -q -t "hostplane/$name:$tag" "$ctx" 2>&1) || { echo "$out" >&2; exit 1; }
  rm -rf "$ctx"
done
echo "[images] done: $*"
