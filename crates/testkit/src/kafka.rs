//! Reading topics back with a real Kafka consumer (rdkafka, bundled librdkafka).

use anyhow::{bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::time::{Duration, Instant};

/// One record as a consumer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp_millis: Option<i64>,
}

impl ConsumedRecord {
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }
    /// A header that must be there, as UTF-8 text (what SimpleHeaderConverter writes).
    pub fn header_str(&self, name: &str) -> &str {
        std::str::from_utf8(
            self.header(name)
                .unwrap_or_else(|| panic!("header {name} missing: {self:?}")),
        )
        .unwrap_or_else(|e| panic!("header {name} is not UTF-8 ({e}): {self:?}"))
    }
    pub fn key_str(&self) -> Option<&str> {
        self.key
            .as_deref()
            .map(|k| std::str::from_utf8(k).expect("utf-8 key"))
    }
    pub fn value_str(&self) -> Option<&str> {
        self.value
            .as_deref()
            .map(|v| std::str::from_utf8(v).expect("utf-8 value"))
    }
}

fn base_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("socket.timeout.ms", "30000")
        .set("log_level", "3");
    c
}

pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<()> {
    create_topic_with_configs(bootstrap, topic, partitions, &[]).await
}

/// Deletes `topic` and waits until the broker no longer lists it.
pub async fn delete_topic(bootstrap: &str, topic: &str) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap).create()?;
    for r in admin.delete_topics(&[topic], &AdminOptions::new()).await? {
        if let Err((t, e)) = r {
            bail!("deleting topic {t}: {e}");
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while list_topics(bootstrap)?.iter().any(|t| t == topic) {
        if std::time::Instant::now() > deadline {
            bail!("topic {topic} is still listed 30 s after its deletion");
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Creates `topics` (each with `partitions`) in one CreateTopics request.
pub async fn create_topics(bootstrap: &str, topics: &[String], partitions: i32) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap).create()?;
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(1)))
        .collect();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(120)));
    for r in admin.create_topics(&new, &options).await? {
        match r {
            Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => bail!("creating topic {t}: {e}"),
        }
    }
    Ok(())
}

/// Creates `topic` with topic configs (`max.message.bytes`, …).
pub async fn create_topic_with_configs(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap).create()?;
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (key, value) in configs {
        new = new.set(key, value);
    }
    let res = admin.create_topics(&[new], &AdminOptions::new()).await?;
    for r in res {
        match r {
            Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => bail!("creating topic {t}: {e}"),
        }
    }
    Ok(())
}

/// Sets `topic`'s configs to `configs` (AlterConfigs: the ones not named go back to their
/// defaults), as an operator changing a live topic would.
pub async fn alter_topic_configs(
    bootstrap: &str,
    topic: &str,
    configs: &[(&str, &str)],
) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap).create()?;
    let mut alter =
        rdkafka::admin::AlterConfig::new(rdkafka::admin::ResourceSpecifier::Topic(topic));
    for (key, value) in configs {
        alter = alter.set(key, value);
    }
    for result in admin.alter_configs(&[alter], &AdminOptions::new()).await? {
        result.map_err(|(_, e)| anyhow::anyhow!("altering {topic}'s configs: {e}"))?;
    }
    Ok(())
}

/// The configs the broker holds for `topic` (DescribeConfigs) and its partition count.
pub async fn topic_configs(
    bootstrap: &str,
    topic: &str,
) -> Result<(std::collections::HashMap<String, String>, usize)> {
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap).create()?;
    let results = admin
        .describe_configs(
            &[rdkafka::admin::ResourceSpecifier::Topic(topic)],
            &AdminOptions::new(),
        )
        .await?;
    let mut configs = std::collections::HashMap::new();
    for result in results {
        let resource = result.map_err(|e| anyhow::anyhow!("describing {topic}: {e}"))?;
        for entry in resource.entries {
            if let Some(value) = entry.value {
                configs.insert(entry.name, value);
            }
        }
    }
    let consumer: BaseConsumer = base_config(bootstrap).create()?;
    let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(30))?;
    let partitions = md.topics().first().map_or(0, |t| t.partitions().len());
    Ok((configs, partitions))
}

/// Topic names the broker knows.
pub fn list_topics(bootstrap: &str) -> Result<Vec<String>> {
    let consumer: BaseConsumer = base_config(bootstrap).create()?;
    let md = consumer.fetch_metadata(None, Duration::from_secs(30))?;
    Ok(md.topics().iter().map(|t| t.name().to_owned()).collect())
}

/// Each partition of `topic` with its low and high watermarks, in partition order.
pub fn watermarks(bootstrap: &str, topic: &str) -> Result<Vec<(i32, i64, i64)>> {
    let consumer: BaseConsumer = base_config(bootstrap).create()?;
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .with_context(|| format!("metadata for {topic}"))?;
    let Some(t) = md.topics().iter().find(|t| t.name() == topic) else {
        bail!("topic {topic} not in metadata");
    };
    let mut out = Vec::new();
    for p in t.partitions() {
        let (low, high) = consumer.fetch_watermarks(topic, p.id(), Duration::from_secs(30))?;
        out.push((p.id(), low, high));
    }
    out.sort_unstable();
    Ok(out)
}

/// Every record of `topic`, partition after partition, in offset order. Blocking: call
/// from `spawn_blocking` inside async tests. Reads one partition at a time from the low to
/// the high watermark (kafka-broker.md: multi-partition assignment stalls on tansu), or to
/// the partition's end where a transaction's commit marker holds the last offset (no record
/// is read there).
pub fn read_topic(bootstrap: &str, topic: &str) -> Result<Vec<ConsumedRecord>> {
    let consumer: BaseConsumer = base_config(bootstrap)
        .set("group.id", "outbox-relay-tests")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "error")
        .set("fetch.wait.max.ms", "10")
        // Whole batches, however large the relay made them during a catch-up.
        .set("max.partition.fetch.bytes", "67108864")
        .set("fetch.max.bytes", "134217728")
        .set("receive.message.max.bytes", "200000000")
        .create()?;
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .with_context(|| format!("metadata for {topic}"))?;
    let Some(t) = md.topics().iter().find(|t| t.name() == topic) else {
        bail!("topic {topic} not in metadata");
    };
    if t.error().is_some() {
        bail!("topic {topic}: {:?}", t.error());
    }
    let partitions: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
    let mut out = Vec::new();
    for p in partitions {
        let (low, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(30))?;
        if high <= low {
            continue;
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, p, Offset::Offset(low))?;
        consumer.assign(&tpl)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut next = low;
        while next < high {
            if Instant::now() > deadline {
                bail!("reading {topic}[{p}]: stuck at offset {next} of {high}");
            }
            match consumer.poll(Duration::from_millis(500)) {
                None => continue,
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(eof))) if eof == p => break,
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => continue,
                Some(Err(e)) => bail!("reading {topic}[{p}] at offset {next}: {e}"),
                // A record fetched for the previous assignment can still arrive after
                // `assign`: it is not this partition's.
                Some(Ok(m)) if m.partition() != p || m.offset() < next => continue,
                Some(Ok(m)) => {
                    next = m.offset() + 1;
                    out.push(to_record(topic, p, &m));
                }
            }
        }
    }
    Ok(out)
}

fn to_record(
    topic: &str,
    partition: i32,
    m: &rdkafka::message::BorrowedMessage<'_>,
) -> ConsumedRecord {
    let headers = m
        .headers()
        .map(|h| {
            h.iter()
                .map(|h| (h.key.to_owned(), h.value.map(|v| v.to_vec())))
                .collect()
        })
        .unwrap_or_default();
    ConsumedRecord {
        topic: topic.to_owned(),
        partition,
        offset: m.offset(),
        key: m.key().map(|k| k.to_vec()),
        value: m.payload().map(|v| v.to_vec()),
        headers,
        timestamp_millis: m.timestamp().to_millis(),
    }
}

/// Produces one record to `topic`/`partition` as another producer would (no relay headers)
/// and waits for the broker's acknowledgement.
pub fn produce_one(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    key: &[u8],
    value: &[u8],
    headers: &[(&str, &[u8])],
) -> Result<()> {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let mut owned = OwnedHeaders::new();
    for (key, value) in headers {
        owned = owned.insert(Header {
            key,
            value: Some(*value),
        });
    }
    let producer: BaseProducer = base_config(bootstrap)
        .set("acks", "all")
        .create()
        .context("creating a producer")?;
    producer
        .send(
            BaseRecord::to(topic)
                .partition(partition)
                .key(key)
                .payload(value)
                .headers(owned),
        )
        .map_err(|(e, _)| anyhow::anyhow!("producing to {topic}/{partition}: {e}"))?;
    producer
        .flush(Duration::from_secs(30))
        .context("flushing the producer")?;
    Ok(())
}
