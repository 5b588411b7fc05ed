#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then formatting, lints,
# and every test (unit, property, and end to end on real PostgreSQL and Apache Kafka).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
# cargo-deny builds in the background (only the first time) while the workspace is checked
# and built.
mkdir -p target
scripts/install-cargo-deny.sh > target/install-tools.log 2>&1 &
tools=$!
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked --no-run
if ! wait "$tools"; then
    cat target/install-tools.log >&2
    echo "test: installing cargo-deny failed (log above)" >&2
    exit 1
fi
cargo test --workspace --locked
# The version matrix: the core path, hardening, snapshot and Debezium differential tests on
# every other PostgreSQL major the relay supports (the whole suite ran on 15 above), the three
# versions side by side: each runs its test binaries itself (one cargo holds the build lock).
test_binary() {
    cargo test --locked --no-run --message-format=json --test "$1" 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1"
}
core_path=$(test_binary core_path)
hardening=$(test_binary hardening)
differential=$(test_binary debezium_differential)
debezium=$(test_binary debezium)
matrix=()
for version in 16 17 18; do
    (
        export OUTBOX_RELAY_PG_VERSION=$version OUTBOX_RELAY_DIFF_SEEDS=20261125
        "$core_path" && "$hardening" && "$debezium" snapshot && "$differential"
    ) > "target/matrix-postgres-$version.log" 2>&1 &
    matrix+=("$version:$!")
done
failed=""
for entry in "${matrix[@]}"; do
    version=${entry%%:*}
    if wait "${entry#*:}"; then
        echo "test: PostgreSQL $version: core path, hardening, snapshot and differential tests passed"
    else
        cat "target/matrix-postgres-$version.log" >&2
        failed="$failed $version"
    fi
done
if [ -n "$failed" ]; then
    echo "test: the version matrix failed on PostgreSQL$failed (logs above)" >&2
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
