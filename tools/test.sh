#!/usr/bin/env bash
# make test: every phase of the suite, each timed, with a summary of the phases as the last
# lines of the output whether the run passed or failed (docs/testing.md says what each costs).
#
# A phase runs in the foreground (`phase NAME CMD...`), or in the background beside the
# following ones (`start NAME CMD...`, then `finish NAME`): its output goes to a log that is
# printed, whole, when it ends, so the log of a phase is never interleaved with another's.
# The first failing phase stops the run (background phases are stopped too).
#
# Usage: tools/test.sh            (make test)
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
logs=$(mktemp -d)
begin=$SECONDS
summary=() # "name|seconds|result"
declare -A started startedAt pids

record() { summary+=("$1|$2|$3"); }

print_summary() {
  local line name secs result
  echo
  echo "== phases (wall time; background phases overlap the ones after them)"
  for line in "${summary[@]}"; do
    IFS='|' read -r name secs result <<<"$line"
    printf '   %-34s %4dm%02ds  %s\n' "$name" $((secs / 60)) $((secs % 60)) "$result"
  done
  local total=$((SECONDS - begin))
  printf '   %-34s %4dm%02ds\n' "total" $((total / 60)) $((total % 60))
}

stop_all() {
  local pid
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
}

fail() {
  record "$1" "$2" "FAILED"
  stop_all
  print_summary
  echo "== $(date -u +%T) make test FAILED in phase: $1"
  rm -rf "$logs"
  exit 1
}

# phase NAME CMD...: run CMD now, in the foreground.
phase() {
  local name=$1; shift
  echo "== $(date -u +%T) $name"
  local t0=$SECONDS
  "$@" || fail "$name" $((SECONDS - t0))
  record "$name" $((SECONDS - t0)) ok
}

# start NAME CMD...: run CMD in the background (its own process group), output to a log.
start() {
  local name=$1; shift
  echo "== $(date -u +%T) $name (started in the background)"
  started[$name]=$SECONDS startedAt[$name]=$(date +%s)
  local log="$logs/${name//[^a-zA-Z0-9]/_}"
  set -m
  { "$@"; rc=$?; date +%s > "$log.end"; exit $rc; } > "$log.log" 2>&1 &
  set +m
  pids[$name]=$!
}

# finish NAME: wait for a background phase, print its log, stop the run if it failed.
finish() {
  local name=$1 rc=0
  wait "${pids[$name]}" || rc=$?
  unset 'pids[$name]'
  local log="$logs/${name//[^a-zA-Z0-9]/_}"
  echo "== $(date -u +%T) $name: its output"
  cat "$log.log"
  # its own time, from its start to its end (not to the moment it was waited for)
  local secs=$((SECONDS - ${started[$name]}))
  [ -s "$log.end" ] && secs=$(($(cat "$log.end") - ${startedAt[$name]}))
  [ $rc -eq 0 ] || fail "$name" $secs
  record "$name" $secs ok
}

trap 'stop_all; rm -rf "$logs"' INT TERM

phase "lint" $make -s lint
phase "tools and release binaries" $make -s test-tools
# test/e2e is the critical path (its tests wait on real processes most of the time, the CPU
# half idle): it runs in the background while every other package, the real-kubelet tests
# (one at a time: they share the host's network set-up, under /tmp/e2e.lock) and the fuzz
# targets take the rest of the machine. None of those touches what test/e2e's stacks use.
start "go test ./test/e2e" $make -s go-test-e2e
phase "go test (every other package)" $make -s go-test-rest
phase "mgmt-test" $make -s mgmt-test
phase "mgmt-kuberuntime-test" $make -s mgmt-kuberuntime-test
phase "mgmt-dev-test" $make -s mgmt-dev-test
phase "fuzz-short" $make -s fuzz-short
phase "images" $make -s images
finish "go test ./test/e2e"
phase "mgmt-deploy-test" $make -s mgmt-deploy-test
phase "compose-test" $make -s compose-test

print_summary
echo "== $(date -u +%T) make test passed"
rm -rf "$logs"
