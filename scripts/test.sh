#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then formatting, lints,
# and every test (unit, property, and end to end on real PostgreSQL 15 and a real broker).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
