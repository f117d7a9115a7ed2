#!/usr/bin/env bash
# Keeps hostplane's modules independent, as etcd keeps its own: every module names the sibling
# modules it needs with a `replace` to their directory, so it builds and tests alone
# (GOWORK=off, -mod=readonly) and `go mod tidy` works on it.
#
# Usage: tools/modules.sh sync    require in each module the versions the workspace selects
#                                 (go work sync), rewrite its sibling replaces and tidy it
#        tools/modules.sh check   fail if a module is untidy, does not build or vet alone, builds
#                                 other versions alone than in the workspace, or breaks the import
#                                 rules (pkg and apis never import services; a daemon never imports
#                                 another daemon; only tests/ and cmd/ see them all)
#
# Why the same versions: a module built alone with an older protobuf or sigs.k8s.io/json than
# the workspace's compiles every Kubernetes package again (a cold `make lint` took 21 minutes
# that way); with the workspace's versions its packages come from the workspace's build cache.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export GOWORK=off GOFLAGS=-mod=mod
prefix=github.com/hostplane/hostplane
# Dependency order: a module comes after the siblings it requires.
modules=(pkg apis services/localcloud services/infrad services/pkid services/componentd services/clusterd
         services/ignitiond services/nodepoold cmd/hostplane cmd/hostplane-karpenter test/apicheck test/integration test/e2e bench)
daemons=(clusterd nodepoold componentd pkid infrad ignitiond)

log() { printf '[modules] %s\n' "$*" >&2; }

relpath() { realpath -m --relative-to="$top/$1" "$top/$2"; }

sync_one() {
  local mod=$1 sib
  # Drop every sibling replace, then add one per sibling and let tidy find which are needed.
  for sib in "${modules[@]}"; do
    [ "$sib" = "$mod" ] && continue
    (cd "$mod" && go mod edit -dropreplace="$prefix/$sib" -replace="$prefix/$sib=$(relpath "$mod" "$sib")")
  done
  (cd "$mod" && go mod tidy)
  local needed; needed=$(cd "$mod" && go list -m -f '{{.Path}}' all | grep "^$prefix/" || true)
  for sib in "${modules[@]}"; do
    [ "$sib" = "$mod" ] && continue
    grep -qx "$prefix/$sib" <<<"$needed" || (cd "$mod" && go mod edit -dropreplace="$prefix/$sib")
  done
  # Siblings are always required at v0.0.0: the replace decides, never a version.
  for sib in $needed; do
    [ "$sib" = "$prefix/$mod" ] && continue
    (cd "$mod" && go mod edit -droprequire="$sib" && go mod edit -require="$sib@v0.0.0")
  done
  (cd "$mod" && go mod tidy)
}

# imports lists "importer imported" pairs of hostplane packages in a module, tests included.
imports() {
  (cd "$1" && go list -test -f '{{$p := .ImportPath}}{{range .Imports}}{{$p}} {{.}}{{"\n"}}{{end}}' ./... |
     grep " $prefix/" | sed 's/ \[.*\]//; s/\.test / /; s/_test / /' | sort -u)
}

# built lists "module version" of every package a module's packages and tests build from.
built() { (cd "$1" && go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' ./... | grep -v "^$prefix/" | sort -u); }

check_one() {
  local mod=$1 bad=0
  (cd "$mod" && go mod tidy -diff >/dev/null) || { log "$mod: not tidy (run tools/modules.sh sync)"; bad=1; }
  local skew; skew=$(diff <(built "$mod") <(GOWORK= GOFLAGS= built "$mod") | grep '^[<>]' || true)
  [ -z "$skew" ] || { log "$mod builds other versions alone than in the workspace (run tools/modules.sh sync):"; echo "$skew" | head -5 >&2; bad=1; }
  (cd "$mod" && GOFLAGS=-mod=readonly go vet ./...) || { log "$mod: does not build or vet alone (GOWORK=off)"; bad=1; }
  local from to owner
  while read -r from to; do
    [ -z "$from" ] && continue
    case $mod in
      pkg|apis) [[ $to == "$prefix/services/"* || $to == "$prefix/cmd/"* || $to == "$prefix/test/"* ]] &&
                  { log "$mod may not import services, cmd or tests: $from imports $to"; bad=1; } ;;
      services/*)
        owner=${mod#services/}
        for d in "${daemons[@]}" localcloud; do
          [ "$d" = "$owner" ] && continue
          # infrad is the local platform's provider: it may use the local cloud's client, as a
          # cloud provider uses its cloud's SDK. Nothing else in services/ sees another service.
          [ "$owner" = infrad ] && [ "$d" = localcloud ] && continue
          [[ $to == "$prefix/services/$d" || $to == "$prefix/services/$d/"* ]] &&
            { log "$from imports another service: $to"; bad=1; }
        done ;;
    esac
  done < <(imports "$mod")
  return $bad
}

case ${1:-check} in
  sync)  (unset GOWORK; GOFLAGS= go work sync); for m in "${modules[@]}"; do log "sync $m"; sync_one "$m"; done ;;
  check) rc=0; for m in "${modules[@]}"; do log "check $m"; check_one "$m" || rc=1; done; exit $rc ;;
  *) echo "usage: $0 sync|check" >&2; exit 2 ;;
esac
