#!/usr/bin/env bash
# Runs troupe's benchmarks and prints every figure as a ratio to its baseline
# measured in the same run (see README.md).
#
#   test/bench/run.sh                 # COUNT=5
#   COUNT=3 test/bench/run.sh
#   COUNT=1 ROUNDS=3 test/bench/run.sh   # interleaved: all benchmarks, three times over
#   COUNT=3 BENCH='Lifecycle|Floor' OUT=/tmp/b.txt test/bench/run.sh
#   COUNT=3 PKGS=1 test/bench/run.sh  # also the producers' and tools' benchmarks
#   SCALE=1 test/bench/run.sh         # the scale curves (minutes, a few GB)
#   README=1 MERGE=test/bench/results/scale.txt COUNT=3 PKGS=1 test/bench/run.sh
#
# COUNT   -count of go test (default 5; 1 with SCALE=1); medians are taken over all samples.
# ROUNDS  how many times to run the whole go test command (default 1). Rounds
#         interleave the benchmarks, so a burst of background load hits one sample
#         of each figure instead of every sample of one figure.
# BENCH   -bench regexp (default: all; with SCALE=1, '^BenchmarkScale').
# PKGS=1  also runs the benchmarks of ./producers/process/, ./tools/jobtools/ and
#         ./tools/subagenttool/, each against the baseline in its own package.
# SCALE=1 runs the scale curves of scale_test.go instead: TROUPE_BENCH_SCALE=1,
#         -benchtime 1x (one op is one whole run at one size).
# OUT     raw output file, benchstat-compatible (default test/bench/out/<bench|scale>-<time>.txt).
# MERGE   earlier raw outputs whose samples are added to this run's (e.g. a SCALE=1
#         run, for one README table).
# README=1 prints the README's markdown tables (ratios -markdown) instead of the report.
# STRICT=1 makes the script exit 1 when a target is missed.
set -euo pipefail
cd "$(dirname "$0")/../.."

SCALE="${SCALE:-0}"
if [[ "$SCALE" == 1 ]]; then
	COUNT="${COUNT:-1}"
	BENCH="${BENCH:-^BenchmarkScale}"
	OUT="${OUT:-test/bench/out/scale-$(date +%Y%m%d-%H%M%S).txt}"
	export TROUPE_BENCH_SCALE=1
	extra=(-benchtime 1x -timeout 180m)
else
	COUNT="${COUNT:-5}"
	BENCH="${BENCH:-.}"
	OUT="${OUT:-test/bench/out/bench-$(date +%Y%m%d-%H%M%S).txt}"
	extra=(-timeout 60m)
fi
ROUNDS="${ROUNDS:-1}"
pkgs=(./test/bench/)
if [[ "${PKGS:-0}" == 1 ]]; then
	pkgs+=(./producers/process/ ./tools/jobtools/ ./tools/subagenttool/)
fi
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

# note appends a comment line (ignored by benchstat, shown by ratios -markdown).
note() { echo "# $*" >>"$OUT"; }

note "$(go version)"
for ((round = 1; round <= ROUNDS; round++)); do
	cmd=(go test -p 1 -run '^$' -bench "$BENCH" -benchmem -count "$COUNT" "${extra[@]}" "${pkgs[@]}")
	echo "# round $round/$ROUNDS: ${cmd[*]} >> $OUT" >&2
	note "load before round $round/$ROUNDS:$(uptime | sed 's/.*load average://')"
	"${cmd[@]}" | tee -a "$OUT"
	note "load after round $round/$ROUNDS:$(uptime | sed 's/.*load average://')"
done
echo >&2
echo "# raw output: $OUT" >&2
echo
flags=()
if [[ "${STRICT:-0}" == 1 ]]; then flags+=(-strict); fi
if [[ "${README:-0}" == 1 ]]; then flags+=(-markdown); fi
# shellcheck disable=SC2086 # MERGE is a list of files
go run ./test/bench/ratios "${flags[@]}" "$OUT" ${MERGE:-}
