#!/usr/bin/env bash
# Every benchmark, one after the other, each printing its table (benches/README.md says
# what each measures) and writing its plot to benches/results/. About 10 minutes on 2 cores.
# Installs PostgreSQL 15 and tansu when missing, like scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-tansu.sh
export PATH="$HOME/.cargo/bin:$PATH"
for bench in decode_route big_transaction end_to_end cdc_vs_polling exactly_once; do
    echo "=== cargo bench --bench $bench"
    cargo bench --locked --bench "$bench"
done
