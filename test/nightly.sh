#!/usr/bin/env bash
# Runs troupe's suites at nightly size: the same tests as `go test -race ./...`, with
# the counts the PR-size run keeps small turned up through their environment
# variables (see README.md "Testing"). Each count can be overridden:
#
#   test/nightly.sh                          # everything at nightly size (hours on 2 cores)
#   TROUPE_CHAOS_SCHEDULES=20000 test/nightly.sh ./test/settle/
#
# Randomized tests log their seed first; pass TROUPE_SEED=<n> to replay a run, and
# TROUPE_ARTIFACTS=<dir> to keep failing histories (porcupine HTML timelines).
set -euo pipefail
cd "$(dirname "$0")/.."

export TROUPE_CHAOS_SCHEDULES="${TROUPE_CHAOS_SCHEDULES:-100000}" # settle and activation suites, per test and mode
export TROUPE_NOTICE_ROUNDS="${TROUPE_NOTICE_ROUNDS:-2000}"       # notices suite rounds
export TROUPE_DURABILITY_ROUNDS="${TROUPE_DURABILITY_ROUNDS:-400}" # SIGKILL rounds on a bbolt file
export TROUPE_MUTATION_RUNS="${TROUPE_MUTATION_RUNS:-50}"         # suite runs per planted bug
export TROUPE_ARTIFACTS="${TROUPE_ARTIFACTS:-$PWD/test/out/artifacts}"

pkgs=("$@")
if [[ ${#pkgs[@]} -eq 0 ]]; then pkgs=(./...); fi
echo "# nightly: CHAOS_SCHEDULES=$TROUPE_CHAOS_SCHEDULES NOTICE_ROUNDS=$TROUPE_NOTICE_ROUNDS" \
	"DURABILITY_ROUNDS=$TROUPE_DURABILITY_ROUNDS MUTATION_RUNS=$TROUPE_MUTATION_RUNS artifacts in $TROUPE_ARTIFACTS" >&2
go test -race -count=1 -timeout 12h "${pkgs[@]}"
