#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then formatting, lints,
# and every test (unit, property, and end to end on real PostgreSQL 15 and a real broker).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
# The tests' broker builds in the background (only the first time: ~20 minutes) while the
# workspace is checked and built.
mkdir -p target
scripts/install-tansu.sh > target/install-tansu.log 2>&1 &
tansu=$!
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked --no-run
if ! wait "$tansu"; then
    cat target/install-tansu.log >&2
    echo "test: installing the tansu broker failed (log above)" >&2
    exit 1
fi
cargo test --workspace --locked
