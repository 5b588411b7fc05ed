#!/usr/bin/env bash
# Apache Kafka's broker jars for the test suite, from Maven Central through
# scripts/kafka/pom.xml, and the tests' create-topic policy (one Java class): copied once into
# ${OUTBOX_RELAY_TOOLS:-~/.cache/outbox-relay}/kafka-<version>, where the testkit finds them.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's|.*<kafka.version>\(.*\)</kafka.version>.*|\1|p' scripts/kafka/pom.xml)
dest=${OUTBOX_RELAY_TOOLS:-$HOME/.cache/outbox-relay}/kafka-$version
policy=scripts/kafka/policy/org/outboxrelay/test/RefusePrefixPolicy.java
if [ -f "$dest/kafka_2.13-$version.jar" ] && [ "$dest/outbox-test-policy.jar" -nt "$policy" ]; then
    exit 0
fi
echo "install-kafka: fetching Apache Kafka $version from Maven Central into $dest"
rm -rf "$dest.partial"
mvn -q -B -f scripts/kafka/pom.xml dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$dest.partial"
# The create-topic policy the broker-refusal tests configure (create.topic.policy.class.name).
classes=$(mktemp -d)
javac -d "$classes" -cp "$dest.partial/kafka-clients-$version.jar" "$policy"
jar cf "$dest.partial/outbox-test-policy.jar" -C "$classes" .
rm -rf "$classes" "$dest"
mv "$dest.partial" "$dest"
