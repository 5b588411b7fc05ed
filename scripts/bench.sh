#!/usr/bin/env bash
# Every benchmark, one after the other, each printing its table (benches/README.md says
# what each measures) and writing its plot to benches/results/. About 10 minutes on 2 cores.
# Installs PostgreSQL 15 and Apache Kafka when missing, like scripts/test.sh; the benches' broker
# gets the JVM's full JIT and a larger heap (the tests' brokers start fast on C1 alone).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export OUTBOX_RELAY_KAFKA_OPTS="${OUTBOX_RELAY_KAFKA_OPTS:--XX:TieredStopAtLevel=4 -Xmx1g}"
export PATH="$HOME/.cargo/bin:$PATH"
for bench in decode_route big_transaction memory_bounds many_topics connect_failover end_to_end cdc_vs_polling exactly_once; do
    echo "=== cargo bench --bench $bench"
    cargo bench --locked --bench "$bench"
done
