//! The Kafka and file signal channels: each read in a task of its own while the session
//! streams, its signals handed to the stream, which runs them in its order.

use super::Signal;
use crate::config::{ClientRole, KafkaSettings, SignalSettings};
use crate::source::session::AbortOnDrop;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use tokio::sync::mpsc::UnboundedSender;

/// The Kafka channel's topic: `signal.kafka.topic`, else `<name>-signal`.
pub fn kafka_topic(settings: &SignalSettings, name: &str) -> String {
    settings
        .kafka_topic
        .clone()
        .unwrap_or_else(|| format!("{name}-signal"))
}

/// The Kafka channel's topic, created when missing: one partition (the channel reads
/// partition 0, as Debezium's), the relay's replication factor.
pub async fn ensure_kafka_topic(
    settings: &SignalSettings,
    kafka: &KafkaSettings,
    topic: &str,
) -> Result<(), String> {
    let mut config = kafka.client_config(ClientRole::Admin);
    if let Some(servers) = &settings.kafka_bootstrap_servers {
        config.set("bootstrap.servers", servers);
    }
    crate::deliver::producer::create_topic_if_missing(
        &config,
        topic,
        1,
        kafka.topic_replication_factor,
        "delete",
    )
    .await
}

/// Reads the Kafka channel: partition 0 of its topic, from the group's committed offset
/// (the earliest the first time), records keyed `name` only.
pub fn spawn_kafka(
    settings: &SignalSettings,
    kafka: &KafkaSettings,
    name: &str,
    to: UnboundedSender<Signal>,
) -> AbortOnDrop {
    let topic = kafka_topic(settings, name);
    let mut config = kafka.client_config(ClientRole::Admin);
    if let Some(servers) = &settings.kafka_bootstrap_servers {
        config.set("bootstrap.servers", servers);
    }
    config
        .set("group.id", &settings.kafka_group_id)
        .set("enable.auto.commit", "true")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false");
    let name = name.to_owned();
    let (settings, kafka) = (settings.clone(), kafka.clone());
    AbortOnDrop(tokio::spawn(async move {
        if let Err(why) = ensure_kafka_topic(&settings, &kafka, &topic).await {
            tracing::warn!(%topic, "the Kafka signal channel's topic: {why}");
        }
        let consumer: StreamConsumer = match config.create() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(%topic, "the Kafka signal channel cannot start: {e}");
                return;
            }
        };
        let mut partitions = TopicPartitionList::new();
        if let Err(e) = partitions.add_partition_offset(&topic, 0, Offset::Stored) {
            tracing::warn!(%topic, "the Kafka signal channel cannot start: {e}");
            return;
        }
        if let Err(e) = consumer.assign(&partitions) {
            tracing::warn!(%topic, "the Kafka signal channel cannot start: {e}");
            return;
        }
        tracing::info!(%topic, "reading signals from Kafka");
        // After an error, waits doubling from 1 s to a minute; warned once per kind of error.
        let mut backoff = std::time::Duration::from_secs(1);
        let mut warned: Option<String> = None;
        loop {
            match consumer.recv().await {
                Ok(record) => {
                    backoff = std::time::Duration::from_secs(1);
                    warned = None;
                    let read = super::from_kafka(record.key(), record.payload(), &name);
                    if !forward(read, &to, &topic) {
                        return;
                    }
                }
                Err(e) => {
                    let kind = format!("{:?}", e.rdkafka_error_code());
                    if warned.as_deref() != Some(kind.as_str()) {
                        tracing::warn!(%topic, "the Kafka signal channel: {e}; trying again");
                        warned = Some(kind);
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(60));
                    // Assigned again: a failed fetch of the group's offset (a coordinator
                    // still loading) is not retried by itself.
                    let _ = consumer.assign(&partitions);
                }
            }
        }
    }))
}

/// Reads the file channel every `poll_interval`: the file is taken aside (renamed, so that a
/// line appended meanwhile goes to a new file, not lost), its lines read, and it is left
/// empty, as Debezium leaves it.
pub fn spawn_file(settings: &SignalSettings, to: UnboundedSender<Signal>) -> AbortOnDrop {
    let path = settings.file_path.clone();
    let every = settings.poll_interval;
    AbortOnDrop(tokio::spawn(async move {
        tracing::info!(path = %path.display(), "reading signals from a file");
        let mut taken = path.clone().into_os_string();
        taken.push(".reading");
        let taken = std::path::PathBuf::from(taken);
        let channel = path.display().to_string();
        loop {
            let nonempty = std::fs::metadata(&path).is_ok_and(|m| m.len() > 0);
            if nonempty {
                match std::fs::rename(&path, &taken) {
                    Ok(()) => {
                        let bytes = std::fs::read(&taken).unwrap_or_default();
                        let _ = std::fs::remove_file(&taken);
                        // Empty again, unless a writer made a new one meanwhile.
                        let _ = std::fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .open(&path);
                        for line in String::from_utf8_lossy(&bytes).lines() {
                            if !forward(super::from_file_line(line), &to, &channel) {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), "the signal file cannot be taken aside ({e}): its signals wait")
                    }
                }
            }
            tokio::time::sleep(every).await;
        }
    }))
}

/// Hands a channel's signal to the stream (a bad one is logged and passed over); false once
/// the stream is gone.
fn forward(
    read: Option<Result<Signal, String>>,
    to: &UnboundedSender<Signal>,
    channel: &str,
) -> bool {
    match read {
        Some(Ok(signal)) => to.send(signal).is_ok(),
        Some(Err(why)) => {
            tracing::warn!(channel, "{why}");
            true
        }
        None => true,
    }
}
