//! The relay in a small pod: a memory limit of 512 MiB, as a Kubernetes `resources.limits.memory`
//! sets it (a memory cgroup), around the relay alone. In the Debezium mode with the seeds'
//! converters it takes an initial snapshot of 300,000 rows of 2 KB jsonb (600 MB of row text,
//! more than the limit), then streams one row of 100 MB, and is never killed: everything it
//! holds is bounded in bytes, not in rows.
//!
//! The limit is a memory cgroup made under the test's own (cgroup v2 with the memory
//! controller, or v1). Where no memory cgroup can be made, the kernel's own peak of the
//! process's resident memory (VmHWM) is held to the same limit, and the test says so.

mod common;

use common::RELAY;
use outbox_relay_testkit::{status_kib, Broker, PgCluster, RelayProcess, Storage};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const LIMIT_BYTES: u64 = 512 << 20;
const ROWS: u64 = 300_000;

/// A memory cgroup limited to `LIMIT_BYTES`, removed on drop.
struct MemoryCgroup {
    dir: PathBuf,
    /// The file that reports the group's peak usage.
    peak: &'static str,
}

impl MemoryCgroup {
    /// Made under this process's own memory cgroup, v2 first; `None` where neither can be.
    fn make() -> Option<Self> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let name = format!("outbox-relay-small-pod-{}", std::process::id());
        for line in own.lines() {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            let (root, limit, peak) = if controllers.is_empty() {
                let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
                    .into_iter()
                    .find(|r| Path::new(r).join("cgroup.controllers").is_file())?;
                let enabled = std::fs::read_to_string(format!("{root}{path}/cgroup.controllers"))
                    .unwrap_or_default();
                if !enabled.split_whitespace().any(|c| c == "memory") {
                    continue;
                }
                (root, "memory.max", "memory.peak")
            } else if controllers.split(',').any(|c| c == "memory") {
                (
                    "/sys/fs/cgroup/memory",
                    "memory.limit_in_bytes",
                    "memory.max_usage_in_bytes",
                )
            } else {
                continue;
            };
            let dir = PathBuf::from(format!("{root}{path}")).join(&name);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            let group = Self { dir, peak };
            if std::fs::write(group.dir.join(limit), LIMIT_BYTES.to_string()).is_ok() {
                // Swap, where the group accounts it, is no way around the limit either.
                let _ = std::fs::write(
                    group.dir.join("memory.memsw.limit_in_bytes"),
                    LIMIT_BYTES.to_string(),
                );
                let _ = std::fs::write(group.dir.join("memory.swap.max"), "0");
                return Some(group);
            }
        }
        None
    }

    fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    fn peak_bytes(&self) -> Option<u64> {
        std::fs::read_to_string(self.dir.join(self.peak))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_600_mb_snapshot_and_a_100_mb_row_fit_in_512_mib() {
    let pg = PgCluster::start_with_config("max_wal_size = 4GB\n")
        .unwrap_or_else(|e| panic!("cannot start PostgreSQL for this test: {e:#}"));
    let broker = Broker::start(Storage::Sqlite)
        .unwrap_or_else(|e| panic!("cannot start Apache Kafka for this test: {e:#}"));
    let db = pg.connect().await.unwrap();
    db.batch_execute(outbox_relay_testkit::large_outbox::DDL)
        .await
        .unwrap();
    let text = outbox_relay_testkit::large_outbox::fill(&db, ROWS).await;
    assert!(
        text as u64 > LIMIT_BYTES,
        "the snapshot is larger than the limit"
    );

    let dir = tempfile::tempdir().unwrap();
    let cgroup = MemoryCgroup::make();
    let mut args: Vec<String> = Vec::new();
    let program = match &cgroup {
        // The relay joins the group before it runs a line of its own: all it ever holds counts.
        Some(group) => {
            args.extend([
                "-c".to_owned(),
                format!(
                    "echo $$ > '{}' && exec \"$0\" \"$@\"",
                    group.procs().display()
                ),
                RELAY.to_owned(),
            ]);
            PathBuf::from("/bin/sh")
        }
        None => {
            eprintln!(
                "small_pod: no memory cgroup can be made here; the kernel's peak of the relay's resident memory \
                 (VmHWM) is held to the limit instead"
            );
            PathBuf::from(RELAY)
        }
    };
    args.extend(outbox_relay_testkit::large_outbox::run_args(
        dir.path(),
        pg.port(),
        "pod",
        &[("slot.name", "pod")],
        &broker.bootstrap_servers(),
    ));
    let mut relay = RelayProcess::spawn(&program, &args, &[("RUST_LOG", "warn")]).unwrap();
    let pid = relay.pid();
    let alive = |relay: &mut RelayProcess, what: &str| {
        let exited = relay.wait_timeout(Duration::ZERO).unwrap();
        assert!(
            exited.is_none(),
            "the relay died during {what} ({exited:?}; killed by the memory limit?):\n{}",
            relay.log()
        );
    };

    // 1. The snapshot.
    let started = Instant::now();
    loop {
        let completed = db
            .query_opt(
                "SELECT completed FROM public.outbox_relay_snapshots WHERE slot_name = 'pod'",
                &[],
            )
            .await
            .ok()
            .flatten()
            .is_some_and(|r| r.get::<_, bool>(0));
        if completed {
            break;
        }
        alive(&mut relay, "the snapshot");
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the snapshot did not complete in 10 min:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after_snapshot = status_kib(pid, "VmHWM:").unwrap_or(0);
    eprintln!(
        "small_pod: snapshot of {ROWS} rows ({} MB of payload text) in {:.1?}, peak RSS {} MiB",
        text / 1_000_000,
        started.elapsed(),
        after_snapshot / 1024
    );

    // 2. One row of 100 MB, streamed: relayed or dead-lettered, and the slot moves past it.
    db.batch_execute(
        "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) \
         VALUES (gen_random_uuid(), 'Order', 'huge', 'Created', jsonb_build_object('note', repeat('x', 100000000)))",
    )
    .await
    .unwrap();
    let target = outbox_relay_testkit::current_wal_lsn(&db).await;
    outbox_relay_testkit::wait_confirmed(&db, "pod", target, Duration::from_secs(300), || {
        relay.log()
    })
    .await;
    alive(&mut relay, "the 100 MB row");
    let peak = status_kib(pid, "VmHWM:").unwrap() * 1024;
    let group_peak = cgroup.as_ref().and_then(MemoryCgroup::peak_bytes);
    eprintln!(
        "small_pod: after the 100 MB row, peak RSS {} MiB; the memory cgroup's peak {:?} MiB",
        peak >> 20,
        group_peak.map(|b| b >> 20)
    );
    assert!(peak < LIMIT_BYTES, "peak RSS {} MiB", peak >> 20);
    // Every snapshot row is in Kafka (the topics' offsets; reading 600 MB back is not needed).
    let events: i64 = ["Order", "Customer", "Invoice"]
        .iter()
        .flat_map(|t| {
            outbox_relay_testkit::kafka::watermarks(
                &broker.bootstrap_servers(),
                &format!("outbox.event.{t}"),
            )
            .unwrap_or_default()
        })
        .map(|(_, low, high)| high - low)
        .sum();
    assert!(
        events as u64 >= ROWS,
        "{events} of {ROWS} snapshot rows in Kafka"
    );
    drop(relay);
    // The group is removed once the relay is gone.
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(cgroup);
}
