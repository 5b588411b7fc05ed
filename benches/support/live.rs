//! Commit → consumer latency as a user sees it: a Kafka consumer reading a topic live and
//! noting when each event arrives (keys `e-<n>`), and exact quantiles of the delays.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// When an event arrived at the consumer, and when its producer handed it to librdkafka: the
/// record's CreateTime, which librdkafka stamps at the produce call (whole milliseconds).
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub at: Instant,
    /// `at` on the wall clock, in milliseconds since the epoch.
    pub unix_ms: f64,
    pub produced_unix_ms: Option<i64>,
}

/// When each event number arrived.
pub type Arrivals = Arc<Mutex<HashMap<u64, Arrival>>>;

/// `rows` outbox events of aggregate type Order, keys `e-<n>` from `n` on, in one transaction;
/// each payload carries a note of `note_len` bytes.
pub async fn insert_events(db: &tokio_postgres::Client, n: u64, rows: u64, note_len: usize) {
    db.batch_execute(&format!(
        "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
         SELECT gen_random_uuid(), 'Order', 'e-' || g, 'Steady', jsonb_build_object('n', g, 'note', repeat('x', {note_len}))
         FROM generate_series({n}, {}) g",
        n + rows - 1
    ))
    .await
    .unwrap();
}

/// Now on the wall clock, in milliseconds since the epoch.
pub fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Each event's delay from when it was sent (committed, or produced straight to the broker) to
/// its arrival, exact, with its two parts around the produce stamp: (total, until produced,
/// produced → consumer) in ms. `sent` holds when, on both clocks (`Instant`, [`unix_ms`]).
pub fn delays(
    sent: &HashMap<u64, (Instant, f64)>,
    received: &HashMap<u64, Arrival>,
) -> Vec<(f64, f64, f64)> {
    sent.iter()
        .map(|(k, (at, unix))| {
            let arrival = received[k];
            let total = arrival.at.saturating_duration_since(*at).as_secs_f64() * 1e3;
            let produced = arrival.produced_unix_ms.map_or(f64::NAN, |ms| ms as f64);
            (total, produced - unix, arrival.unix_ms - produced)
        })
        .collect()
}

/// The totals of [`delays`]: each event's delay to its arrival, ms.
pub fn totals(delays: &[(f64, f64, f64)]) -> Vec<f64> {
    delays.iter().map(|d| d.0).collect()
}

/// Where the slowest `share` of the events spent their time: the median of each part over
/// them, as (total, until produced, produced → consumer) in ms. `parts` holds every event's
/// (total, until produced, produced → consumer). The produce stamp has millisecond steps,
/// so the parts are ± 1 ms.
#[allow(dead_code)] // end_to_end's; cdc_vs_polling reports totals only
pub fn tail_split(parts: &[(f64, f64, f64)], share: f64) -> (f64, f64, f64) {
    let mut v = parts.to_vec();
    v.sort_by(|a, b| b.0.total_cmp(&a.0));
    v.truncate(((parts.len() as f64 * share).ceil() as usize).max(1));
    let median =
        |f: fn(&(f64, f64, f64)) -> f64| quantile(&v.iter().map(f).collect::<Vec<_>>(), 0.5);
    (median(|p| p.0), median(|p| p.1), median(|p| p.2))
}

/// Reads `topic`'s `partitions` from the beginning until `stop`; notes the first arrival of
/// each key `e-<n>`. `fetch_wait_ms`: how long the broker may hold a fetch that finds nothing
/// (Kafka answers as soon as records arrive; tansu holds it to the end, so this adds to
/// every figure).
pub fn spawn_consumer(
    bootstrap: String,
    topic: &str,
    partitions: i32,
    fetch_wait_ms: u32,
    received: Arrivals,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let topic = topic.to_owned();
    std::thread::spawn(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "outbox-relay-bench")
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", fetch_wait_ms.to_string())
            .set("log_level", "3")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(&topic, p, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&tpl).unwrap();
        while !stop.load(Ordering::Relaxed) {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) {
                let arrival = Arrival {
                    at: Instant::now(),
                    unix_ms: unix_ms(),
                    produced_unix_ms: m.timestamp().to_millis(),
                };
                let n = m
                    .key()
                    .and_then(|k| std::str::from_utf8(k).ok())
                    .and_then(|k| k.strip_prefix("e-"))
                    .and_then(|k| k.parse::<u64>().ok());
                if let Some(n) = n {
                    received.lock().unwrap().entry(n).or_insert(arrival);
                }
            }
        }
    })
}

/// The exact quantile `q` of `values` (nearest rank), NaN when empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)]
}
