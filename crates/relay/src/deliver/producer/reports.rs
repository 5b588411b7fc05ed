//! Delivery reports, from librdkafka's polling thread to the delivery stage: its callback
//! queues each report and wakes the stage once per batch; each record's tag waits in a slot
//! named by the callback's opaque.

use super::super::dead_letter::RefusedRecord;
use super::super::outcome::Tag;
use bytes::Bytes;
use foldhash::{HashMap, HashMapExt as _};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::ClientContext;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One delivery report: the slot of the record's tag, and what went wrong, if anything.
pub(super) struct Report {
    pub(super) slot: usize,
    pub(super) error: Option<Refusal>,
    /// The record's offset in its partition; negative where librdkafka reported a delivery
    /// without one (inferred, not acknowledged by Kafka).
    pub(super) offset: i64,
}

/// What went wrong with one record.
pub(super) struct Refusal {
    pub(super) error: KafkaError,
    pub(super) record: RefusedRecord,
    /// What the broker said of this record (a produce response's record error, or its error
    /// message), when it said anything.
    pub(super) detail: Option<String>,
}

/// librdkafka's per-record error text for a record it did not take, when that text is one of
/// its own static strings (as the one for the neighbours of a refused record is).
///
/// librdkafka (2.12, and its master as of 2026-07) points a refused record's text at the
/// produce response's error messages and frees them right after handling the response,
/// before the delivery report reaches this callback (`rd_kafka_handle_Produce` destroys the
/// result `rd_kafka_msgbatch_handle_Produce_result_record_errors` pointed the records at):
/// reading that text read freed memory and put garbage into dead letters' reasons. So the
/// text is read only when it lies in a loaded image (`dladdr` finds it), never on the heap.
fn broker_message(message: &rdkafka::message::BorrowedMessage<'_>) -> Option<String> {
    // SAFETY: the message is valid for the callback's duration.
    let text = unsafe { rdkafka::bindings::rd_kafka_message_produce_errstr(message.ptr()) };
    if text.is_null() {
        return None;
    }
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only looks the address up among the loaded objects; it never reads it.
    if unsafe { libc::dladdr(text.cast(), info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: a NUL-terminated string constant of an image that stays loaded.
    let text = unsafe { std::ffi::CStr::from_ptr(text) }
        .to_string_lossy()
        .trim()
        .to_owned();
    (!text.is_empty()).then_some(text)
}

/// Where the polling thread leaves delivery reports for the delivery stage.
#[derive(Default)]
pub(super) struct Reports {
    pub(super) queue: Mutex<Vec<Report>>,
    /// Told when the queue stops being empty: one wake-up per batch of reports.
    pub(super) arrived: tokio::sync::Notify,
}

/// The producer's context: its delivery callback queues each report (on librdkafka's
/// polling thread, in the order librdkafka reports them).
pub struct ReportContext {
    pub(super) reports: Arc<Reports>,
}

/// librdkafka's own log lines reach the relay's log (target `librdkafka`): without this they
/// went to the `log` crate, which nothing here reads, and a producer's warnings were never
/// seen. Its errors are warnings here (a broker restarting is one, and the relay recovers);
/// its error callback repeats what a log line said, except a fatal producer error.
/// `--producer-property debug=…` adds librdkafka's debug lines at `RUST_LOG`
/// `librdkafka=debug`. librdkafka redacts its sensitive settings (`sasl.password`) itself.
impl ClientContext for ReportContext {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        use RDKafkaLogLevel as L;
        match level {
            L::Emerg | L::Alert | L::Critical => {
                tracing::error!(target: "librdkafka", facility, "{message}")
            }
            L::Error | L::Warning => tracing::warn!(target: "librdkafka", facility, "{message}"),
            L::Notice | L::Info => tracing::info!(target: "librdkafka", facility, "{message}"),
            L::Debug => tracing::debug!(target: "librdkafka", facility, "{message}"),
        }
    }

    /// librdkafka's statistics (on only while a connector serves Debezium's series): the
    /// network rates Kafka Connect's dashboards chart.
    fn stats_raw(&self, statistics: &[u8]) {
        crate::metrics::debezium::producer_statistics(statistics);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal) {
            tracing::error!(target: "librdkafka", "producer: {error}: {reason}");
        } else {
            tracing::debug!(target: "librdkafka", "producer: {error}: {reason}");
        }
    }
}

impl ProducerContext for ReportContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: usize) {
        let (error, offset) = match result {
            Ok(message) => (None, message.offset()),
            Err((e, message)) => (
                Some(Refusal {
                    error: e.clone(),
                    record: undelivered_record(message, e.rdkafka_error_code()),
                    detail: broker_message(message),
                }),
                message.offset(),
            ),
        };
        let mut queue = self.reports.queue.lock().unwrap();
        let was_empty = queue.is_empty();
        queue.push(Report {
            slot,
            error,
            offset,
        });
        drop(queue);
        if was_empty {
            self.reports.arrived.notify_one();
        }
    }
}

/// Where a record in flight went, and when.
pub(super) struct Place {
    pub(super) topic: Arc<str>,
    /// `None`: the topic's partition count is unknown and the record has no key or
    /// partition of its own (librdkafka places it).
    pub(super) partition: Option<i32>,
    /// Under the first-record rule (first_writes.rs): a partition the topic is known to have.
    pub(super) gated: bool,
    pub(super) sent: Instant,
    /// Its key and value bytes (the in-flight bound in bytes).
    pub(super) bytes: usize,
}

/// The tags of records in flight, each in the slot its delivery report names, with where
/// each went and when.
#[derive(Default)]
pub(super) struct Slots {
    pub(super) tags: Vec<Option<(Tag, Place)>>,
    pub(super) free: Vec<usize>,
    pub(super) used: usize,
    /// Key and value bytes of the records in flight.
    pub(super) bytes: usize,
}

impl Slots {
    pub(super) fn put(&mut self, tag: Tag, place: Place) -> usize {
        self.used += 1;
        self.bytes += place.bytes;
        match self.free.pop() {
            Some(slot) => {
                self.tags[slot] = Some((tag, place));
                slot
            }
            None => {
                self.tags.push(Some((tag, place)));
                self.tags.len() - 1
            }
        }
    }

    pub(super) fn take(&mut self, slot: usize) -> (Tag, Place) {
        let taken = self.tags[slot]
            .take()
            .expect("a report for a record in flight");
        self.free.push(slot);
        self.used -= 1;
        self.bytes -= taken.1.bytes;
        taken
    }

    /// Each partition with a record in flight for longer than `age` at `now`, with the
    /// age of its oldest, oldest first.
    pub(super) fn waiting_longer_than(&self, age: Duration, now: Instant) -> Vec<Unacknowledged> {
        let mut oldest: HashMap<(Arc<str>, Option<i32>), Duration> = HashMap::new();
        for (_, place) in self.tags.iter().flatten() {
            let waited = now.saturating_duration_since(place.sent);
            if waited > age {
                let entry = oldest
                    .entry((place.topic.clone(), place.partition))
                    .or_default();
                *entry = (*entry).max(waited);
            }
        }
        let mut out: Vec<Unacknowledged> = oldest
            .into_iter()
            .map(|((topic, partition), waited)| Unacknowledged {
                topic,
                partition,
                waited,
            })
            .collect();
        out.sort_by(|a, b| b.waited.cmp(&a.waited).then_with(|| a.topic.cmp(&b.topic)));
        out
    }
}

/// A partition whose oldest record in flight has waited `waited` for Kafka's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unacknowledged {
    pub topic: Arc<str>,
    /// `None`: records without a key, which librdkafka places at random.
    pub partition: Option<i32>,
    pub waited: Duration,
}

impl std::fmt::Display for Unacknowledged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.partition {
            Some(p) => write!(f, "{} partition {p}", self.topic),
            None => write!(f, "{} (records without a key)", self.topic),
        }?;
        write!(f, " for {} s", self.waited.as_secs())
    }
}

/// What a dead letter keeps of a record librdkafka reports as not delivered (refused by the
/// broker: its payload is copied, unless its size is what was refused).
pub(super) fn undelivered_record(
    message: &BorrowedMessage<'_>,
    code: Option<RDKafkaErrorCode>,
) -> RefusedRecord {
    let record = RefusedRecord {
        topic: message.topic().to_owned(),
        key: message.key().map(Bytes::copy_from_slice),
        event_id: message.headers().and_then(|h| {
            h.iter()
                .find(|h| h.key == "id")
                .and_then(|h| h.value.map(Bytes::copy_from_slice))
        }),
        value: message.payload().map(Bytes::copy_from_slice),
        value_len: message.payload().map_or(0, |p| p.len()),
    };
    if code.is_some_and(is_size_refusal) {
        record.oversized()
    } else {
        record
    }
}

/// A refusal of the record's size.
pub(super) fn is_size_refusal(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only records older than the age count, per partition, the oldest first.
    #[test]
    fn partitions_waiting_too_long_are_found_by_their_oldest_record() {
        let mut tracker = crate::deliver::tracker::AckTracker::new(pgoutput::Lsn::from_u64(0));
        let mut tag = || Tag {
            ticket: tracker.produced(),
            origin: crate::deliver::outcome::Origin {
                table: "t".into(),
                position: None,
                event: None,
            },
            kind: crate::deliver::outcome::Kind::Event(Default::default()),
        };
        let now = Instant::now();
        let at = |topic: &str, partition, secs| Place {
            bytes: 0,
            topic: topic.into(),
            partition,
            gated: false,
            sent: now - Duration::from_secs(secs),
        };
        let mut slots = Slots::default();
        slots.put(tag(), at("a", Some(0), 400));
        slots.put(tag(), at("a", Some(0), 200));
        let young = slots.put(tag(), at("a", Some(1), 10));
        let gone = slots.put(tag(), at("b", Some(2), 900));
        slots.put(tag(), at("c", None, 301));
        slots.take(gone);
        let found = slots.waiting_longer_than(Duration::from_secs(300), now);
        assert_eq!(
            found.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "a partition 0 for 400 s",
                "c (records without a key) for 301 s"
            ]
        );
        slots.take(young);
        assert_eq!(slots.used, 3);
    }
}
