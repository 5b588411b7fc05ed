#!/usr/bin/env python3
"""Runs the workspace's test binaries several at a time, longest first, with the PostgreSQL
version matrix among them.

Reads `cargo test --no-run --message-format=json` on stdin (the binaries are built already),
and runs each test binary as cargo would (in its package's directory, CARGO_MANIFEST_DIR set),
its output in target/test-logs/. The matrix runs the core path, hardening, snapshot and Debezium
differential tests again on PostgreSQL 16, 17 and 18 (OUTBOX_RELAY_PG_VERSION). A test binary
spends most of its time waiting on the PostgreSQL, Kafka and relay processes it starts, so a few
lanes on two cores take a fraction of the time of one. Prints each result as it ends, every
failed binary's log at the end, and exits non-zero if any failed.

Usage: cargo test --workspace --no-run --message-format=json | scripts/run-tests.py LANES"""
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# Measured durations, longest first (the rest follow in any order): lanes fill evenly.
LONGEST = ["kafka_cluster", "core_path", "kafka_security", "connect_security", "exactly_once",
           "compression", "polling", "debezium_differential", "every_mode", "debezium",
           "crash", "hardening", "connect", "observability"]
MATRIX = {"core_path": [], "hardening": [], "debezium": ["snapshot"], "debezium_differential": []}

lanes = int(sys.argv[1])
binaries = []
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        binaries.append((m["target"]["name"], m["executable"], os.path.dirname(m["manifest_path"])))

jobs = []
for name, binary, package in binaries:
    where = os.path.basename(package) if os.path.basename(package) != os.path.basename(os.getcwd()) else "."
    jobs.append({"label": f"{where}/{name} (PostgreSQL 15)", "name": name, "binary": binary, "dir": package})
    if name in MATRIX and os.path.basename(binary).startswith(name + "-"):
        for version in ("16", "17", "18"):
            jobs.append({"label": f"{where}/{name} (PostgreSQL {version})", "name": name, "binary": binary,
                         "dir": package, "args": MATRIX[name],
                         "env": {"OUTBOX_RELAY_PG_VERSION": version,
                                 "OUTBOX_RELAY_DIFF_SEEDS": "20261125",
                                 # The registry converters do not depend on the server's
                                 # version: their families (and their Apicurio) run on 15 only.
                                 "OUTBOX_RELAY_DIFF_AVRO_CASES": "0",
                                 "OUTBOX_RELAY_DIFF_PROTOBUF_CASES": "0"}})
jobs.sort(key=lambda j: LONGEST.index(j["name"]) if j["name"] in LONGEST else len(LONGEST))
os.makedirs("target/test-logs", exist_ok=True)


def run(job):
    log = "target/test-logs/" + "".join(c if c.isalnum() or c in "._" else "-" for c in job["label"]) + ".log"
    # OUTBOX_RELAY_WORKSPACE_BUILT: every binary of the workspace is built (tests/demo.rs).
    env = dict(os.environ, CARGO_MANIFEST_DIR=job["dir"], OUTBOX_RELAY_WORKSPACE_BUILT="1",
               **job.get("env", {}))
    started = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.call([job["binary"], *job.get("args", [])], cwd=job["dir"], env=env,
                               stdout=out, stderr=subprocess.STDOUT)
    print(f"test: {'ok  ' if code == 0 else 'FAIL'} {job['label']} ({time.monotonic() - started:.0f} s)",
          flush=True)
    return code, job, log


with ThreadPoolExecutor(max_workers=lanes) as pool:
    results = list(pool.map(run, jobs))
failed = [(job, log) for code, job, log in results if code != 0]
for job, log in failed:
    print(f"\n===== {job['label']}: {log}", file=sys.stderr)
    sys.stderr.write(open(log).read())
print(f"test: {len(jobs) - len(failed)} of {len(jobs)} test binaries passed", flush=True)
if failed:
    print(f"test: failed: {', '.join(j['label'] for j, _ in failed)}", file=sys.stderr)
    sys.exit(1)
