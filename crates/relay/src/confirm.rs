//! Confirm: what goes back to the source once events are delivered. In CDC mode that is the
//! LSN the acknowledgement tracker allows (`deliver/tracker.rs` decides it; this module only
//! reports it): to the replication connection, to the metrics, and to the position the next
//! session resumes from. Polling mode confirms by committing its batch's transaction
//! (`source/polling.rs`).

use crate::metrics::Metrics;
use pgoutput::Lsn;
use std::collections::VecDeque;
use std::sync::Arc;

/// Reports confirmed positions of one slot, across sessions.
pub struct Confirmations {
    /// The highest position confirmed by any session of this process: a new session resumes
    /// from it if the slot has not recorded it yet (PostgreSQL skips transactions that
    /// committed before the start position).
    confirmed: Option<Lsn>,
    /// (end LSN, commit time in PostgreSQL micros) of commits not yet confirmed, for the
    /// commit-to-acknowledgement latency.
    commit_times: VecDeque<(Lsn, i64)>,
    metrics: Arc<Metrics>,
}

impl Confirmations {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            confirmed: None,
            commit_times: VecDeque::new(),
            metrics,
        }
    }

    /// Where a new session starts: the slot's position, or ours if it is ahead.
    pub fn resume_from(&mut self, slot_position: Lsn) -> Lsn {
        let start = self
            .confirmed
            .map_or(slot_position, |c| c.max(slot_position));
        self.confirmed = Some(start);
        self.commit_times.clear();
        self.metrics.set_commit_times(None, None);
        start
    }

    /// Forgets this process's position: the next session starts from the slot's own (after a
    /// failover, or on a slot created just now).
    pub fn forget(&mut self) {
        self.confirmed = None;
    }

    pub fn last(&self) -> Option<Lsn> {
        self.confirmed
    }

    /// A transaction committed at `end_lsn` (its events may still be in flight).
    pub fn committed(&mut self, end_lsn: Lsn, commit_time_micros: i64) {
        self.commit_times.push_back((end_lsn, commit_time_micros));
        if self.commit_times.len() == 1 {
            self.metrics
                .set_commit_times(Some(commit_time_micros), None);
        }
    }

    /// `lsn` may be confirmed: every event at or before it is acknowledged.
    pub fn confirmed(&mut self, lsn: Lsn) {
        self.confirmed = Some(lsn);
        self.metrics.set_confirmed(lsn);
        let now = crate::pg_time::now_micros();
        let mut newest = None;
        while let Some(&(end_lsn, committed_at)) = self.commit_times.front() {
            if end_lsn > lsn {
                break;
            }
            self.commit_times.pop_front();
            newest = Some(committed_at);
            self.metrics
                .commit_to_ack_seconds
                .observe((now - committed_at).max(0) as f64 / 1e6);
        }
        self.metrics
            .set_commit_times(self.commit_times.front().map(|&(_, t)| t), newest);
        tracing::debug!(%lsn, "confirmed");
    }
}
