//! Commit → consumer latency as a user sees it: a Kafka consumer reading a topic live and
//! noting when each event arrives (keys `e-<n>`), and exact quantiles of the delays.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// When each event number arrived.
pub type Arrivals = Arc<Mutex<HashMap<u64, Instant>>>;

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
                let now = Instant::now();
                let n = m
                    .key()
                    .and_then(|k| std::str::from_utf8(k).ok())
                    .and_then(|k| k.strip_prefix("e-"))
                    .and_then(|k| k.parse::<u64>().ok());
                if let Some(n) = n {
                    received.lock().unwrap().entry(n).or_insert(now);
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
