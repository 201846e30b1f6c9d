#!/usr/bin/env bash
# Runs troupe's benchmarks and prints every figure as a ratio to its baseline
# measured in the same run (see README.md).
#
#   test/bench/run.sh                 # COUNT=5
#   COUNT=3 test/bench/run.sh
#   COUNT=1 ROUNDS=3 test/bench/run.sh   # interleaved: all benchmarks, three times over
#   COUNT=3 BENCH='Lifecycle|Floor' OUT=/tmp/b.txt test/bench/run.sh
#
# COUNT   -count of go test (default 5); medians are taken over all samples.
# ROUNDS  how many times to run the whole go test command (default 1). Rounds
#         interleave the benchmarks, so a burst of background load hits one sample
#         of each figure instead of every sample of one figure.
# BENCH   -bench regexp (default: all).
# OUT     raw output file, benchstat-compatible (default test/bench/out/bench-<time>.txt).
# STRICT=1 makes the script exit 1 when a target is missed.
set -euo pipefail
cd "$(dirname "$0")/../.."

COUNT="${COUNT:-5}"
ROUNDS="${ROUNDS:-1}"
BENCH="${BENCH:-.}"
OUT="${OUT:-test/bench/out/bench-$(date +%Y%m%d-%H%M%S).txt}"
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

for ((round = 1; round <= ROUNDS; round++)); do
	echo "# round $round/$ROUNDS: go test -run '^\$' -bench '$BENCH' -benchmem -count $COUNT ./test/bench/ >> $OUT" >&2
	go test -run '^$' -bench "$BENCH" -benchmem -count "$COUNT" -timeout 60m ./test/bench/ | tee -a "$OUT"
done
echo >&2
echo "# raw output: $OUT" >&2
echo
strict=()
if [[ "${STRICT:-0}" == 1 ]]; then strict=(-strict); fi
go run ./test/bench/ratios "${strict[@]}" "$OUT"
