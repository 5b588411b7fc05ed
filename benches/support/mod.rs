//! What several benchmarks share: reading a process's CPU time, slot positions, writing the
//! benchmark's outbox WAL; and the `--exactly-once` cost measurement.

pub mod exactly_once_cost;

pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub const CLOCK_TICKS_PER_SEC: f64 = 100.0;

/// utime + stime of a process, in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / CLOCK_TICKS_PER_SEC)
}

/// The slot's `confirmed_flush_lsn` as a number (0 before the first confirmation).
pub async fn confirmed(db: &tokio_postgres::Client, slot: &str) -> u64 {
    db.query_one(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
        &[&slot],
    )
    .await
    .unwrap()
    .get::<_, Option<String>>(0)
    .map(|s| lsn(&s))
    .unwrap_or(0)
}

pub fn lsn(text: &str) -> u64 {
    let (hi, lo) = text.split_once('/').unwrap();
    (u64::from_str_radix(hi, 16).unwrap() << 32) | u64::from_str_radix(lo, 16).unwrap()
}

pub async fn current_wal_lsn(db: &tokio_postgres::Client) -> u64 {
    lsn(db
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .unwrap()
        .get(0))
}

/// Writes `events` outbox rows (~500 B payloads, 4 aggregate types, 1,000 keys) in
/// transactions of `per_tx`; returns the WAL position after the last commit.
pub async fn write_outbox(db: &tokio_postgres::Client, events: u64, per_tx: u64) -> u64 {
    db.batch_execute(&format!(
        "DO $$ BEGIN
           FOR t IN 0..{} LOOP
             INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
             SELECT gen_random_uuid(), (ARRAY['Order','Customer','Invoice','Shipment'])[g % 4 + 1], 'agg-' || (g % 1000),
                    'Created', jsonb_build_object('n', g, 'note', repeat('x', 150))
             FROM generate_series(t * {per_tx}, t * {per_tx} + {per_tx} - 1) g;
             COMMIT;
           END LOOP;
         END $$",
        events / per_tx - 1
    ))
    .await
    .unwrap();
    current_wal_lsn(db).await
}
