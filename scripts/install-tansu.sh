#!/usr/bin/env bash
# Installs the tansu Kafka-protocol broker the tests and benchmarks run against (built from
# crates.io once, 13-25 minutes on 2 cores, then reused from ~/.cargo/bin). The demo does not
# need it: it embeds a broker.
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"
TANSU=${OUTBOX_RELAY_TANSU:-$(command -v tansu || echo "$HOME/.cargo/bin/tansu")}
if [ -x "$TANSU" ] && "$TANSU" --version 2>/dev/null | grep -q "0.6.0" \
    && "$TANSU" --help 2>/dev/null | grep -q "dynostore, libsql"; then
    :
else
    echo "install-tansu: building the tansu broker (cargo install, about 20 minutes the first time)"
    cargo install tansu --version 0.6.0 --locked --features dynostore,libsql
fi
