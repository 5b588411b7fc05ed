#!/usr/bin/env bash
# Installs cargo-deny (licenses, bans, sources and advisories of the dependency graph; see
# deny.toml), built from crates.io once (a few minutes), then reused from ~/.cargo/bin.
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"
VERSION=0.20.2
if ! cargo deny --version 2>/dev/null | grep -q "$VERSION"; then
    echo "install-cargo-deny: building cargo-deny $VERSION (cargo install, a few minutes the first time)"
    cargo install cargo-deny --version "$VERSION" --locked
fi
