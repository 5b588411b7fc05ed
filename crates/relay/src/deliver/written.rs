//! The topics a pipeline wrote to: Kafka Connect's active topics of a connector
//! (`GET /connectors/{name}/topics`), emptied by `PUT …/topics/reset`. The delivery stage
//! notes a topic the first time it writes to it, and again after a reset.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct WrittenTopics {
    topics: Mutex<BTreeSet<String>>,
    /// How many times `topics` was emptied.
    resets: AtomicU64,
}

impl WrittenTopics {
    /// A topic written to.
    pub fn note(&self, topic: &str) {
        let mut topics = self.topics.lock().unwrap();
        if !topics.contains(topic) {
            topics.insert(topic.to_owned());
        }
    }

    /// The topics written to since the last [`take`](Self::take).
    pub fn get(&self) -> BTreeSet<String> {
        self.topics.lock().unwrap().clone()
    }

    /// The topics written to, forgotten here (noted again when next written to).
    pub fn take(&self) -> BTreeSet<String> {
        let mut topics = self.topics.lock().unwrap();
        self.resets.fetch_add(1, Ordering::Relaxed);
        std::mem::take(&mut *topics)
    }

    /// How many times the topics were taken: a stage that remembers which topics it noted
    /// forgets them when this changes.
    pub fn resets(&self) -> u64 {
        self.resets.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_topics_are_forgotten_and_the_reset_counted() {
        let written = WrittenTopics::default();
        written.note("a");
        written.note("b");
        written.note("a");
        assert_eq!(written.get().into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(written.take().len(), 2);
        assert!(written.get().is_empty());
        assert_eq!(written.resets(), 1);
    }
}
