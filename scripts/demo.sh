#!/usr/bin/env bash
# The demo: a throwaway PostgreSQL, an embedded Kafka-protocol broker (librdkafka's mock
# cluster, on a loopback port) and the real outbox-relay binary; a sample order service commits
# orders with their outbox events, and a consumer prints the events as they arrive.
# ORDERS=0 runs until Ctrl-C. `scripts/demo.sh --bootstrap-servers HOST:PORT` uses a real Kafka.
set -euo pipefail
cd "$(dirname "$0")/.."
# OUTBOX_RELAY_DEMO_BIN_DIR: run binaries built already (the test suite's, which `cargo test
# --workspace` builds with its dev-dependencies' features: a `cargo build` here would compile the
# relay a second time).
if [ -n "${OUTBOX_RELAY_DEMO_BIN_DIR:-}" ]; then
    bin="$OUTBOX_RELAY_DEMO_BIN_DIR"
else
    scripts/install-deps.sh --demo
    export PATH="$HOME/.cargo/bin:$PATH"
    cargo build --locked -p outbox-relay -p outbox-relay-testkit --bins
    bin="${CARGO_TARGET_DIR:-target}/debug"
fi
exec "$bin/outbox-relay-demo" "$bin/outbox-relay" --orders "${ORDERS:-5}" "$@"
