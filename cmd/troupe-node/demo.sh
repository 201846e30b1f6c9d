#!/usr/bin/env bash
# Three troupe-node members over one PostgreSQL: 4 parents start 12 children from
# every node, followups go through random nodes, one node is SIGKILLed, and the
# children carry on from the survivors (the dead node's children re-activate at a
# new epoch). Needs TROUPE_PG_DSN (eval "$(.ci/postgres.sh)") and
# TROUPE_CLUSTER_SECRET (at least 16 bytes).
set -euo pipefail
: "${TROUPE_PG_DSN:?run: eval \"\$(.ci/postgres.sh)\"}"
: "${TROUPE_CLUSTER_SECRET:?export TROUPE_CLUSTER_SECRET (16+ bytes)}"
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
go build -o "$dir/troupe-node" ./cmd/troupe-node
name=demo$$
pids=()
for i in 0 1 2; do
  mkfifo "$dir/n$i.in"
  "$dir/troupe-node" --name "n$i" --cluster "$name" --turn-delay 200ms <"$dir/n$i.in" >"$dir/n$i.out" 2>"$dir/n$i.err" &
  pids+=($!)
  exec {fd}>"$dir/n$i.in"
  eval "fd$i=$fd"
done
send() { local n=$1; shift; local fd="fd$n"; echo "$*" >&"${!fd}"; }
wait_ready() { until grep -q '"event":"ready"' "$dir/n$1.out" 2>/dev/null; do sleep 0.1; done; }
for i in 0 1 2; do wait_ready "$i"; done
sleep 1.5 # let the three heartbeats meet
req=0
for c in $(seq 0 11); do
  req=$((req+1)); send $((c % 3)) "{\"req\":$req,\"op\":\"start\",\"id\":\"$name-c$c\",\"sender\":\"p$((c % 4))\",\"content\":\"task $c\"}"
done
sleep 1
echo "== where each child lives (the node that answered its start)"
grep -h '"op"\|"req"' "$dir"/n*.out | grep -o '"id":"[^"]*","epoch":[0-9]*,"inboxId":"[^"]*","where":"[^"]*"' | sed 's/"inboxId":"[^"]*",//' | sort
victim=$((RANDOM % 3))
echo "== SIGKILL n$victim"
kill -9 "${pids[$victim]}"
for c in $(seq 0 11); do
  n=$(((victim + 1 + c % 2) % 3))
  # the parent's credential for the child, from its start's reply (a followup without it is refused)
  cred=$(grep -h "\"id\":\"$name-c$c\"" "$dir"/n*.out | grep -o '"cred":"[^"]*"' | head -n 1 | cut -d'"' -f4)
  req=$((req+1)); send "$n" "{\"req\":$req,\"op\":\"followup\",\"id\":\"$name-c$c\",\"sender\":\"p$((c % 4))\",\"cred\":\"$cred\",\"content\":\"after the kill $c\",\"timeoutMs\":8000}"
done
sleep 4
echo "== after the kill: every child answered by a survivor (epoch 2 where n$victim had it)"
grep -h '"req"' "$dir"/n*.out | grep -v "n$victim\"" | grep -o '"id":"[^"]*","epoch":[0-9]*,"inboxId":"[^"]*","ended":[0-9]*,"where":"[^"]*"\|"id":"[^"]*","code":"[^"]*"' | sed 's/"inboxId":"[^"]*",//' | sort | tail -12
echo "== activations logged"
grep -h '"event":"activated"' "$dir"/n*.out | grep -o '"node":"[^"]*","id":"[^"]*","epoch":[0-9]*' | sort -t: -k3 | tail -20
for i in 0 1 2; do [[ $i == "$victim" ]] || send "$i" '{"op":"quit"}'; done
wait "${pids[@]}" 2>/dev/null || true
