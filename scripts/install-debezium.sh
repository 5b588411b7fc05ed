#!/usr/bin/env bash
# Debezium 3.6 in Kafka Connect 4.3 (scripts/debezium/pom.xml), from Maven Central: copied once
# into ${OUTBOX_RELAY_TOOLS:-~/.cache/outbox-relay}/debezium-<version>, where the testkit runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's|.*<version.debezium>\(.*\)</version.debezium>.*|\1|p' scripts/debezium/pom.xml)
dest=${OUTBOX_RELAY_TOOLS:-$HOME/.cache/outbox-relay}/debezium-$version
if [ -f "$dest/debezium-connector-postgres-$version.jar" ]; then
    exit 0
fi
echo "install-debezium: fetching Debezium $version and Kafka Connect from Maven Central into $dest"
rm -rf "$dest.partial"
mvn -q -B -f scripts/debezium/pom.xml dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$dest.partial"
rm -rf "$dest"
mv "$dest.partial" "$dest"
