//! A producer for unit tests: records what it was given, reports outcomes when the test
//! says so (in any order), and refuses with QueueFull past its capacity.

use super::exactly_once::tail::ReadTail;
use super::exactly_once::TailRead;
use super::outcome::{Outcome, Tag};
use super::producer::{Producer, Sent, Topic, Unacknowledged};
use crate::error::RelayError;
use futures::future::BoxFuture;
use outbox_router::OutboxRecord;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

pub struct FakeProducer {
    capacity: usize,
    /// Every accepted record, in order; a record's index is its id for `complete`.
    pub sent: Vec<OutboxRecord>,
    /// When each record of `sent` was accepted.
    pub sent_at: Vec<tokio::time::Instant>,
    pub queue_full_seen: usize,
    /// Topics the fake broker refuses to create.
    pub refused_topics: Vec<String>,
    /// Records with a value longer than this never fit the queue (QueueFull every time).
    pub queue_bytes: Option<usize>,
    /// Topics whose creation never ends (a cluster without a controller): made sure of in
    /// the background, it stays under way; on the delivery path, it never returns.
    pub creating_topics: Vec<String>,
    /// Topics whose first use asks for a rebuild (a smaller batch size).
    pub rebuild_for_topics: Vec<String>,
    /// `sent.len()` at each rebuild, and what was in flight then.
    pub rebuilds: Vec<(usize, usize)>,
    /// Every topic's partition count.
    pub partitions: i32,
    /// Records with a value longer than this are refused by the relay's own checks.
    pub refuse_longer_than: Option<usize>,
    wants_rebuild: bool,
    in_flight: HashMap<usize, Tag>,
    reports: mpsc::UnboundedReceiver<(usize, Outcome)>,
    completer: Completer,
}

/// Completes deliveries from anywhere (another task, while the stage waits).
#[derive(Clone)]
pub struct Completer(mpsc::UnboundedSender<(usize, Outcome)>);

impl Completer {
    pub fn complete(&self, id: usize, outcome: Outcome) {
        self.0
            .send((id, outcome))
            .expect("the fake producer is alive");
    }
}

impl FakeProducer {
    pub fn new(capacity: usize) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            capacity,
            sent: Vec::new(),
            sent_at: Vec::new(),
            queue_full_seen: 0,
            refused_topics: Vec::new(),
            queue_bytes: None,
            creating_topics: Vec::new(),
            rebuild_for_topics: Vec::new(),
            rebuilds: Vec::new(),
            partitions: 1,
            refuse_longer_than: None,
            wants_rebuild: false,
            in_flight: HashMap::new(),
            reports: rx,
            completer: Completer(tx),
        }
    }

    pub fn completer(&self) -> Completer {
        self.completer.clone()
    }

    /// Reports the delivery of record `id`.
    pub fn complete(&self, id: usize, outcome: Outcome) {
        self.completer.complete(id, outcome);
    }

    pub fn sent_topics(&self) -> Vec<String> {
        self.sent.iter().map(|r| r.topic.to_string()).collect()
    }
}

impl Producer for FakeProducer {
    fn send(&mut self, record: &OutboxRecord, tag: Tag) -> Sent {
        let too_big = self
            .queue_bytes
            .is_some_and(|max| record.value.as_ref().is_some_and(|v| v.len() > max));
        if self.in_flight.len() >= self.capacity || too_big {
            self.queue_full_seen += 1;
            return Sent::QueueFull(tag);
        }
        self.in_flight.insert(self.sent.len(), tag);
        self.sent.push(record.clone());
        self.sent_at.push(tokio::time::Instant::now());
        Sent::Accepted
    }

    async fn next_report(&mut self) -> (Tag, Outcome) {
        loop {
            let (id, outcome) = self.reports.recv().await.expect("a completer is alive");
            if let Some(tag) = self.in_flight.remove(&id) {
                return (tag, outcome);
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Per topic (the fake has no partitions but a record's own), the oldest in flight.
    fn waiting_longer_than(&self, age: std::time::Duration) -> Vec<Unacknowledged> {
        let now = tokio::time::Instant::now();
        let mut out: Vec<Unacknowledged> = Vec::new();
        for id in self.in_flight.keys() {
            let record = &self.sent[*id];
            let waited = now.saturating_duration_since(self.sent_at[*id]);
            if waited <= age {
                continue;
            }
            match out
                .iter_mut()
                .find(|u| u.topic == record.topic && u.partition == record.partition)
            {
                Some(u) => u.waited = u.waited.max(waited),
                None => out.push(Unacknowledged {
                    topic: record.topic.clone(),
                    partition: record.partition,
                    waited,
                }),
            }
        }
        out.sort_by_key(|u| std::cmp::Reverse(u.waited));
        out
    }

    async fn ensure_topic(&mut self, topic: &Arc<str>) -> Result<Topic, RelayError> {
        if self.creating_topics.iter().any(|t| **t == **topic) {
            std::future::pending::<()>().await;
        }
        if let Some(i) = self.rebuild_for_topics.iter().position(|t| **t == **topic) {
            self.rebuild_for_topics.remove(i);
            self.wants_rebuild = true;
        }
        Ok(match self.refused_topics.iter().find(|t| **t == **topic) {
            Some(t) => Topic::Refused(format!("topic {t} refused")),
            None => Topic::Ready {
                partitions: Some(self.partitions),
                rebuild: self.wants_rebuild,
            },
        })
    }

    fn ensure_topic_in_background(&mut self, topic: &Arc<str>) -> Option<Result<(), String>> {
        (!self.creating_topics.iter().any(|t| **t == **topic)).then_some(Ok(()))
    }

    fn refuses(&self, record: &OutboxRecord) -> Option<(String, bool)> {
        let max = self.refuse_longer_than?;
        let len = record.value.as_ref().map_or(0, |v| v.len());
        (len > max).then(|| (format!("{len} bytes is over {max}"), true))
    }

    fn rebuild(&mut self) -> Result<(), RelayError> {
        self.rebuilds.push((self.sent.len(), self.in_flight.len()));
        self.wants_rebuild = false;
        Ok(())
    }
}

/// Partition tails for unit tests: the last record of each (topic, partition) (absent =
/// empty), and the reads made, in order. Clones share both.
#[derive(Clone, Default)]
pub struct FakeTails {
    tails: Arc<Mutex<HashMap<(String, i32), TailRead>>>,
    reads: Arc<Mutex<Vec<(String, i32)>>>,
}

impl FakeTails {
    pub fn insert(&self, topic: &str, partition: i32, tail: TailRead) {
        self.tails
            .lock()
            .unwrap()
            .insert((topic.into(), partition), tail);
    }

    pub fn reads(&self) -> Vec<(String, i32)> {
        self.reads.lock().unwrap().clone()
    }
}

impl ReadTail for FakeTails {
    fn read<'a>(
        &'a mut self,
        topic: &'a Arc<str>,
        partition: i32,
    ) -> BoxFuture<'a, Result<TailRead, RelayError>> {
        let key = (topic.to_string(), partition);
        self.reads.lock().unwrap().push(key.clone());
        let tail = self
            .tails
            .lock()
            .unwrap()
            .get(&key)
            .cloned()
            .unwrap_or(TailRead::Empty);
        Box::pin(async move { Ok(tail) })
    }
}
