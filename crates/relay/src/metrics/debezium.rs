//! Debezium's metric names beside the relay's own: the attributes of the PostgreSQL
//! connector's streaming and snapshot MBeans (`debezium.postgres:type=connector-metrics,
//! context=streaming|snapshot,server=<topic.prefix>`) as the JMX exporter configuration of
//! Debezium's monitoring example turns them into Prometheus series:
//! `debezium_metrics_<Attribute>{context="streaming",name="<topic.prefix>",plugin="postgres"}`,
//! and `RowsScanned` with a `table` label. A dashboard or alert built on them reads the same
//! series from the relay. Attributes the exporter drops (strings, arrays) are not served.
//!
//! With them, per process, the other series the same dashboard charts, carrying the
//! process's own figures: the JVM's (`jvm_memory_bytes_used`, `jvm_threads_current`, …) with
//! resident memory for the heap, the memory limit for its maximum and the process's threads;
//! and Kafka Connect's network rates (`kafka_connect_metrics_incoming_byte_rate`,
//! `…_outgoing_byte_rate`, by `client`) from the producers' librdkafka statistics.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

/// What the Debezium series of one connector need beyond the relay's own metrics.
#[derive(Default)]
pub struct DebeziumSeries {
    /// `topic.prefix`: the `name` label (Debezium's `server` key).
    server: Mutex<Option<String>>,
    /// Change events of the captured tables seen by the streaming source.
    pub(super) creates: AtomicU64,
    pub(super) updates: AtomicU64,
    pub(super) deletes: AtomicU64,
    /// Changes of other tables of the publication (Debezium's events filtered).
    pub(super) filtered: AtomicU64,
    pub(super) transactions: AtomicU64,
    /// When the streaming source last saw a change, ms since the epoch (0: never).
    pub(super) last_event_ms: AtomicI64,
    /// The in-flight window (Debezium's `max.queue.size`).
    pub(super) queue_capacity: AtomicU64,
    snapshot: Mutex<Option<Snapshot>>,
    /// Whether this process's series (the JVM names) are written with this connector's.
    pub(super) process: AtomicBool,
}

/// The snapshot of this run, once one started or was skipped (Debezium's `SnapshotMeter`).
struct Snapshot {
    /// Each table with the rows scanned once it is done (the one in progress: the
    /// `snapshot_rows_done` gauge).
    tables: Vec<(String, Option<u64>)>,
    started_ms: i64,
    /// 0 while running.
    ended_ms: i64,
    completed: bool,
    skipped: bool,
}

impl DebeziumSeries {
    /// Serves the series under `server` (the connector's `topic.prefix`).
    pub fn enable(&self, server: &str, queue_capacity: usize) {
        NETWORK_WANTED.store(true, Ordering::Relaxed);
        *self.server.lock().unwrap_or_else(|p| p.into_inner()) = Some(server.to_owned());
        self.queue_capacity
            .store(queue_capacity as u64, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.server
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// A transaction's changes of the captured tables, and of others, counted at its commit.
    pub fn committed(&self, creates: u64, updates: u64, deletes: u64, filtered: u64) {
        self.filtered.fetch_add(filtered, Ordering::Relaxed);
        self.creates.fetch_add(creates, Ordering::Relaxed);
        self.updates.fetch_add(updates, Ordering::Relaxed);
        self.deletes.fetch_add(deletes, Ordering::Relaxed);
        self.transactions.fetch_add(1, Ordering::Relaxed);
        if creates + updates + deletes > 0 {
            self.last_event_ms.store(super::now_ms(), Ordering::Relaxed);
        }
    }

    /// A snapshot of `tables` starts.
    pub fn snapshot_started(&self, tables: &[String]) {
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner()) = Some(Snapshot {
            tables: tables.iter().map(|t| (t.clone(), None)).collect(),
            started_ms: super::now_ms(),
            ended_ms: 0,
            completed: false,
            skipped: false,
        });
    }

    /// Table `index` of the snapshot was scanned: `rows` rows.
    pub fn table_scanned(&self, index: usize, rows: u64) {
        if let Some(s) = self
            .snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            if let Some(table) = s.tables.get_mut(index) {
                table.1 = Some(rows);
            }
        }
    }

    /// A start without a snapshot to take (Debezium's `snapshotSkipped`).
    pub fn snapshot_skipped(&self) {
        let now = super::now_ms();
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner()) = Some(Snapshot {
            tables: Vec::new(),
            started_ms: now,
            ended_ms: now,
            completed: false,
            skipped: true,
        });
    }

    /// The snapshot ended: `completed`, or aborted (an error stopped it).
    pub fn snapshot_ended(&self, completed: bool) {
        if let Some(s) = self
            .snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            s.ended_ms = super::now_ms();
            s.completed = completed;
        }
    }

    /// The series as OpenMetrics text (no `# EOF`), from `m`'s figures now.
    pub(super) fn encode(&self, m: &super::Metrics, now_ms: i64) -> String {
        let Some(server) = self
            .server
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            return String::new();
        };
        let mut out = Out::default();
        let in_flight = m.in_flight.get().max(0) as u64;
        let capacity = self.queue_capacity.load(Ordering::Relaxed);
        let remaining = capacity.saturating_sub(in_flight);
        let streaming = format!(
            "context=\"streaming\",name=\"{}\",plugin=\"postgres\"",
            escape(&server)
        );
        let creates = self.creates.load(Ordering::Relaxed);
        let updates = self.updates.load(Ordering::Relaxed);
        let deletes = self.deletes.load(Ordering::Relaxed);
        let last = self.last_event_ms.load(Ordering::Relaxed);
        let since_last = if last == 0 {
            -1
        } else {
            (now_ms - last).max(0)
        };
        let lag_ms = (m.lag_seconds_at(crate::pg_time::now_micros()) * 1000.0).round() as i64;
        let erroneous = m.dead_letters_of("unroutable");
        for (attribute, value) in [
            ("Connected", m.streaming.get().to_string()),
            ("MilliSecondsSinceLastEvent", since_last.to_string()),
            (
                "TotalNumberOfEventsSeen",
                (creates + updates + deletes).to_string(),
            ),
            ("TotalNumberOfCreateEventsSeen", creates.to_string()),
            ("TotalNumberOfUpdateEventsSeen", updates.to_string()),
            ("TotalNumberOfDeleteEventsSeen", deletes.to_string()),
            (
                "NumberOfEventsFiltered",
                self.filtered.load(Ordering::Relaxed).to_string(),
            ),
            // Removed from Debezium in 0.10, still charted by its monitoring example.
            ("NumberOfEventsSkipped", "0".into()),
            ("NumberOfErroneousEvents", erroneous.to_string()),
            (
                "NumberOfCommittedTransactions",
                self.transactions.load(Ordering::Relaxed).to_string(),
            ),
            ("MilliSecondsBehindSource", lag_ms.to_string()),
            ("QueueTotalCapacity", capacity.to_string()),
            ("QueueRemainingCapacity", remaining.to_string()),
        ] {
            out.sample(attribute, &streaming, &value);
        }
        if let Some(s) = self
            .snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            let snapshot = format!(
                "context=\"snapshot\",name=\"{}\",plugin=\"postgres\"",
                escape(&server)
            );
            let running = s.ended_ms == 0;
            let current = m.snapshot_rows_done.get().max(0) as u64;
            // Rows per table: those scanned, and the one in progress so far.
            let in_progress = s.tables.iter().position(|(_, rows)| rows.is_none());
            let scanned: Vec<(&str, u64)> = s
                .tables
                .iter()
                .enumerate()
                .filter_map(|(i, (table, rows))| match rows {
                    Some(rows) => Some((table.as_str(), *rows)),
                    None if running && Some(i) == in_progress => Some((table.as_str(), current)),
                    None => None,
                })
                .collect();
            let rows: u64 = scanned.iter().map(|(_, r)| r).sum();
            let tables_left = s.tables.iter().filter(|(_, r)| r.is_none()).count();
            let end = if running { now_ms } else { s.ended_ms };
            let flag = |b: bool| if b { "1" } else { "0" }.to_owned();
            for (attribute, value) in [
                ("SnapshotRunning", flag(running)),
                ("SnapshotCompleted", flag(!running && s.completed)),
                (
                    "SnapshotAborted",
                    flag(!running && !s.completed && !s.skipped),
                ),
                ("SnapshotPaused", "0".into()),
                ("SnapshotSkipped", flag(s.skipped)),
                (
                    "SnapshotDurationInSeconds",
                    ((end - s.started_ms).max(0) / 1000).to_string(),
                ),
                ("SnapshotPausedDurationInSeconds", "0".into()),
                ("TotalTableCount", s.tables.len().to_string()),
                ("RemainingTableCount", tables_left.to_string()),
                ("TotalNumberOfEventsSeen", rows.to_string()),
                (
                    "MilliSecondsSinceLastEvent",
                    (now_ms - end).max(0).to_string(),
                ),
                ("NumberOfEventsFiltered", "0".into()),
                ("NumberOfEventsSkipped", "0".into()),
                ("NumberOfErroneousEvents", "0".into()),
                ("QueueTotalCapacity", capacity.to_string()),
                ("QueueRemainingCapacity", remaining.to_string()),
            ] {
                out.sample(attribute, &snapshot, &value);
            }
            for (table, rows) in scanned {
                out.sample(
                    "RowsScanned",
                    &format!("{snapshot},table=\"{}\"", escape(table)),
                    &rows.to_string(),
                );
            }
        }
        if self.process.load(Ordering::Relaxed) {
            out.text.push_str(&process_series());
        }
        out.finish()
    }
}

/// OpenMetrics lines, one family per attribute (its streaming and snapshot samples under one
/// `# TYPE` line), in the order first written.
#[derive(Default)]
struct Out {
    families: Vec<(String, Vec<String>)>,
    text: String,
}

impl Out {
    fn sample(&mut self, attribute: &str, labels: &str, value: &str) {
        let name = format!("debezium_metrics_{attribute}");
        let line = format!("{name}{{{labels}}} {value}");
        match self.families.iter_mut().find(|(n, _)| *n == name) {
            Some((_, lines)) => lines.push(line),
            None => self.families.push((name, vec![line])),
        }
    }

    fn finish(mut self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (name, lines) in &self.families {
            let _ = writeln!(out, "# TYPE {name} gauge");
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
        }
        out.push_str(&std::mem::take(&mut self.text));
        out
    }
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Whether producers report their network rates (librdkafka's statistics every
/// [`STATISTICS_INTERVAL_MS`]): set once a connector serves Debezium's series.
static NETWORK_WANTED: AtomicBool = AtomicBool::new(false);
pub const STATISTICS_INTERVAL_MS: u64 = 5_000;

/// Each producer's bytes received and sent per second, by client name.
static NETWORK: Mutex<std::collections::BTreeMap<String, NetworkRate>> =
    Mutex::new(std::collections::BTreeMap::new());

struct NetworkRate {
    /// When the statistics came (a stopped producer's stop coming).
    seen: std::time::Instant,
    at_us: i64,
    rx: u64,
    tx: u64,
    rx_rate: f64,
    tx_rate: f64,
}

pub fn network_rates_wanted() -> bool {
    NETWORK_WANTED.load(Ordering::Relaxed)
}

/// What is read of librdkafka's statistics (the rest of the JSON is skipped over).
#[derive(serde::Deserialize)]
struct Statistics {
    name: String,
    /// librdkafka's clock, microseconds.
    ts: i64,
    #[serde(default)]
    brokers: std::collections::HashMap<String, BrokerBytes>,
}

#[derive(serde::Deserialize)]
struct BrokerBytes {
    #[serde(default)]
    rxbytes: u64,
    #[serde(default)]
    txbytes: u64,
}

/// A producer's librdkafka statistics (their JSON): its totals over every broker, turned into
/// rates.
pub fn producer_statistics(json: &[u8]) {
    let Ok(stats) = serde_json::from_slice::<Statistics>(json) else {
        return;
    };
    let rx: u64 = stats.brokers.values().map(|b| b.rxbytes).sum();
    let tx: u64 = stats.brokers.values().map(|b| b.txbytes).sum();
    let mut all = NETWORK.lock().unwrap_or_else(|p| p.into_inner());
    let entry = all.entry(stats.name.clone()).or_insert(NetworkRate {
        seen: std::time::Instant::now(),
        at_us: stats.ts,
        rx,
        tx,
        rx_rate: 0.0,
        tx_rate: 0.0,
    });
    entry.seen = std::time::Instant::now();
    let seconds = (stats.ts - entry.at_us) as f64 / 1e6;
    if seconds > 0.0 {
        entry.rx_rate = rx.saturating_sub(entry.rx) as f64 / seconds;
        entry.tx_rate = tx.saturating_sub(entry.tx) as f64 / seconds;
        entry.at_us = stats.ts;
        entry.rx = rx;
        entry.tx = tx;
    }
}

/// The process's figures under the JVM and Kafka Connect names Debezium's dashboard charts.
pub fn process_series() -> String {
    static PEAK_THREADS: AtomicU64 = AtomicU64::new(0);
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    let rss = field("VmRSS:").unwrap_or(0) * 1024;
    let threads = field("Threads:").unwrap_or(0);
    let peak = PEAK_THREADS
        .fetch_max(threads, Ordering::Relaxed)
        .max(threads);
    let limit = memory_limit().unwrap_or(rss);
    format!(
        "# TYPE jvm_memory_bytes_used gauge\n\
         jvm_memory_bytes_used{{area=\"heap\"}} {rss}\n\
         # TYPE jvm_memory_bytes_max gauge\n\
         jvm_memory_bytes_max{{area=\"heap\"}} {limit}\n\
         # TYPE jvm_threads_current gauge\n\
         jvm_threads_current {threads}\n\
         # TYPE jvm_threads_peak gauge\n\
         jvm_threads_peak {peak}\n\
         # TYPE jvm_threads_started counter\n\
         jvm_threads_started_total {peak}\n{}",
        network_series()
    )
}

fn network_series() -> String {
    use std::fmt::Write;
    let mut all = NETWORK.lock().unwrap_or_else(|p| p.into_inner());
    // A producer that stopped reporting (its pipeline ended) is gone.
    let stale = std::time::Duration::from_millis(3 * STATISTICS_INTERVAL_MS);
    all.retain(|_, r| r.seen.elapsed() < stale);
    let mut out = String::new();
    for (direction, pick) in [
        (
            "incoming",
            (|r: &NetworkRate| r.rx_rate) as fn(&NetworkRate) -> f64,
        ),
        ("outgoing", |r: &NetworkRate| r.tx_rate),
    ] {
        if all.is_empty() {
            break;
        }
        let name = format!("kafka_connect_metrics_{direction}_byte_rate");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (client, rate) in all.iter() {
            let _ = writeln!(
                out,
                "{name}{{client=\"{}\"}} {}",
                escape(client),
                pick(rate)
            );
        }
    }
    out
}

/// The cgroup's memory limit, else the machine's memory.
fn memory_limit() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    cgroup.or_else(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))?
            .split_whitespace()
            .next()?
            .parse::<u64>()
            .ok()
            .map(|kb| kb * 1024)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn streaming_and_snapshot_series_as_debeziums_exporter_names_them() {
        let m = super::super::Metrics::for_slot(Some("s"));
        m.debezium.enable("dbserver1", 8192);
        m.streaming.set(1);
        m.debezium.committed(3, 1, 0, 2);
        m.debezium
            .snapshot_started(&["public.outbox".to_owned(), "public.other".to_owned()]);
        m.snapshot_rows_done.set(42);
        m.debezium.table_scanned(0, 42);
        m.debezium.table_scanned(1, 0);
        m.debezium.snapshot_ended(true);
        let text = m.encode();
        for line in [
            "debezium_metrics_Connected{context=\"streaming\",name=\"dbserver1\",plugin=\"postgres\"} 1",
            "debezium_metrics_TotalNumberOfEventsSeen{context=\"streaming\",name=\"dbserver1\",plugin=\"postgres\"} 4",
            "debezium_metrics_TotalNumberOfCreateEventsSeen{context=\"streaming\",name=\"dbserver1\",plugin=\"postgres\"} 3",
            "debezium_metrics_NumberOfCommittedTransactions{context=\"streaming\",name=\"dbserver1\",plugin=\"postgres\"} 1",
            "debezium_metrics_QueueTotalCapacity{context=\"streaming\",name=\"dbserver1\",plugin=\"postgres\"} 8192",
            "debezium_metrics_SnapshotCompleted{context=\"snapshot\",name=\"dbserver1\",plugin=\"postgres\"} 1",
            "debezium_metrics_SnapshotRunning{context=\"snapshot\",name=\"dbserver1\",plugin=\"postgres\"} 0",
            "debezium_metrics_RemainingTableCount{context=\"snapshot\",name=\"dbserver1\",plugin=\"postgres\"} 0",
            "debezium_metrics_TotalTableCount{context=\"snapshot\",name=\"dbserver1\",plugin=\"postgres\"} 2",
            "debezium_metrics_RowsScanned{context=\"snapshot\",name=\"dbserver1\",plugin=\"postgres\",table=\"public.other\"} 0",
            "debezium_metrics_RowsScanned{context=\"snapshot\",name=\"dbserver1\",plugin=\"postgres\",table=\"public.outbox\"} 42",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert_eq!(
            text.matches("# TYPE debezium_metrics_TotalNumberOfEventsSeen gauge")
                .count(),
            1,
            "one family for both contexts: {text}"
        );
        assert!(
            !text.contains("jvm_"),
            "process series only where asked for"
        );
    }

    #[test]
    fn off_unless_enabled() {
        let m = super::super::Metrics::for_slot(Some("s"));
        assert!(!m.encode().contains("debezium_metrics_"));
    }
}
