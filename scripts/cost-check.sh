#!/usr/bin/env bash
# The CPU cost check, run by scripts/test.sh: instructions per event of decode + route
# (crates/cost), counted by callgrind (they repeat exactly where timings on a shared machine
# do not), for the native mode and the Debezium mode (the seeds' connector as it is; JsonConverter without and with a chain
# of transforms, and a transform before the EventRouter), at 100 B and 10 KB payloads.
# Compared with the committed baseline, crates/cost/baseline.txt:
#   - a case more than 3 % above its baseline fails the check;
#   - a case half a percent or more below it is printed with the change, so that the baseline is
#     lowered in the same commit: scripts/cost-check.sh --update writes what it measured.
#   scripts/cost-check.sh [--update]
set -euo pipefail
cd "$(dirname "$0")/.."
update=
case "${1:-}" in
    --update) update=1 ;;
    "") ;;
    *) echo "usage: scripts/cost-check.sh [--update]" >&2; exit 2 ;;
esac
command -v valgrind >/dev/null || {
    echo "cost-check: valgrind is needed to count instructions: scripts/install-deps.sh installs it (apt-get install valgrind)" >&2
    exit 1
}
baseline=crates/cost/baseline.txt
events=400
cargo build --locked --profile cost -p outbox-relay-cost --bin outbox-relay-cost
bin="${CARGO_TARGET_DIR:-target}/cost/outbox-relay-cost"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for case in native debezium-seed debezium-json debezium-chain debezium-before; do
    for size in 100 10000; do
        valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*route_events*' \
            --callgrind-out-file="$out/cg" "$bin" "$case" "$size" "$events" >/dev/null 2>"$out/log" || {
            cat "$out/log" >&2
            echo "cost-check: $case at $size B failed under callgrind (log above)" >&2
            exit 1
        }
        total=$(sed -n 's/^totals: //p' "$out/cg")
        echo "$case $size $(( total / events ))" >> "$out/measured"
    done
done
python3 - "$baseline" "$out/measured" "$update" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'EOF'
import sys, datetime
baseline_path, measured_path, update, commit = sys.argv[1:5]
LIMIT = 1.03
measured = {}
for line in open(measured_path):
    case, size, per = line.split()
    measured[(case, size)] = int(per)
baseline = {}
try:
    for line in open(baseline_path):
        if line.strip() and not line.startswith("#"):
            case, size, per = line.split()
            baseline[(case, size)] = int(per)
except FileNotFoundError:
    pass
native = {size: per for (case, size), per in measured.items() if case == "native"}
print(f"{'case':<16} {'payload':>8} {'instr/event':>12} {'baseline':>10} {'change':>8} {'÷ native':>9}")
worse, better = [], []
for (case, size), per in measured.items():
    base = baseline.get((case, size))
    change = "" if base is None else f"{(per / base - 1) * 100:+.1f}%"
    print(f"{case:<16} {size + ' B':>8} {per:>12,} {base or '-':>10} {change:>8} {per / native[size]:>9.2f}")
    if base is None or per > base * LIMIT:
        worse.append((case, size, per, base))
    elif per < base * 0.995:
        # Less than half a percent is the environment's (the stack's alignment moves with it).
        better.append((case, size, per, base))
if update:
    with open(baseline_path, "w") as f:
        f.write("# Instructions per event of decode + route (crates/cost), counted by callgrind:\n")
        f.write("# CASE PAYLOAD_BYTES INSTRUCTIONS. scripts/cost-check.sh fails above +3 %;\n")
        f.write(f"# scripts/cost-check.sh --update writes it. Measured {datetime.date.today()} at {commit}.\n")
        for (case, size), per in measured.items():
            f.write(f"{case} {size} {per}\n")
    print(f"cost-check: {baseline_path} written")
    sys.exit(0)
for case, size, per, base in better:
    print(f"cost-check: {case} at {size} B costs {(1 - per / base) * 100:.1f}% less than the baseline "
          f"({per:,} < {base:,}): lower it in this commit (scripts/cost-check.sh --update)")
if worse:
    for case, size, per, base in worse:
        if base is None:
            print(f"cost-check: {case} at {size} B has no baseline: scripts/cost-check.sh --update", file=sys.stderr)
        else:
            print(f"cost-check: {case} at {size} B costs {per:,} instructions per event, "
                  f"{(per / base - 1) * 100:+.1f}% over the baseline's {base:,} (the limit is +3%)", file=sys.stderr)
    sys.exit(1)
print("cost-check: every case within 3% of the baseline")
EOF
