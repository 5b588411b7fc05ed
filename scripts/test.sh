#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then formatting, lints,
# and every test (unit, property, and end to end on real PostgreSQL and Apache Kafka).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The CPU cost check: instructions per event of decode + route, native and Debezium mode,
# against crates/cost/baseline.txt (fails above +3 %; says when a baseline can be lowered).
scripts/cost-check.sh
cargo test --workspace --locked --no-run
# Every binary too (the demo's, which tests/demo.rs runs), with the features the tests unify:
# nothing is compiled again but the binaries cargo test does not link.
cargo build --workspace --locked --bins --tests
# cargo-deny builds (the first time only) at the lowest priority while the tests run: they
# spend most of their time waiting, the compilation before them does not.
mkdir -p target
nice -n 19 scripts/install-cargo-deny.sh > target/install-tools.log 2>&1 &
tools=$!
# Every test binary, and the PostgreSQL version matrix (the core path, hardening, snapshot and
# Debezium differential tests on 16, 17 and 18; the whole suite runs on 15), three at a time,
# longest first: scripts/run-tests.py.
cargo test --workspace --locked --no-run --message-format=json 2>/dev/null \
    | python3 scripts/run-tests.py "${OUTBOX_RELAY_TEST_LANES:-3}"
# The data directories of the test brokers whose processes ended (a test binary's pooled
# brokers are never dropped; each later binary sweeps those before it, this the last ones).
for dir in "${TMPDIR:-/tmp}"/outbox-relay-kafka-*; do
    pid=${dir##*/outbox-relay-kafka-}
    pid=${pid%%-*}
    if [ -d "$dir" ] && [ ! -d "/proc/$pid" ]; then
        rm -rf "$dir"
    fi
done
cargo test --workspace --locked --doc
if ! wait "$tools"; then
    cat target/install-tools.log >&2
    echo "test: installing cargo-deny failed (log above)" >&2
    exit 1
fi
# The dependency graph: licenses, duplicate versions, sources (deny.toml); advisories when the
# RustSec database can be fetched from this machine, and said plainly when it cannot.
cargo deny --locked check licenses bans sources
if cargo deny fetch db >/dev/null 2>&1; then
    cargo deny --locked check --disable-fetch advisories
elif [ -n "${OUTBOX_RELAY_REQUIRE_ADVISORIES:-}" ]; then
    echo "test: the RustSec advisory database cannot be fetched, and OUTBOX_RELAY_REQUIRE_ADVISORIES is set" >&2
    exit 1
else
    echo "test: cargo deny advisories NOT CHECKED: the RustSec database (github.com/rustsec/advisory-db) cannot be fetched from here (OUTBOX_RELAY_REQUIRE_ADVISORIES=1 makes this an error)"
fi
