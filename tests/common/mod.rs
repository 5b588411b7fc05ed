//! Shared set-up for the end-to-end tests: a real PostgreSQL, a real Apache Kafka broker and
//! the real `outbox-relay` binary.
#![allow(dead_code)]

use anyhow::{bail, Result};
use outbox_relay_testkit::{Broker, Lsn, PgCluster, RelayProcess, Storage};
use std::time::Duration;

pub const RELAY: &str = env!("CARGO_BIN_EXE_outbox-relay");
pub const OUTBOX_DDL: &str = include_str!("../../sql/outbox.sql");

pub struct Stack {
    pub pg: PgCluster,
    pub broker: Broker,
    pub db: tokio_postgres::Client,
}

impl Stack {
    /// PostgreSQL with the outbox table, and an Apache Kafka broker.
    pub async fn start() -> Stack {
        Self::start_with(Storage::Sqlite).await
    }

    /// `storage` is kept for the tests' own words: both kinds are Apache Kafka, durable on
    /// disk (`testkit::broker::Storage`).
    pub async fn start_with(storage: Storage) -> Stack {
        Self::start_with_schema(storage, OUTBOX_DDL).await
    }

    /// The given PostgreSQL (a version, a configuration) with the outbox table, and the given
    /// broker (a policy, a listener).
    pub async fn of(pg: PgCluster, broker: Broker) -> Stack {
        Self::of_schema(pg, broker, OUTBOX_DDL).await
    }

    /// `pg` with `ddl` applied, and `broker`.
    async fn of_schema(pg: PgCluster, broker: Broker, ddl: &str) -> Stack {
        let db = pg.connect().await.expect("connect to the test cluster");
        db.batch_execute(ddl)
            .await
            .expect("create the outbox table");
        Stack { pg, broker, db }
    }

    /// PostgreSQL with `ddl` applied (another outbox shape), and a broker.
    pub async fn start_with_schema(storage: Storage, ddl: &str) -> Stack {
        Self::start_with_postgres_config(storage, ddl, "").await
    }

    /// PostgreSQL with `postgres_config` appended to postgresql.conf and `ddl` applied.
    pub async fn start_with_postgres_config(
        storage: Storage,
        ddl: &str,
        postgres_config: &str,
    ) -> Stack {
        let pg = PgCluster::start_with_config(postgres_config)
            .unwrap_or_else(|e| panic!("cannot start PostgreSQL for this test: {e:#}"));
        let broker = Broker::start(storage)
            .unwrap_or_else(|e| panic!("cannot start Apache Kafka for this test: {e:#}"));
        Self::of_schema(pg, broker, ddl).await
    }

    pub fn relay_args(&self, extra: &[&str]) -> Vec<String> {
        self.relay_args_as(&self.pg.url(), extra)
    }

    /// Arguments of `run` connecting with `postgres_url` (another role, TLS, ...).
    pub fn relay_args_as(&self, postgres_url: &str, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "run".into(),
            "--postgres-url".into(),
            postgres_url.to_owned(),
            "--bootstrap-servers".into(),
            self.broker.bootstrap_servers(),
            "--topic-replication-factor".into(),
            "1".into(),
            "--status-interval-ms".into(),
            "100".into(),
            "--metrics-address".into(),
            "127.0.0.1:0".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// The relay connecting with `postgres_url`, with extra arguments and environment.
    pub fn spawn_relay_as(
        &self,
        postgres_url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> RelayProcess {
        RelayProcess::spawn(
            std::path::Path::new(RELAY),
            &self.relay_args_as(postgres_url, extra),
            env,
        )
        .expect("start outbox-relay")
    }

    /// Runs the relay until it exits by itself (a refusal); panics if it keeps running.
    /// Returns whether it succeeded, and its log.
    pub fn run_until_exit(&self, extra: &[&str]) -> (bool, String) {
        let mut relay = self.spawn_relay(extra);
        let status = relay
            .wait_timeout(Duration::from_secs(30))
            .unwrap()
            .unwrap_or_else(|| panic!("the relay kept running:\n{}", relay.log()));
        (status.success(), relay.log())
    }

    /// `outbox-relay check` with the settings `run` gets: (exit code, stdout).
    pub fn check(&self, extra: &[&str]) -> (Option<i32>, String) {
        self.check_as(&self.pg.url(), extra)
    }

    /// `check` connecting with `postgres_url`: its exit code and stdout.
    pub fn check_as(&self, postgres_url: &str, extra: &[&str]) -> (Option<i32>, String) {
        let (code, stdout, _) = self.command_as(postgres_url, &["check"], extra);
        (code, stdout)
    }

    /// `outbox-relay <words…>` (a command of `run`'s settings: `check`, `dead-letters replay`)
    /// with the settings `run` gets and `extra`: its exit code, stdout and stderr.
    pub fn command(&self, words: &[&str], extra: &[&str]) -> (Option<i32>, String, String) {
        self.command_as(&self.pg.url(), words, extra)
    }

    /// [`Self::command`] connecting with `postgres_url`.
    pub fn command_as(
        &self,
        postgres_url: &str,
        words: &[&str],
        extra: &[&str],
    ) -> (Option<i32>, String, String) {
        let mut args = self.relay_args_as(postgres_url, extra);
        args.splice(0..1, words.iter().map(|w| w.to_string()));
        let out = std::process::Command::new(RELAY)
            .args(&args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub fn spawn_relay(&self, extra: &[&str]) -> RelayProcess {
        RelayProcess::spawn(std::path::Path::new(RELAY), &self.relay_args(extra), &[])
            .expect("start outbox-relay")
    }

    pub async fn current_wal_lsn(&self) -> Lsn {
        outbox_relay_testkit::current_wal_lsn(&self.db).await
    }

    pub async fn confirmed_flush_lsn(&self, slot: &str) -> Option<Lsn> {
        outbox_relay_testkit::confirmed_flush_lsn(&self.db, slot).await
    }

    /// Waits until the slot's confirmed position reaches `target`: the relay's promise that
    /// everything committed before it is in Kafka.
    pub async fn wait_confirmed(
        &self,
        slot: &str,
        target: Lsn,
        timeout: Duration,
        relay: Option<&RelayProcess>,
    ) -> Duration {
        outbox_relay_testkit::wait_confirmed(&self.db, slot, target, timeout, || {
            relay.map(failure_report).unwrap_or_default()
        })
        .await
    }

    /// Waits until everything written so far is delivered (the slot confirms the current WAL
    /// position); returns that position.
    pub async fn wait_delivered(
        &self,
        slot: &str,
        timeout: Duration,
        relay: Option<&RelayProcess>,
    ) -> Lsn {
        outbox_relay_testkit::wait_delivered(&self.db, slot, timeout, || {
            relay.map(failure_report).unwrap_or_default()
        })
        .await
    }

    /// Waits until the relay created its slot and confirmed a first position.
    /// The slot exists and a walsender holds it (the relay streams, or is about to): a
    /// second instance started now stands by, and what commits now is relayed.
    pub async fn wait_for_slot(&self, slot: &str, relay: &RelayProcess) {
        self.wait_confirmed(slot, Lsn::from_u64(1), Duration::from_secs(30), Some(relay))
            .await;
        self.wait_slot_held(slot, Duration::from_secs(30), || relay.log())
            .await;
    }

    /// Waits until a walsender holds `slot` (its client streams, or is about to); `logs` says
    /// what the clients did when it does not within `within`.
    pub async fn wait_slot_held(&self, slot: &str, within: Duration, logs: impl Fn() -> String) {
        let deadline = std::time::Instant::now() + within;
        loop {
            let held: Option<bool> = self
                .db
                .query_opt(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                    &[&slot],
                )
                .await
                .unwrap()
                .map(|r| r.get(0));
            if held == Some(true) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no walsender holds slot {slot} after {within:?}\n{}",
                logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn read_topic(&self, topic: &str) -> Vec<outbox_relay_testkit::ConsumedRecord> {
        let bootstrap = self.broker.bootstrap_servers();
        let topic = topic.to_owned();
        // Every broker is Apache Kafka: read to each partition's high watermark (a reader
        // that stops after a quiet spell, as tansu's wrong watermarks once needed, can stop
        // before a slow fetch and miss records).
        tokio::task::spawn_blocking(move || outbox_relay_testkit::read_topic(&bootstrap, &topic))
            .await
            .unwrap()
            .unwrap_or_else(|e| {
                let log = self.broker.log();
                let tail: String = log
                    .lines()
                    .rev()
                    .take(40)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                panic!("reading back: {e:#}\nbroker log (last 40 lines):\n{tail}")
            })
    }

    pub async fn topics(&self) -> Vec<String> {
        let bootstrap = self.broker.bootstrap_servers();
        tokio::task::spawn_blocking(move || outbox_relay_testkit::kafka::list_topics(&bootstrap))
            .await
            .unwrap()
            .unwrap()
    }
}

/// What a test that waited in vain shows of a relay: its threads as the kernel sees them
/// (spinning or blocked), then its log.
fn failure_report(relay: &RelayProcess) -> String {
    format!("relay threads: {}\n{}", relay.threads(), relay.log())
}

/// Inserts `count` events in transactions of `per_tx` rows through one statement per
/// transaction. Event number n: aggregate type `TYPES[n % 4]`, aggregate id
/// `agg-<n % aggregates>`, payload `{"n": n}`; ids are deterministic uuids.
pub async fn insert_events(
    db: &tokio_postgres::Client,
    first: u64,
    count: u64,
    per_tx: u64,
    aggregates: u64,
) -> Result<()> {
    insert_padded_events(db, first, count, per_tx, aggregates, 0).await
}

/// [`insert_events`] with `pad` more bytes in each payload (`{"n": n, "pad": "xx…"}`;
/// `{"n": n}` when `pad` is 0).
pub async fn insert_padded_events(
    db: &tokio_postgres::Client,
    first: u64,
    count: u64,
    per_tx: u64,
    aggregates: u64,
    pad: usize,
) -> Result<()> {
    let payload = if pad == 0 {
        "jsonb_build_object('n', g)".to_string()
    } else {
        format!("jsonb_build_object('n', g, 'pad', repeat('x', {pad}))")
    };
    let mut n = first;
    let end = first + count;
    while n < end {
        let batch_end = (n + per_tx).min(end);
        let sql = format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) \
             SELECT ('00000000-0000-0000-0000-' || lpad(to_hex(g), 12, '0'))::uuid, \
                    (ARRAY['Order','Customer','Invoice','Shipment'])[g % 4 + 1], \
                    'agg-' || (g % {aggregates}), 'Event' || g, {payload} \
             FROM generate_series({n}, {}) g",
            batch_end - 1
        );
        db.batch_execute(&sql).await?;
        n = batch_end;
    }
    Ok(())
}

pub const TYPES: [&str; 4] = ["Order", "Customer", "Invoice", "Shipment"];

pub fn event_uuid(n: u64) -> String {
    format!("00000000-0000-0000-0000-{n:012x}")
}

/// Reads every `<type>.events` topic and returns event numbers per record (from the `id`
/// header), checking each record's routing on the way.
pub async fn read_all_events(
    stack: &Stack,
) -> Result<Vec<(outbox_relay_testkit::ConsumedRecord, u64)>> {
    let mut out = Vec::new();
    for t in TYPES {
        let topic = format!("{t}.events");
        if !stack.topics().await.contains(&topic) {
            continue;
        }
        for r in stack.read_topic(&topic).await {
            let id = r.header_str("id").to_owned();
            let n = u64::from_str_radix(id.rsplit('-').next().unwrap(), 16).unwrap();
            if TYPES[(n % 4) as usize] != t {
                bail!("event {n} on topic {topic}");
            }
            out.push((r, n));
        }
    }
    Ok(out)
}

impl Stack {
    /// Starts the relay and waits until its slot exists: writes from then on are events.
    pub async fn spawn_relay_and_wait_for_slot(&self, slot: &str, extra: &[&str]) -> RelayProcess {
        let relay = self.spawn_relay(extra);
        self.wait_for_slot(slot, &relay).await;
        relay
    }
}

/// Where the records read back came from, for a test that found events `missing`: each
/// partition's watermarks against the offsets read (a gap is the reader's miss, no gap the
/// broker's or the relay's), and whether a second read finds the missing events.
pub async fn loss_report(
    stack: &Stack,
    records: &[(outbox_relay_testkit::ConsumedRecord, u64)],
    missing: &[usize],
) -> String {
    let bootstrap = stack.broker.bootstrap_servers();
    let mut report = String::new();
    for t in TYPES {
        let topic = format!("{t}.events");
        let (b, name) = (bootstrap.clone(), topic.clone());
        let Ok(Ok(marks)) =
            tokio::task::spawn_blocking(move || outbox_relay_testkit::kafka::watermarks(&b, &name))
                .await
        else {
            continue;
        };
        for (p, low, high) in marks {
            let read: std::collections::BTreeSet<i64> = records
                .iter()
                .filter(|(r, _)| r.topic == topic && r.partition == p)
                .map(|(r, _)| r.offset)
                .collect();
            let gaps: Vec<i64> = (low..high).filter(|o| !read.contains(o)).take(10).collect();
            report.push_str(&format!(
                "{topic}[{p}]: watermarks {low}..{high}, {} offsets read, first {:?}, offsets not read {gaps:?}\n",
                read.len(),
                read.first()
            ));
        }
    }
    match read_all_events(stack).await {
        Ok(again) => {
            let found: Vec<String> = again
                .iter()
                .filter(|(_, n)| missing.contains(&(*n as usize)))
                .map(|(r, n)| format!("{n} at {}[{}]@{}", r.topic, r.partition, r.offset))
                .collect();
            report.push_str(&format!(
                "a second read: {} records; of the missing events it found {found:?}\n",
                again.len()
            ));
        }
        Err(e) => report.push_str(&format!("a second read failed: {e:#}\n")),
    }
    report
}

/// (lost, duplicated) among events `0..total` on the `<type>.events` topics.
pub async fn lost_and_duplicated(stack: &Stack, total: u64) -> (usize, u32) {
    let mut counts = vec![0u32; total as usize];
    for (_, n) in read_all_events(stack).await.unwrap() {
        counts[n as usize] += 1;
    }
    let lost = counts.iter().filter(|c| **c == 0).count();
    let duplicated = counts.iter().map(|c| c.saturating_sub(1)).sum();
    (lost, duplicated)
}

/// A Debezium connector configuration for `sql/outbox.sql`'s table (`aggregate_type`
/// routes, `aggregate_id` keys), with `extra` options on top, written to `dir`; its path.
pub fn outbox_connector(dir: &std::path::Path, slot: &str, extra: &[(&str, &str)]) -> String {
    let mut config = serde_json::json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": "ignored",
        "database.user": "ignored",
        "database.dbname": "ignored",
        "topic.prefix": "app",
        "slot.name": slot,
        "table.include.list": "public.outbox",
        "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.route.by.field": "aggregate_type",
        "transforms.outbox.table.field.event.key": "aggregate_id",
        "transforms.outbox.route.topic.replacement": "${routedByValue}.events"
    });
    for (k, v) in extra {
        config[*k] = serde_json::Value::String((*v).to_owned());
    }
    let path = dir.join(format!("{slot}.json"));
    std::fs::write(
        &path,
        serde_json::to_vec(&serde_json::json!({ "name": slot, "config": config })).unwrap(),
    )
    .unwrap();
    path.display().to_string()
}
