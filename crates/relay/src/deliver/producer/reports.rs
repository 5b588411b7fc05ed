//! Delivery reports, from librdkafka's polling thread to the delivery stage: its callback
//! queues each report and wakes the stage once per batch; each record's tag waits in a slot
//! named by the callback's opaque.

use super::super::dead_letter::RefusedRecord;
use super::super::outcome::Tag;
use super::outcomes::undelivered_record;
use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::ClientContext;
use std::sync::{Arc, Mutex};

/// One delivery report: the slot of the record's tag, and what went wrong, if anything.
pub(super) struct Report {
    pub(super) slot: usize,
    pub(super) error: Option<(KafkaError, RefusedRecord)>,
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

impl ClientContext for ReportContext {}

impl ProducerContext for ReportContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: usize) {
        let error = match result {
            Ok(_) => None,
            Err((e, message)) => Some((
                e.clone(),
                undelivered_record(message, e.rdkafka_error_code()),
            )),
        };
        let mut queue = self.reports.queue.lock().unwrap();
        let was_empty = queue.is_empty();
        queue.push(Report { slot, error });
        drop(queue);
        if was_empty {
            self.reports.arrived.notify_one();
        }
    }
}

/// The tags of records in flight, each in the slot its delivery report names.
#[derive(Default)]
pub(super) struct Slots {
    pub(super) tags: Vec<Option<Tag>>,
    pub(super) free: Vec<usize>,
    pub(super) used: usize,
}

impl Slots {
    pub(super) fn put(&mut self, tag: Tag) -> usize {
        self.used += 1;
        match self.free.pop() {
            Some(slot) => {
                self.tags[slot] = Some(tag);
                slot
            }
            None => {
                self.tags.push(Some(tag));
                self.tags.len() - 1
            }
        }
    }

    pub(super) fn take(&mut self, slot: usize) -> Tag {
        let tag = self.tags[slot]
            .take()
            .expect("a report for a record in flight");
        self.free.push(slot);
        self.used -= 1;
        tag
    }
}
