#!/usr/bin/env bash
# Apicurio Registry 2.6.13.Final (in-memory storage), from Maven Central: the schema registry of
# the Avro converter tests (tests/schema_registry.rs), unpacked once into
# ${OUTBOX_RELAY_TOOLS:-~/.cache/outbox-relay}/apicurio-registry-<version>, where the testkit
# runs it with Java 17.
set -euo pipefail
version=2.6.13.Final
dest=${OUTBOX_RELAY_TOOLS:-$HOME/.cache/outbox-relay}/apicurio-registry-$version
if [ -f "$dest/apicurio-registry-app-$version-runner.jar" ]; then
    exit 0
fi
url=https://repo.maven.apache.org/maven2/io/apicurio/apicurio-registry-app/$version/apicurio-registry-app-$version-all.tar.gz
echo "install-apicurio: fetching Apicurio Registry $version from Maven Central into $dest"
rm -rf "$dest.partial"
mkdir -p "$dest.partial"
curl -fsSL "$url" | tar -xz -C "$dest.partial"
rm -rf "$dest"
mv "$dest.partial" "$dest"
