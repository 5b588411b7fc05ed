//! Reading a partition's last record, for `--exactly-once`'s rule ([`super::rule::Tails`]):
//! one consumer of its own per session, created on first use, one read at a time.

use super::rule::{TailRead, POSITION_HEADER};
use crate::error::RelayError;
use anyhow::anyhow;
use bytes::Bytes;
use futures::future::BoxFuture;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::ClientContext;
use rdkafka::{Offset, TopicPartitionList};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the guard reads partition tails: Kafka ([`TailReader`]), or a unit test's fake.
pub trait ReadTail: Send {
    /// The last record of `topic`/`partition`.
    fn read<'a>(
        &'a mut self,
        topic: &'a Arc<str>,
        partition: i32,
    ) -> BoxFuture<'a, Result<TailRead, RelayError>>;
}

/// Reads partition tails with a consumer of its own (`group.id` outbox-relay-tail-reader,
/// nothing committed), created on its first read.
pub struct TailReader {
    config: ClientConfig,
    consumer: Option<Arc<Mutex<Consumer>>>,
}

impl TailReader {
    /// A reader with the client settings `config` (the producer's connection and security).
    pub fn new(config: ClientConfig) -> Self {
        Self {
            config,
            consumer: None,
        }
    }

    fn consumer(&mut self) -> Result<Arc<Mutex<Consumer>>, RelayError> {
        if let Some(consumer) = &self.consumer {
            return Ok(consumer.clone());
        }
        let consumer: Consumer = self
            .config
            .clone()
            .set("group.id", "outbox-relay-tail-reader")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "10")
            .create_with_context(TailReaderContext)
            .map_err(|e| {
                RelayError::misconfigured(format!(
                    "Kafka consumer settings (to read partition tails) rejected: {e}"
                ))
            })?;
        Ok(self.consumer.insert(Arc::new(Mutex::new(consumer))).clone())
    }
}

impl ReadTail for TailReader {
    fn read<'a>(
        &'a mut self,
        topic: &'a Arc<str>,
        partition: i32,
    ) -> BoxFuture<'a, Result<TailRead, RelayError>> {
        Box::pin(async move {
            let consumer = self.consumer()?;
            let name = topic.to_string();
            // One read at a time: a read abandoned by a cancelled future may still run on
            // its blocking thread, holding the consumer.
            tokio::task::spawn_blocking(move || {
                let consumer = consumer
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                read_tail_blocking(&consumer, &name, partition)
            })
            .await
            .map_err(|e| {
                RelayError::BrokerUnavailable(anyhow!("reading a partition's last record: {e}"))
            })?
            .map_err(|e| {
                RelayError::BrokerUnavailable(anyhow!(
                    "reading the last record of {topic} partition {partition} (--exactly-once): {e}"
                ))
            })
        })
    }
}

/// The tail reader's client context: reaching the end of a partition is how a tail read
/// ends, not an error to log.
struct TailReaderContext;

impl ClientContext for TailReaderContext {
    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() != Some(RDKafkaErrorCode::PartitionEOF) {
            tracing::warn!("reading partition tails: {error}: {reason}");
        }
    }
}

impl ConsumerContext for TailReaderContext {}

type Consumer = BaseConsumer<TailReaderContext>;

/// How long reading one partition's tail may take before the session ends (and resumes).
const TAIL_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The last record of `topic`/`partition`: from the high watermark back, widening the window
/// when the records just before it are gone (a compacted topic removes old tombstones).
fn read_tail_blocking(
    consumer: &Consumer,
    topic: &str,
    partition: i32,
) -> Result<TailRead, KafkaError> {
    let (low, high) = consumer.fetch_watermarks(topic, partition, TAIL_READ_TIMEOUT)?;
    let mut back = 1;
    loop {
        if high <= low {
            return Ok(TailRead::Empty);
        }
        let start = (high - back).max(low);
        let mut assignment = TopicPartitionList::new();
        assignment.add_partition_offset(topic, partition, Offset::Offset(start))?;
        consumer.assign(&assignment)?;
        let deadline = std::time::Instant::now() + TAIL_READ_TIMEOUT;
        let mut last: Option<TailRead> = None;
        // Read to the end of the partition: the last record read is its tail.
        loop {
            match consumer.poll(Duration::from_millis(100)) {
                // The consumer is reused: anything of an earlier assignment is ignored.
                Some(Ok(message))
                    if message.topic() != topic
                        || message.partition() != partition
                        || message.offset() < start => {}
                Some(Err(KafkaError::PartitionEOF(p))) if p != partition => {}
                Some(Ok(message)) => {
                    let position = message.headers().and_then(|h| {
                        h.iter()
                            .find(|h| h.key == POSITION_HEADER)
                            .and_then(|h| h.value.map(Bytes::copy_from_slice))
                    });
                    last = Some(TailRead::Record {
                        offset: message.offset(),
                        position,
                    });
                }
                Some(Err(KafkaError::PartitionEOF(_))) => break,
                Some(Err(e)) => return Err(e),
                None if std::time::Instant::now() > deadline => {
                    return Err(KafkaError::MessageConsumption(
                        RDKafkaErrorCode::RequestTimedOut,
                    ))
                }
                None => {}
            }
        }
        match last {
            Some(tail) => return Ok(tail),
            None if start == low => return Ok(TailRead::Empty),
            None => back = back.saturating_mul(16),
        }
    }
}
