//! A real PostgreSQL failover: a primary and a physical standby with failover
//! slots synchronized (`sync_replication_slots`, `synchronized_standby_slots`) and
//! synchronous commit, the relay on a multi-host URL (`target_session_attrs=read-write`)
//! with `--slot-failover`, a writer inserting all along. The primary is stopped at once
//! (a crash) and the standby promoted; the writer goes on against the new primary. Every row
//! on the new primary reaches Kafka, in order per aggregate; with `--exactly-once`, once.
//! Also a multi-host URL whose first host is dead, and one whose first host is a standby.

mod common;

use common::*;
use outbox_relay_testkit::{Broker, PgCluster, RelayProcess, Storage};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SLOT: &str = "outbox_relay";

fn multi_host_url(ports: &[u16], extra: &str) -> String {
    let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    format!(
        "postgres://postgres@{}/postgres?target_session_attrs=read-write&connect_timeout=2{extra}",
        hosts.join(",")
    )
}

/// Inserts events one per transaction, n = 0, 1, …, against whichever server takes writes;
/// an insert whose commit was not confirmed is tried again (same id: at most once).
/// Returns the events whose commit was acknowledged.
fn spawn_writer(
    url: String,
    stop: Arc<AtomicBool>,
    next: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<Vec<u64>> {
    tokio::spawn(async move {
        let mut acknowledged = Vec::new();
        let mut client: Option<tokio_postgres::Client> = None;
        while !stop.load(Ordering::Relaxed) {
            if client.as_ref().is_none_or(|c| c.is_closed()) {
                client = outbox_relay_testkit::postgres::connect(&url).await.ok();
                if client.is_none() {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            }
            let n = next.load(Ordering::Relaxed);
            let inserted = client
                .as_ref()
                .unwrap()
                .execute(
                    "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) \
                     VALUES ($1::text::uuid, $2, $3, 'Event', jsonb_build_object('n', $4::int8)) \
                     ON CONFLICT (id) DO NOTHING",
                    &[
                        &event_uuid(n),
                        &TYPES[(n % 4) as usize],
                        &format!("agg-{}", n % 10),
                        &(n as i64),
                    ],
                )
                .await;
            match inserted {
                Ok(_) => {
                    acknowledged.push(n);
                    next.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(_) => {
                    client = None;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        acknowledged
    })
}

async fn wait_for(
    what: &str,
    timeout: Duration,
    report: impl Fn() -> String,
    mut check: impl AsyncFnMut() -> bool,
) {
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}:\n{}", report());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the standby holds a synchronized copy of the slot.
async fn wait_for_synchronized_copy(
    standby_db: &tokio_postgres::Client,
    report: impl Fn() -> String,
) {
    wait_for("no synchronized slot on the standby", Duration::from_secs(90), report, async || {
        standby_db
            .query_one(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND synced AND NOT temporary",
                &[&SLOT],
            )
            .await
            .map(|r| r.get::<_, i64>(0) == 1)
            .unwrap_or(false)
    })
    .await;
}

async fn failover(major: u32, exactly_once: bool) {
    let primary =
        PgCluster::start_version(major, "").unwrap_or_else(|e| panic!("PostgreSQL {major}: {e:#}"));
    let standby = primary
        .start_standby("standby1", "")
        .unwrap_or_else(|e| panic!("a standby of PostgreSQL {major}: {e:#}\n{}", primary.log()));
    let (primary_port, standby_port) = (primary.port(), standby.port());
    let broker = Broker::start(Storage::Sqlite).unwrap_or_else(|e| panic!("Apache Kafka: {e:#}"));
    let stack = Stack::of(primary, broker).await;
    let url = multi_host_url(&[primary_port, standby_port], "");
    // `check --slot-failover` names what the slot lacks to survive a failover, with the fix.
    let (code, said) = stack.check_as(&url, &["--slot-failover"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("synchronized_standby_slots is empty")
            && said.contains("ALTER SYSTEM SET synchronized_standby_slots = 'standby1'"),
        "{said}"
    );
    // On the primary only (the standby's copy of the configuration would make its own
    // walsenders wait for a slot it does not have once promoted): synchronous commit, so
    // every acknowledged commit exists on the standby too, and logical decoding held back
    // until the standby has the WAL, so its copy of the slot is never ahead of it.
    for setting in [
        "ALTER SYSTEM SET synchronous_standby_names = '*'",
        "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'",
        "SELECT pg_reload_conf()",
    ] {
        stack.db.batch_execute(setting).await.unwrap();
    }
    let mut args = vec!["--slot-failover"];
    if exactly_once {
        args.push("--exactly-once");
    }
    let relay =
        RelayProcess::spawn(Path::new(RELAY), &stack.relay_args_as(&url, &args), &[]).unwrap();
    stack.wait_for_slot(SLOT, &relay).await;

    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU64::new(0));
    let writer = spawn_writer(url.clone(), stop.clone(), next.clone());
    // The standby holds a synchronized copy of the slot.
    let standby_db = standby.connect().await.unwrap();
    let report = || format!("relay:\n{}\nstandby:\n{}", relay.log(), standby.log());
    wait_for_synchronized_copy(&standby_db, &report).await;
    // status and the metric say the slot survives a failover.
    let out = std::process::Command::new(RELAY)
        .args(["status", "--postgres-url", &url, "--output", "json"])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["failover_ready"], true, "{status}");
    let address = outbox_relay_testkit::http::metrics_address(&relay);
    wait_for(
        "outbox_relay_slot_failover_ready stays 0",
        Duration::from_secs(30),
        &report,
        async || {
            let body = outbox_relay_testkit::http::get(&address, "/metrics").1;
            outbox_relay_testkit::http::metric(&body, "outbox_relay_slot_failover_ready") == 1.0
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The primary crashes; the standby is promoted; the writer goes on against it.
    stack.pg.stop_immediate().unwrap();
    let written_before = next.load(Ordering::Relaxed);
    standby.promote().unwrap();
    let promoted_at = Instant::now();
    let first_after = Arc::new(Mutex::new(None::<u64>));
    let new_db = standby.connect().await.unwrap();
    wait_for(
        "the writer never wrote to the new primary",
        Duration::from_secs(60),
        &report,
        async || {
            let n = next.load(Ordering::Relaxed);
            if n > written_before {
                *first_after.lock().unwrap() = Some(n - 1);
                true
            } else {
                false
            }
        },
    )
    .await;
    let first_after = first_after.lock().unwrap().unwrap();
    // The time from promotion to the first event written after it relayed.
    let mut relayed_after = None;
    wait_for(
        "no event written after the promotion reached Kafka",
        Duration::from_secs(120),
        &report,
        async || {
            let found = read_all_events(&stack)
                .await
                .map(|events| events.iter().any(|(_, n)| *n >= first_after))
                .unwrap_or(false);
            if found && relayed_after.is_none() {
                relayed_after = Some(promoted_at.elapsed());
            }
            found
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let acknowledged = writer.await.unwrap();
    outbox_relay_testkit::wait_delivered(&new_db, SLOT, Duration::from_secs(120), report).await;

    // Every row of the new primary is in Kafka, in order per aggregate.
    let rows: HashSet<u64> = new_db
        .query("SELECT (payload->>'n')::int8 FROM outbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, i64>(0) as u64)
        .collect();
    let missing_commits: Vec<&u64> = acknowledged.iter().filter(|n| !rows.contains(n)).collect();
    assert!(
        missing_commits.is_empty(),
        "acknowledged commits missing on the promoted standby (synchronous commit): {missing_commits:?}"
    );
    let events = read_all_events(&stack).await.unwrap();
    let in_kafka: HashSet<u64> = events.iter().map(|(_, n)| *n).collect();
    let lost: Vec<&u64> = rows.iter().filter(|n| !in_kafka.contains(n)).collect();
    assert!(
        lost.is_empty(),
        "rows of the new primary not in Kafka: {lost:?}\n{}",
        relay.log()
    );
    // Order is kept per key within a topic (the topic comes from the aggregate type).
    let mut per_key: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
    for (record, n) in &events {
        per_key
            .entry((
                TYPES[(n % 4) as usize].to_owned(),
                record.key_str().unwrap().to_owned(),
            ))
            .or_default()
            .push(*n);
    }
    for (key, ns) in &per_key {
        let mut seen = HashSet::new();
        let firsts: Vec<u64> = ns.iter().copied().filter(|n| seen.insert(*n)).collect();
        assert!(
            firsts.windows(2).all(|w| w[0] < w[1]),
            "{key:?}: out of order {firsts:?}"
        );
    }
    let duplicated = events.len() - in_kafka.len();
    if exactly_once {
        assert_eq!(
            duplicated, 0,
            "--exactly-once: duplicates after the failover"
        );
    }
    eprintln!(
        "PostgreSQL {major}{}: {} rows, {} events ({duplicated} duplicated); the first event written after the promotion \
         reached Kafka {:.1} s after it",
        if exactly_once { " --exactly-once" } else { "" },
        rows.len(),
        events.len(),
        relayed_after.unwrap().as_secs_f64()
    );
    assert!(relay.log().contains("a failover"), "{}", relay.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_on_postgresql_17_loses_nothing() {
    failover(17, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_on_postgresql_18_with_exactly_once_loses_and_duplicates_nothing() {
    failover(18, true).await;
}

/// A multi-host URL: a dead first host is passed over (within connect_timeout), and so is
/// a standby when the session needs read-write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_host_url_passes_over_a_dead_host_and_a_standby() {
    let stack = Stack::start().await;
    let standby = stack
        .pg
        .start_standby("standby1", "")
        .unwrap_or_else(|e| panic!("a standby: {e:#}\n{}", stack.pg.log()));
    let dead = outbox_relay_testkit::net::free_port();
    let url = multi_host_url(&[dead, standby.port(), stack.pg.port()], "");
    let relay =
        RelayProcess::spawn(Path::new(RELAY), &stack.relay_args_as(&url, &[]), &[]).unwrap();
    stack.wait_for_slot(SLOT, &relay).await;
    insert_events(&stack.db, 0, 50, 10, 5).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    assert_eq!(lost_and_duplicated(&stack, 50).await, (0, 0));
    let log = relay.log();
    assert!(
        log.contains(&format!("port={}", stack.pg.port())) && log.contains("read-write"),
        "the chosen server is logged:\n{log}"
    );
    // A URL none of whose servers takes writes: the reason names each one.
    let only_standby = multi_host_url(&[dead, standby.port()], "");
    let out = std::process::Command::new(RELAY)
        .args([
            "check",
            "--postgres-url",
            &only_standby,
            "--bootstrap-servers",
        ])
        .arg(stack.broker.bootstrap_servers())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("a standby (in recovery)") && said.contains("read-write"),
        "{said}"
    );
}

/// Capture from a hot standby (PostgreSQL 16+): the slot lives on the standby, the
/// publication and the relay's bookkeeping are written on the primary (--primary-url), and
/// events committed on the primary reach Kafka through the standby. Without --primary-url,
/// what needs writes is refused with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_from_a_standby_with_writes_on_the_primary() {
    let primary =
        PgCluster::start_version(16, "").unwrap_or_else(|e| panic!("PostgreSQL 16: {e:#}"));
    let standby = primary
        .start_standby("standby1", "")
        .unwrap_or_else(|e| panic!("a standby of PostgreSQL 16: {e:#}\n{}", primary.log()));
    let broker = Broker::start(Storage::Sqlite).unwrap_or_else(|e| panic!("Apache Kafka: {e:#}"));
    let stack = Stack::of(primary, broker).await;
    let relay = RelayProcess::spawn(
        Path::new(RELAY),
        &stack.relay_args_as(&standby.url(), &["--primary-url", &stack.pg.url()]),
        &[],
    )
    .unwrap();
    let standby_db = standby.connect().await.unwrap();
    let report = || format!("relay:\n{}\nstandby:\n{}", relay.log(), standby.log());
    wait_for(
        "no slot streamed from on the standby",
        Duration::from_secs(90),
        &report,
        async || {
            standby_db
                .query_one(
                    "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active",
                    &[&SLOT],
                )
                .await
                .map(|r| r.get::<_, i64>(0) == 1)
                .unwrap_or(false)
        },
    )
    .await;
    insert_events(&stack.db, 0, 100, 10, 10).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (lost, _) = lost_and_duplicated(&stack, 100).await;
        if lost == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{lost} events of the primary not relayed through the standby:\n{}",
            report()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(lost_and_duplicated(&stack, 100).await, (0, 0));
    let on_primary: i64 = stack
        .db
        .query_one(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1",
            &[&SLOT],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(on_primary, 0, "the slot lives on the standby");
    let log = relay.log();
    assert!(log.contains("capturing from a standby"), "{log}");

    // snapshot.mode=initial on the standby: the rows already in the outbox, read in the
    // snapshot the standby's new slot exported; its progress kept on the primary.
    let dir = tempfile::tempdir().unwrap();
    let connector = outbox_connector(
        dir.path(),
        "snap",
        &[
            ("publication.name", "outbox_relay"),
            ("snapshot.mode", "initial"),
            (
                "transforms.outbox.route.topic.replacement",
                "snap.${routedByValue}",
            ),
        ],
    );
    let snap = RelayProcess::spawn(
        Path::new(RELAY),
        &stack.relay_args_as(
            &standby.url(),
            &[
                "--debezium-config",
                &connector,
                "--primary-url",
                &stack.pg.url(),
            ],
        ),
        &[],
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut n = 0;
        let topics = stack.topics().await;
        for t in TYPES {
            if topics.contains(&format!("snap.{t}")) {
                n += stack.read_topic(&format!("snap.{t}")).await.len();
            }
        }
        if n >= 100 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{n} of 100 rows snapshotted from the standby:\n{}\n{}",
            snap.log(),
            standby.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let completed: bool = stack
        .db
        .query_one(
            "SELECT completed FROM outbox_relay_snapshots WHERE slot_name = 'snap'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(completed, "the snapshot's progress is kept on the primary");
    drop(snap);

    // Without --primary-url: a publication that does not exist cannot be made there.
    let mut refused = RelayProcess::spawn(
        Path::new(RELAY),
        &stack.relay_args_as(
            &standby.url(),
            &["--slot", "other", "--publication", "other_pub"],
        ),
        &[],
    )
    .unwrap();
    let status = refused.wait_timeout(Duration::from_secs(60)).unwrap();
    let said = refused.log();
    assert!(status.is_some_and(|s| !s.success()), "{said}");
    assert!(
        said.contains("cannot be created or changed on a standby")
            && said.contains("--primary-url"),
        "{said}"
    );

    // --cleanup deletes through the primary: the relayed rows leave the outbox, and no delete
    // is tried on the read-only standby.
    drop(relay);
    let cleaner = RelayProcess::spawn(
        Path::new(RELAY),
        &stack.relay_args_as(
            &standby.url(),
            &[
                "--primary-url",
                &stack.pg.url(),
                "--cleanup",
                "--cleanup-interval",
                "1",
            ],
        ),
        &[],
    )
    .unwrap();
    let before: i64 = stack
        .db
        .query_one("SELECT count(*) FROM outbox", &[])
        .await
        .unwrap()
        .get(0);
    wait_for(
        "the relay with --cleanup never streamed",
        Duration::from_secs(60),
        &|| cleaner.log(),
        async || cleaner.log().contains("streaming"),
    )
    .await;
    insert_events(&stack.db, 100, 20, 10, 10).await.unwrap();
    wait_for(
        "--cleanup did not delete the relayed rows on the primary",
        Duration::from_secs(60),
        &|| cleaner.log(),
        async || {
            stack
                .db
                .query_one("SELECT count(*) FROM outbox", &[])
                .await
                .map(|r| r.get::<_, i64>(0) == before)
                .unwrap_or(false)
        },
    )
    .await;
    let log = cleaner.log();
    assert!(!log.contains("read-only"), "{log}");
}

/// A graceful stop while a failover happens. The relay streams from the primary; an
/// asynchronous standby fell behind and is promoted; the primary takes no new login of the
/// relay's role any more, so a new connection to the URL reaches the promoted server. The
/// stop's last position, confirmed to the old primary, is past where the promoted server
/// branched off: recorded there, it would skip the commits the promoted server made in
/// between. They reach Kafka once a relay starts against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_during_a_failover_records_its_position_only_where_it_belongs() {
    let primary =
        PgCluster::start_version(17, "").unwrap_or_else(|e| panic!("PostgreSQL 17: {e:#}"));
    // The relay's role, in the catalog the standby copies.
    primary
        .connect()
        .await
        .unwrap()
        .batch_execute("CREATE ROLE relayer LOGIN SUPERUSER REPLICATION PASSWORD 'relayer-pw'")
        .await
        .unwrap();
    let standby = primary
        .start_standby("standby1", "")
        .unwrap_or_else(|e| panic!("a standby of PostgreSQL 17: {e:#}\n{}", primary.log()));
    let (primary_port, standby_port) = (primary.port(), standby.port());
    let broker = Broker::start(Storage::Sqlite).unwrap_or_else(|e| panic!("Apache Kafka: {e:#}"));
    let stack = Stack::of(primary, broker).await;
    let url = format!(
        "postgres://relayer:relayer-pw@127.0.0.1:{primary_port},127.0.0.1:{standby_port}/postgres\
         ?target_session_attrs=read-write&connect_timeout=2"
    );
    let mut relay = RelayProcess::spawn(
        Path::new(RELAY),
        &stack.relay_args_as(&url, &["--slot-failover"]),
        &[],
    )
    .unwrap();
    stack.wait_for_slot(SLOT, &relay).await;
    let standby_db = standby.connect().await.unwrap();
    let report = || format!("relay:\n{}\nstandby:\n{}", relay.log(), standby.log());
    wait_for_synchronized_copy(&standby_db, &report).await;
    // The standby falls behind: it receives nothing more.
    standby_db
        .batch_execute("ALTER SYSTEM SET primary_conninfo = ''")
        .await
        .unwrap();
    standby_db
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    wait_for(
        "the standby still receives",
        Duration::from_secs(30),
        &report,
        async || {
            standby_db
                .query_one("SELECT count(*) FROM pg_stat_wal_receiver", &[])
                .await
                .map(|r| r.get::<_, i64>(0) == 0)
                .unwrap_or(false)
        },
    )
    .await;
    // The primary's events, relayed and confirmed there, with WAL well past the standby's.
    insert_padded_events(&stack.db, 0, 200, 10, 10, 4000)
        .await
        .unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let confirmed = stack.confirmed_flush_lsn(SLOT).await.unwrap();
    // The primary takes no new login of the relay's role; the relay's open connections go on.
    stack
        .db
        .batch_execute("ALTER ROLE relayer NOLOGIN")
        .await
        .unwrap();
    standby.promote().unwrap();
    let promoted = standby.connect().await.unwrap();
    // Commits on the new timeline, below the position the relay confirmed to the old primary.
    insert_events(&promoted, 200, 20, 10, 10).await.unwrap();
    let end: String = promoted
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .unwrap()
        .get(0);
    let end = outbox_relay_testkit::Lsn::parse(&end).unwrap();
    assert!(
        end < confirmed,
        "the promoted server's commits ({end}) are below {confirmed}"
    );

    // The graceful stop.
    let status = std::process::Command::new("kill")
        .args(["-TERM", &relay.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    relay
        .wait_timeout(Duration::from_secs(60))
        .unwrap()
        .unwrap_or_else(|| panic!("the relay did not stop:\n{}", relay.log()));
    let after: Option<String> = promoted
        .query_one(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&SLOT],
        )
        .await
        .unwrap()
        .get(0);
    let after = after
        .and_then(|l| outbox_relay_testkit::Lsn::parse(&l))
        .unwrap();
    assert!(
        after < end,
        "the promoted server's slot was moved to {after}, past its own commits (up to {end}):\n{}",
        relay.log()
    );

    // A relay against the promoted server relays its commits.
    let relay = RelayProcess::spawn(
        Path::new(RELAY),
        &stack.relay_args_as(&standby.url(), &[]),
        &[],
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = read_all_events(&stack).await.unwrap_or_default();
        let found = (200..220u64)
            .filter(|n| events.iter().any(|(_, e)| e == n))
            .count();
        if found == 20 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{found} of the promoted server's 20 events relayed:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
