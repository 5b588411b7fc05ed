//! Incremental snapshots (`execute-snapshot` with `type: incremental`), as Debezium runs them:
//! the tables are read again chunk by chunk in key order while the stream goes on, and a row
//! the stream changes while its chunk is read is sent as the stream has it, not as the chunk
//! read it.
//!
//! Each chunk is read between two watermarks the relay inserts into the signal table,
//! `<chunk>-open` and `<chunk>-close`. The stream brings them back in commit order: a change
//! of a row of the chunk between them committed while the chunk was read, so the chunk's
//! copy of that row is dropped (the streamed change is the newer). At the close watermark the
//! rest of the chunk goes out, as reads (`op: r`, `source.snapshot: incremental`), inside the
//! close watermark's transaction: its position is confirmed only once Kafka has them.
//!
//! Progress (the tables left, the last key sent, the maximum key) is saved in the relay's own
//! table `outbox_relay_incremental_snapshots` once Kafka acknowledged every event sent before
//! it was reached (the rows of the chunk that reached it among them). A restart reads on from
//! there: a chunk sent but not acknowledged is sent again, never skipped.
//!
//! This file is the state, pure; `sql` reads chunks and writes watermarks and progress.

pub mod sql;

use crate::deliver::Seq;
use pgoutput::{Insert, Lsn, Relation};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// One table of the snapshot, as Debezium keeps it in its offsets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collection {
    /// `schema.table`.
    pub id: String,
    /// `(filter)` of the `additional-conditions` entry that matched it.
    pub condition: Option<String>,
    /// The column chunks are ordered by instead of the primary key.
    pub surrogate_key: Option<String>,
}

/// What a restart needs: saved once the position it was reached at is confirmed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// The tables left, the one being read first.
    pub collections: VecDeque<Collection>,
    /// The key of the last row sent of the current table (text forms, key order).
    pub last_key: Option<Vec<String>>,
    /// The current table's largest key when its reading started: rows inserted later are the
    /// stream's.
    pub max_key: Option<Vec<String>>,
    /// The id of the `execute-snapshot` signal: the notifications' id.
    pub correlation_id: Option<String>,
    /// Rows read of the current table so far.
    pub rows_scanned: u64,
}

impl Progress {
    pub fn running(&self) -> bool {
        !self.collections.is_empty()
    }

    pub fn current(&self) -> Option<&Collection> {
        self.collections.front()
    }

    /// The tables as Debezium's notifications list them.
    pub fn ids(&self) -> String {
        self.collections
            .iter()
            .map(|c| c.id.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// On to the next table.
    pub fn next_table(&mut self) {
        self.collections.pop_front();
        self.last_key = None;
        self.max_key = None;
        self.rows_scanned = 0;
    }
}

/// A chunk read and waiting for its window to close.
#[derive(Debug)]
pub struct Chunk {
    /// Its watermarks' ids start with it.
    pub id: String,
    /// Whether the stream brought its open watermark back.
    pub open: bool,
    /// The rows read, in key order, each with its key.
    pub rows: Vec<(Vec<String>, Insert)>,
    /// The relation id the rows are routed under.
    pub relation_id: u32,
    /// The key of the last row read: the next chunk reads after it.
    pub end_key: Vec<String>,
    /// Read-only: the server's WAL position once the chunk was read. The chunk goes out
    /// when the stream passed it (no watermark rows).
    pub close_at: Option<Lsn>,
}

/// The incremental snapshot of one stream.
#[derive(Debug, Default)]
pub struct Incremental {
    pub progress: Progress,
    /// The chunk between its watermarks, if any.
    pub chunk: Option<Chunk>,
    pub paused: bool,
    /// `stop-snapshot` asks, applied before the next chunk (Debezium's order).
    pub stops: Vec<Vec<String>>,
    /// The stream's Relations (a few tables: a scan is enough).
    relations: Vec<Relation>,
    /// The current table's key columns, by name.
    pub key_columns: Vec<String>,
    /// Progress reached once the events numbered before a [`Seq`] were sent, saved once they
    /// were all acknowledged.
    pending: VecDeque<(Seq, Progress)>,
    /// Acknowledged progress not saved yet.
    due: Option<Progress>,
}

impl Incremental {
    /// Resumes saved progress (a restart in the middle of a snapshot).
    pub fn resume(progress: Progress) -> Self {
        Self {
            progress,
            ..Default::default()
        }
    }

    pub fn window_open(&self) -> bool {
        self.chunk.as_ref().is_some_and(|c| c.open)
    }

    /// The stream described `relation` (kept: where a table's key is in its rows).
    pub fn describe(&mut self, relation: &Relation) {
        self.relations
            .retain(|r| r.relation_id != relation.relation_id);
        self.relations.push(relation.clone());
    }

    /// Where the current table's key columns are in the rows of the stream's relation
    /// `relation_id`, if it is the current table's.
    fn key_positions(&self, relation_id: u32) -> Option<Vec<usize>> {
        let current = self.progress.current()?;
        let relation = self
            .relations
            .iter()
            .find(|r| r.relation_id == relation_id)?;
        if format!("{}.{}", relation.namespace, relation.name) != current.id {
            return None;
        }
        self.key_columns
            .iter()
            .map(|k| relation.column_index(k))
            .collect()
    }

    /// A streamed insert, update or delete (`message`, pgoutput bytes) while the window is
    /// open: the chunk's copy of that row is dropped. Returns whether one was.
    pub fn deduplicate(&mut self, message: &pgoutput::LogicalMessage) -> bool {
        use pgoutput::LogicalMessage as M;
        if !self.window_open() {
            return false;
        }
        let (relation_id, tuple) = match message {
            M::Insert(i) => (i.relation_id, &i.new_tuple),
            M::Update(u) => (u.relation_id, &u.new_tuple),
            M::Delete(d) => match d.old_tuple.as_ref().or(d.key_tuple.as_ref()) {
                Some(t) => (d.relation_id, t),
                None => return false,
            },
            _ => return false,
        };
        let Some(positions) = self.key_positions(relation_id) else {
            return false;
        };
        let key: Option<Vec<String>> = positions
            .iter()
            .map(|p| {
                tuple
                    .columns
                    .get(*p)
                    .and_then(|c| c.bytes())
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            })
            .collect();
        let (Some(key), Some(chunk)) = (key, self.chunk.as_mut()) else {
            return false;
        };
        let before = chunk.rows.len();
        chunk.rows.retain(|(k, _)| *k != key);
        chunk.rows.len() != before
    }

    /// The open watermark `id` came back: the window opens if it is the chunk's.
    pub fn opened(&mut self, id: &str) -> bool {
        match self.chunk.as_mut() {
            Some(chunk) if id.starts_with(&chunk.id) => {
                chunk.open = true;
                true
            }
            _ => false,
        }
    }

    /// The close watermark `id` came back: the chunk's rows left to send (none when it is not
    /// the chunk's). Once they are sent, [`Self::sent`].
    pub fn closed(&mut self, id: &str) -> Option<Chunk> {
        if !self.chunk.as_ref().is_some_and(|c| id.starts_with(&c.id)) {
            return None;
        }
        self.chunk.take()
    }

    /// Read-only: the chunk, once the stream reached `position` at or past the WAL position
    /// it was read at.
    pub fn passed(&mut self, position: Lsn) -> Option<Chunk> {
        let ready = self
            .chunk
            .as_ref()
            .and_then(|c| c.close_at)
            .is_some_and(|at| at <= position);
        if ready {
            self.chunk.take()
        } else {
            None
        }
    }

    /// A chunk's rows were handed over, numbered before `next`: the chunk is sent up to its
    /// last row read (rows the stream changed in the window were sent by the stream), saved
    /// once they are acknowledged.
    pub fn sent(&mut self, end_key: Vec<String>, next: Seq) {
        self.progress.last_key = Some(end_key);
        self.reached(next);
    }

    /// Progress reached (a start, a table done, a stop, the end) once the events numbered
    /// before `next` were handed over: saved once they are acknowledged.
    pub fn reached(&mut self, next: Seq) {
        self.pending.push_back((next, self.progress.clone()));
    }

    /// Every event numbered before `delivered_before` was acknowledged: the progress reached
    /// after them is due to be saved.
    pub fn acknowledged(&mut self, delivered_before: Seq) {
        while self
            .pending
            .front()
            .is_some_and(|(at, _)| *at <= delivered_before)
        {
            self.due = self.pending.pop_front().map(|(_, p)| p);
        }
    }

    /// The confirmed progress to save now, if any.
    pub fn take_due(&mut self) -> Option<Progress> {
        self.due.take()
    }

    /// Applies the queued `stop-snapshot` asks (before a chunk): the tables they name leave
    /// the snapshot. Returns the tables removed (the current one last) and whether the
    /// current one was among them.
    pub fn apply_stops(&mut self) -> (Vec<String>, bool) {
        let stops = std::mem::take(&mut self.stops);
        let mut removed = Vec::new();
        let mut current_removed = false;
        for patterns in stops {
            let matches = |id: &str| {
                patterns.is_empty()
                    || patterns
                        .iter()
                        .any(|p| full_match(p, id, false).unwrap_or(false))
            };
            let current = self.progress.current().map(|c| c.id.clone());
            let mut kept = VecDeque::new();
            for (i, c) in self.progress.collections.drain(..).enumerate() {
                if i > 0 && matches(&c.id) {
                    removed.push(c.id);
                } else {
                    kept.push_back(c);
                }
            }
            self.progress.collections = kept;
            if let Some(current) = current.filter(|c| matches(c)) {
                self.progress.next_table();
                removed.push(current);
                current_removed = true;
            }
        }
        (removed, current_removed)
    }
}

/// Whether `pattern` (a regular expression) matches all of `text`. An invalid pattern is
/// compared as text.
pub fn full_match(pattern: &str, text: &str, case_insensitive: bool) -> Option<bool> {
    let anchored = format!("^(?:{pattern})$");
    let regex = regex::RegexBuilder::new(&anchored)
        .case_insensitive(case_insensitive)
        .build();
    Some(match regex {
        Ok(r) => r.is_match(text),
        Err(_) => pattern == text,
    })
}

/// The tables an `execute-snapshot` names, among `known` (`schema.table`, in their order):
/// each entry a regular expression matched whole, case-sensitively; an entry that matches
/// none is kept as it is (its reading then reports UNKNOWN_SCHEMA), as Debezium does. Each
/// table's `additional-conditions` filter is the first whose expression matches it
/// (case-insensitive), wrapped in parentheses.
pub fn expand(
    requested: &[String],
    conditions: &[crate::source::signal::Condition],
    surrogate_key: Option<&str>,
    known: &[String],
) -> Vec<Collection> {
    let mut ids: Vec<String> = Vec::new();
    for entry in requested {
        let matched: Vec<&String> = known
            .iter()
            .filter(|k| full_match(entry, k, false).unwrap_or(false))
            .collect();
        if matched.is_empty() {
            ids.push(entry.clone());
        } else {
            ids.extend(matched.into_iter().cloned());
        }
    }
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(id.clone()));
    ids.into_iter()
        .map(|id| Collection {
            condition: conditions
                .iter()
                .find(|c| full_match(&c.collection, &id, true).unwrap_or(false))
                .map(|c| format!("({})", c.filter)),
            surrogate_key: surrogate_key.map(str::to_owned),
            id,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use pgoutput::{Column, ColumnValue, LogicalMessage, ReplicaIdentity, TupleData};

    fn insert(relation_id: u32, id: &str) -> Insert {
        Insert {
            relation_id,
            new_tuple: TupleData {
                columns: vec![
                    ColumnValue::Text(Bytes::copy_from_slice(id.as_bytes())),
                    ColumnValue::Text(Bytes::from_static(b"payload")),
                ],
            },
        }
    }

    fn running(tables: &[&str]) -> Incremental {
        let mut inc = Incremental::default();
        inc.progress.collections = tables
            .iter()
            .map(|t| Collection {
                id: (*t).into(),
                condition: None,
                surrogate_key: None,
            })
            .collect();
        inc.key_columns = vec!["id".into()];
        inc.describe(&Relation {
            relation_id: 42,
            namespace: "public".into(),
            name: "outbox".into(),
            replica_identity: ReplicaIdentity::Default,
            columns: ["id", "payload"]
                .iter()
                .map(|n| Column {
                    flags: 1,
                    name: (*n).into(),
                    type_oid: 25,
                    type_modifier: -1,
                })
                .collect(),
        });
        inc
    }

    fn chunk(inc: &mut Incremental, id: &str, keys: &[&str]) {
        inc.chunk = Some(Chunk {
            id: id.into(),
            open: false,
            rows: keys
                .iter()
                .map(|k| (vec![(*k).to_owned()], insert(7, k)))
                .collect(),
            relation_id: 7,
            end_key: vec![keys.last().unwrap().to_string()],
            close_at: None,
        });
    }

    /// A streamed change of a chunk's row counts only between the chunk's own watermarks.
    #[test]
    fn the_stream_wins_over_the_chunk_inside_its_window_only() {
        let mut inc = running(&["public.outbox"]);
        chunk(&mut inc, "c1", &["1", "2", "3"]);
        let change = LogicalMessage::Insert(insert(42, "2"));
        assert!(!inc.deduplicate(&change), "before the window opens");
        assert!(!inc.opened("c0-open"), "another chunk's watermark");
        assert!(inc.opened("c1-open"));
        assert!(inc.deduplicate(&change));
        assert!(
            !inc.deduplicate(&LogicalMessage::Insert(insert(43, "1"))),
            "another table"
        );
        assert!(inc.closed("c0-close").is_none());
        let sent = inc.closed("c1-close").unwrap();
        let keys: Vec<_> = sent.rows.iter().map(|(k, _)| k[0].as_str()).collect();
        assert_eq!(keys, ["1", "3"]);
        assert!(!inc.window_open());
    }

    /// Progress is saved only once every event sent before it was reached is acknowledged:
    /// the chunk's rows, and whatever the stream sent before them.
    #[test]
    fn progress_is_due_once_the_rows_before_it_are_acknowledged() {
        let mut tracker = crate::deliver::AckTracker::new(Lsn::ZERO);
        let earlier = tracker.produced();
        let mut inc = running(&["public.outbox"]);
        chunk(&mut inc, "c1", &["1", "2"]);
        inc.opened("c1-open");
        let sent = inc.closed("c1-close").unwrap();
        let rows: Vec<_> = sent.rows.iter().map(|_| tracker.produced()).collect();
        inc.sent(sent.end_key.clone(), tracker.next_seq());
        for ticket in rows {
            let _ = tracker.delivered(ticket);
        }
        inc.acknowledged(tracker.delivered_before());
        assert!(
            inc.take_due().is_none(),
            "an earlier event is still in flight"
        );
        let _ = tracker.delivered(earlier);
        inc.acknowledged(tracker.delivered_before());
        let due = inc.take_due().unwrap();
        assert_eq!(due.last_key, Some(vec!["2".to_owned()]));
        assert!(inc.take_due().is_none());
    }

    #[test]
    fn stops_remove_tables_the_current_last() {
        let mut inc = running(&["public.a", "public.b", "public.c"]);
        inc.stops.push(vec!["public.(a|c)".into()]);
        let (removed, current) = inc.apply_stops();
        assert_eq!(removed, ["public.c", "public.a"]);
        assert!(current);
        assert_eq!(inc.progress.ids(), "public.b");
        inc.stops.push(vec![]);
        assert_eq!(inc.apply_stops().0, ["public.b"]);
        assert!(!inc.progress.running());
    }

    #[test]
    fn requested_tables_expand_as_debezium_expands_them() {
        let known = vec!["public.outbox".to_owned(), "public.outbox_b".to_owned()];
        let conditions = vec![crate::source::signal::Condition {
            collection: "PUBLIC.OUTBOX".into(),
            filter: "aggregate_type = 'A'".into(),
        }];
        let got = expand(
            &[
                "public.outbox.*".into(),
                "public.outbox".into(),
                "x.y".into(),
            ],
            &conditions,
            None,
            &known,
        );
        let ids: Vec<_> = got.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["public.outbox", "public.outbox_b", "x.y"]);
        assert_eq!(got[0].condition.as_deref(), Some("(aggregate_type = 'A')"));
        assert_eq!(got[1].condition, None);
        assert!(
            expand(&["PUBLIC.OUTBOX".into()], &[], None, &known)[0].id == "PUBLIC.OUTBOX",
            "names match case-sensitively"
        );
    }
}
