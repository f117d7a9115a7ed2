#!/usr/bin/env bash
# Runs every fuzz target of the workspace, one after the other: each `func FuzzXxx` in a
# *_test.go file is found with grep, so a new target needs no list to be kept up to date.
#
# Usage: tools/fuzz.sh            each target for $FUZZTIME (default 1m; make fuzz)
#        FUZZTIME=3s tools/fuzz.sh                              (make fuzz-short, in make test)
#        tools/fuzz.sh -list      print the targets as <package dir>:<FuzzName>
#
# A crash fails the run; the test binary writes the input under <package>/testdata/fuzz/<FuzzName>/.
# Fix the code and commit that file: the normal `go test` then replays it as a regression case.
# Each package's fuzz test binary (coverage-instrumented: `go test -c -fuzz`) is built once and
# every target of the package runs from it, in the package's directory as go test would run it;
# the first build of a package takes minutes cold, later ones come from the build cache.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-1m}

targets=()
while IFS= read -r file; do
  while IFS= read -r name; do
    targets+=("$(dirname "$file"):$name")
  done < <(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' "$file")
done < <(grep -rlE --include='*_test.go' --exclude-dir=.git --exclude-dir=testdata '^func Fuzz[A-Za-z0-9_]*\(' . | sed 's|^\./||' | sort)

if [ "${1:-}" = "-list" ]; then
  printf '%s\n' "${targets[@]}"
  exit 0
fi
[ ${#targets[@]} -gt 0 ] || { echo "[fuzz] no fuzz targets found" >&2; exit 1; }

# Go up to 1.26 may end a run at its -fuzztime with "context deadline exceeded" and no input
# (a race in its fuzzing coordinator, golang/go#75804, fixed in Go 1.27): that run is reported
# as a flake, not a failure. A failure is a run that wrote an input, or failed any other way.
crashers() { if [ -d "$1/testdata/fuzz/$2" ]; then find "$1/testdata/fuzz/$2" -type f | wc -l; else echo 0; fi; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$work/out
gocache=$(go env GOCACHE)
start=$SECONDS flakes=0 built=""
for t in "${targets[@]}"; do
  dir=${t%%:*} name=${t##*:}
  bin=$work/$(echo "$dir" | tr / _).fuzz
  if [ "$dir" != "$built" ]; then
    echo "[fuzz] building $dir's fuzz test binary" >&2
    go test -c -fuzz=. -o "$bin" "./$dir" || { echo "[fuzz] $dir: the fuzz test binary does not build" >&2; exit 1; }
    importpath=$(go list -f '{{.ImportPath}}' "./$dir")
    built=$dir
  fi
  echo "[fuzz] $dir $name for $fuzztime" >&2
  before=$(crashers "$dir" "$name")
  # The flags go test would pass: its fuzz cache (the corpus found so far) lives in GOCACHE.
  if (cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^$name\$" -test.fuzztime="$fuzztime" \
        -test.fuzzcachedir="$gocache/fuzz/$importpath") 2>&1 | tee "$out"; then
    continue
  fi
  if [ "$(crashers "$dir" "$name")" = "$before" ] && grep -q '^    context deadline exceeded$' "$out"; then
    echo "[fuzz] $dir $name: stopped by Go's fuzztime race (golang/go#75804), no input found; not a failure" >&2
    flakes=$((flakes + 1))
    continue
  fi
  if [ "$(crashers "$dir" "$name")" = "$before" ]; then
    echo "[fuzz] $dir $name failed without writing an input (a failing seed; see above)" >&2
  else
    echo "[fuzz] $dir $name failed; a crashing input is under $dir/testdata/fuzz/$name/" >&2
  fi
  exit 1
done
echo "[fuzz] ${#targets[@]} targets, ${fuzztime} each, passed in $((SECONDS - start))s ($flakes stopped by golang/go#75804)" >&2
