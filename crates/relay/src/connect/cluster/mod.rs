//! `connect` workers as one Kafka Connect cluster: the workers that share a `group.id` (and
//! the config topic) join one group through Kafka's group coordinator (`member.rs`), whose
//! leader spreads the connectors over them (`assign.rs`); each runs what it is assigned and
//! writes its connectors' states to `status.storage.topic` (`status.rs`), which every worker
//! reads to answer for the whole cluster. The slot stays the last line of defence: a
//! connector's pipeline streams only once it holds the slot, so two workers never stream
//! one.

pub mod assign;
pub mod member;
pub mod offsets;
pub mod status;
pub mod transport;
pub mod wire;

use rdkafka::ClientConfig;
use std::collections::BTreeMap;
use std::time::Duration;

/// The worker settings of a cluster, as Kafka Connect's `DistributedConfig` names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    pub group_id: String,
    /// `session.timeout.ms` (10000): how long the coordinator waits for a silent worker.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms` (3000).
    pub heartbeat_interval: Duration,
    /// `rebalance.timeout.ms` (60000): how long a rebalance waits for every worker to rejoin.
    pub rebalance_timeout: Duration,
    /// `scheduled.rebalance.max.delay.ms` (300000): how long a departed worker's connectors
    /// wait for it to come back before they are spread over the others.
    pub scheduled_rebalance_delay: Duration,
    pub status_topic: String,
    /// `status.storage.partitions` (5) and `status.storage.replication.factor` (the brokers'
    /// default when unset).
    pub status_partitions: i32,
    pub status_replication: i32,
    /// `offset.storage.topic`, where Debezium's offsets are written as Connect writes them.
    pub offset_topic: Option<String>,
    pub offset_partitions: i32,
    pub offset_replication: i32,
    /// `offset.flush.interval.ms` (60000).
    pub offset_flush_interval: Duration,
}

/// The worker's cluster settings, `None` for a worker of its own (no `group.id`, or no
/// `config.storage.topic` to share registrations through). A value that cannot apply names
/// its key.
pub fn settings(worker: &BTreeMap<String, String>) -> Result<Option<ClusterSettings>, String> {
    let (Some(group_id), Some(_)) = (worker.get("group.id"), worker.get("config.storage.topic"))
    else {
        return Ok(None);
    };
    let group_id = group_id.trim().to_owned();
    if group_id.is_empty() {
        return Err("group.id: empty".into());
    }
    match worker.get("connect.protocol").map(|p| p.trim().to_ascii_lowercase()) {
        None => {}
        Some(p) if p == "compatible" || p == "sessioned" => {}
        Some(p) if p == "eager" => {
            return Err(
                "connect.protocol=eager: outbox-relay's workers rebalance incrementally, as `compatible` and \
                 `sessioned` do (a connector moves only when balance needs it); eager rebalancing, which stops \
                 every connector at each change, is not offered: remove the setting or set sessioned"
                    .into(),
            )
        }
        Some(p) => {
            return Err(format!(
                "connect.protocol: {p:?} is not one of eager, compatible, sessioned"
            ))
        }
    }
    let ms = |key: &str, default: u64| -> Result<Duration, String> {
        match worker.get(key) {
            None => Ok(Duration::from_millis(default)),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| format!("{key}: {v:?} is not a number of milliseconds")),
        }
    };
    let int = |key: &str, default: i32| -> Result<i32, String> {
        match worker.get(key) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|n| *n > 0 || *n == -1)
                .ok_or_else(|| format!("{key}: {v:?} is not a positive number (or -1)")),
        }
    };
    let session_timeout = ms("session.timeout.ms", 10_000)?;
    let heartbeat_interval = ms("heartbeat.interval.ms", 3_000)?;
    if heartbeat_interval.is_zero() || heartbeat_interval >= session_timeout {
        return Err(format!(
            "heartbeat.interval.ms: {} must be above 0 and below session.timeout.ms ({})",
            heartbeat_interval.as_millis(),
            session_timeout.as_millis()
        ));
    }
    let status_topic = worker
        .get("status.storage.topic")
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .ok_or(
            "status.storage.topic: missing; the workers of group.id keep their connectors' states there, \
             as Kafka Connect's do (for example status.storage.topic=connect-status)",
        )?;
    Ok(Some(ClusterSettings {
        group_id,
        session_timeout,
        heartbeat_interval,
        rebalance_timeout: ms("rebalance.timeout.ms", 60_000)?,
        scheduled_rebalance_delay: ms("scheduled.rebalance.max.delay.ms", 300_000)?,
        status_topic,
        status_partitions: int("status.storage.partitions", 5)?,
        status_replication: int("status.storage.replication.factor", -1)?,
        offset_topic: worker
            .get("offset.storage.topic")
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty()),
        offset_partitions: int("offset.storage.partitions", 25)?,
        offset_replication: int("offset.storage.replication.factor", -1)?,
        offset_flush_interval: ms("offset.flush.interval.ms", 60_000)?,
    }))
}

/// A compacted topic of Connect's (created when missing) and the idempotent producer that
/// writes to it, placing keys with the Java client's partitioner, as Connect's writers do.
pub async fn compacted_topic_writer(
    client: &ClientConfig,
    topic: &str,
    partitions: i32,
    replication: i32,
) -> Result<rdkafka::producer::FutureProducer, String> {
    crate::deliver::producer::create_topic_if_missing(
        client,
        topic,
        partitions,
        replication,
        "compact",
    )
    .await?;
    client
        .clone()
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("partitioner", "murmur2_random")
        .create()
        .map_err(|e| format!("Kafka producer: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(lines: &[(&str, &str)]) -> BTreeMap<String, String> {
        lines
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_cluster_needs_a_group_and_a_config_topic() {
        assert_eq!(settings(&worker(&[("group.id", "g")])).unwrap(), None);
        let s = settings(&worker(&[
            ("group.id", "g"),
            ("config.storage.topic", "c"),
            ("status.storage.topic", "s"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(s.session_timeout, Duration::from_secs(10));
        assert_eq!(s.scheduled_rebalance_delay, Duration::from_secs(300));
        assert_eq!(s.status_partitions, 5);
        assert_eq!(s.offset_topic, None);
    }

    #[test]
    fn settings_that_cannot_apply_name_their_key() {
        let base = [
            ("group.id", "g"),
            ("config.storage.topic", "c"),
            ("status.storage.topic", "s"),
        ];
        let with = |extra: (&'static str, &'static str)| {
            let mut w = worker(&base);
            w.insert(extra.0.into(), extra.1.into());
            settings(&w).unwrap_err()
        };
        assert!(with(("connect.protocol", "eager")).starts_with("connect.protocol=eager"));
        assert!(with(("connect.protocol", "x")).starts_with("connect.protocol"));
        assert!(with(("session.timeout.ms", "ten")).starts_with("session.timeout.ms"));
        assert!(with(("heartbeat.interval.ms", "20000")).starts_with("heartbeat.interval.ms"));
        assert!(with(("status.storage.partitions", "0")).starts_with("status.storage.partitions"));
        let mut no_status = worker(&base);
        no_status.remove("status.storage.topic");
        assert!(settings(&no_status)
            .unwrap_err()
            .starts_with("status.storage.topic"));
    }
}
