#!/usr/bin/env bash
# CPU per event of decode + route, as instructions counted by callgrind (they repeat exactly
# where timings on a shared machine do not): for each case of benches/decode_route.rs (the
# native routing and the Debezium mode's connector configurations, 100 B / 1 KB / 10 KB
# payloads), the bench binary runs under callgrind routing 0 and then N events; the difference
# over N is what one event costs, the set-up left out. Prints a table, ratios to native.
#   scripts/instructions-per-event.sh [N]   (default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
command -v valgrind >/dev/null || { echo "instructions-per-event: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
bin=$(cargo bench --locked --bench decode_route --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "decode_route":
        print(m["executable"])')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
count() { # case events -> instructions
    OUTBOX_RELAY_BENCH_ONLY=$1 OUTBOX_RELAY_BENCH_LOOP=$2 valgrind --tool=callgrind \
        --callgrind-out-file="$out/cg" "$bin" --bench >/dev/null 2>"$out/log"
    sed -n 's/^summary: //p' "$out/cg"
}
printf '%-16s %8s %14s %10s\n' case payload instr/event "÷ native"
for size in 100B 1000B 10000B; do
    native=
    for name in native debezium-json debezium-chain debezium-before; do
        base=$(count "$name/$size" 0)
        full=$(count "$name/$size" "$n")
        per=$(( (full - base) / n ))
        native=${native:-$per}
        printf '%-16s %8s %14s %10s\n' "$name" "$size" "$per" "$(python3 -c "print(f'{$per/$native:.2f}')")"
    done
done
