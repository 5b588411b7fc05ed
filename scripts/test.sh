#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then formatting, lints,
# and every test (unit, property, and end to end on real PostgreSQL 15 and a real broker).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
# The tests' broker and cargo-deny build in the background (only the first time: ~20
# minutes) while the workspace is checked and built.
mkdir -p target
(scripts/install-tansu.sh && scripts/install-cargo-deny.sh) > target/install-tools.log 2>&1 &
tools=$!
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked --no-run
if ! wait "$tools"; then
    cat target/install-tools.log >&2
    echo "test: installing the tansu broker or cargo-deny failed (log above)" >&2
    exit 1
fi
cargo test --workspace --locked
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
