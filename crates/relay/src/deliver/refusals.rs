//! What the broker refused, by source position, remembered across the sessions of one
//! process, in every mode.
//!
//! A broker refuses a whole batch for one record it refuses (KIP-467): that record is
//! reported refused, its neighbours `_INVALID_DIFFERENT_RECORD`, which proves nothing about
//! them. The neighbours cannot be sent again in this session without landing behind later
//! records of their partition (the idempotent producer renumbers what follows), so the
//! session ends and replays from the last confirmed position. This memory makes the replay
//! dead-letter the refused event before it is sent, so its neighbours go through instead of
//! failing with it again, forever. With `--exactly-once` (`enable.gapless.guarantee`) every
//! refusal by the broker ends the session the same way.
//!
//! Only streamed changes have positions that a replay repeats; snapshot rows are never
//! remembered (a retaken snapshot numbers its rows anew), and neither are polled rows. For
//! those, and for the first time a streamed event meets a refusal, the producer's own checks
//! of a topic's rules (read afresh by each session's producer) refuse the record alone.

use super::exactly_once::EventPosition;
use pgoutput::Lsn;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Default)]
struct Refused {
    /// The event was refused: dead-letter it with this reason.
    event: Option<String>,
    /// Its dead letter was refused as it was: send it without the payload.
    dead_letter: Option<String>,
}

/// Shared by the sessions of one process (clones share the memory).
#[derive(Debug, Clone, Default)]
pub struct Refusals(Arc<Mutex<HashMap<EventPosition, Refused>>>);

impl Refusals {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<EventPosition, Refused>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The broker refused the event at `position` for `reason`.
    pub fn event_refused(&self, position: &EventPosition, reason: &str) {
        if Self::replayed(position) {
            self.with(|m| m.entry(position.clone()).or_default().event = Some(reason.to_owned()));
        }
    }

    /// The dead-letter topic refused the dead letter of the event at `position`.
    pub fn dead_letter_refused(&self, position: &EventPosition, reason: &str) {
        if Self::replayed(position) {
            self.with(|m| {
                m.entry(position.clone()).or_default().dead_letter = Some(reason.to_owned())
            });
        }
    }

    /// What the earlier sessions remembered, read once by a session (its own refusals only
    /// matter to the next): `None` when nothing was, so the hot path asks nothing.
    pub fn earlier(&self) -> Option<Earlier> {
        self.with(|m| (!m.is_empty()).then(|| Earlier(m.clone())))
    }

    /// A session starts at `start`: what was refused before it is never replayed again.
    pub fn forget_before(&self, start: Lsn) {
        self.with(|m| {
            m.retain(|position, _| match position {
                EventPosition::Stream { commit, .. } => *commit >= start,
                EventPosition::Snapshot { .. } => false,
            })
        });
    }

    /// Whether a replay repeats `position`, so that a refusal at it is worth remembering
    /// (see the module's documentation).
    pub fn replayed(position: &EventPosition) -> bool {
        matches!(position, EventPosition::Stream { .. })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.with(|m| m.len())
    }
}

/// What earlier sessions' refusals say, as one session reads them.
#[derive(Debug, Clone)]
pub struct Earlier(HashMap<EventPosition, Refused>);

impl Earlier {
    /// Why the broker refused the event at `position` in an earlier session, if it did.
    pub fn event(&self, position: &EventPosition) -> Option<&str> {
        self.0.get(position)?.event.as_deref()
    }

    /// Why the dead-letter topic refused the dead letter of the event at `position`, if it did.
    pub fn dead_letter(&self, position: &EventPosition) -> Option<&str> {
        self.0.get(position)?.dead_letter.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(commit: u64, index: u32) -> EventPosition {
        EventPosition::Stream {
            commit: Lsn::from_u64(commit),
            index,
            committed_us: None,
        }
    }

    #[test]
    fn a_refusal_is_remembered_until_its_position_cannot_be_replayed() {
        let refusals = Refusals::default();
        refusals.event_refused(&at(100, 1), "Broker: Invalid record");
        refusals.dead_letter_refused(&at(100, 1), "too large");
        refusals.event_refused(&at(200, 0), "Broker: Invalid timestamp");
        refusals.event_refused(
            &EventPosition::Snapshot {
                snapshot: "s".into(),
                row: 3,
            },
            "x",
        );
        assert_eq!(refusals.len(), 2, "snapshot rows are not remembered");
        let earlier = refusals.earlier().unwrap();
        assert_eq!(
            earlier.event(&at(100, 1)),
            Some("Broker: Invalid record"),
            "a refused dead letter keeps the event's refusal"
        );
        assert_eq!(earlier.dead_letter(&at(100, 1)), Some("too large"));
        assert_eq!(earlier.event(&at(100, 0)), None);
        refusals.forget_before(Lsn::from_u64(150));
        let earlier = refusals.earlier().unwrap();
        assert_eq!(earlier.event(&at(100, 1)), None);
        assert!(earlier.event(&at(200, 0)).is_some());
        refusals.forget_before(Lsn::from_u64(200));
        assert!(
            refusals.earlier().unwrap().event(&at(200, 0)).is_some(),
            "a replay from 200 repeats commit 200"
        );
        refusals.forget_before(Lsn::from_u64(201));
        assert!(refusals.earlier().is_none(), "nothing to ask");
    }
}
