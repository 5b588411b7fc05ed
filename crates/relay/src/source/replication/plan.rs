//! What a session's set-up does, decided before it does anything: from the settings and what
//! was seen of the server and the slot, [`plan`] says which steps run, which configuration is
//! refused (and why), and what becomes of the canary. It reads nothing and writes nothing;
//! `set_up.rs` looks, asks it, and carries the plan out.

use crate::config::{CanaryMethod, CdcSettings, PublicationMode, SnapshotMode};

/// What set-up saw before deciding.
#[derive(Debug, Clone, Default)]
pub(super) struct Seen {
    /// The server is a hot standby (in recovery).
    pub from_standby: bool,
    /// `--primary-url` reached the primary of that standby.
    pub primary: bool,
    /// The slot as the server lists it; `None` when it does not exist.
    pub slot: Option<SlotSeen>,
}

/// A slot the server lists.
#[derive(Debug, Clone, Default)]
pub(super) struct SlotSeen {
    /// A failover slot (PostgreSQL 17+; `None` before).
    pub failover: Option<bool>,
    /// Why the server invalidated it, if it did.
    pub invalidation: Option<String>,
}

/// The steps of a set-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// Record, before the slot exists, that its initial snapshot is owed.
    pub register_snapshot: bool,
    /// What becomes of the canary this session.
    pub canary: CanaryStep,
    /// The publication is made on the primary: wait until the standby replayed it.
    pub wait_for_publication: bool,
    /// The slot was invalidated by the server (the reason): it is dealt with as
    /// `--on-missing-slot` says before anything streams.
    pub invalidated: Option<String>,
    /// An existing slot that is not a failover slot yet is made one (`--slot-failover`).
    pub make_failover: bool,
    /// The slot, kept as it is, is a failover slot already.
    failover_already: bool,
}

/// What becomes of the canary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CanaryStep {
    /// `--canary-interval 0`.
    None,
    /// Off this session, for this reason (one warning says it).
    Off(String),
    /// A row of the canary table, which the publication must carry: added to it when the
    /// relay manages its tables (`may_add`), else checked.
    PublishTable { may_add: bool },
    /// A logical decoding message: nothing to prepare.
    Message,
}

impl Plan {
    /// Whether the slot is a failover slot once set-up is done: made or altered so with
    /// `--slot-failover`, or one already (`kept`: the slot seen was kept, not made again).
    pub fn slot_is_failover(&self, kept: bool, cdc: &CdcSettings) -> bool {
        cdc.slot_failover || (kept && self.failover_already)
    }

    /// Whether a slot made now on a standby needs the primary nudged to log its running
    /// transactions (`exists`: the slot exists before this session makes one). A standby
    /// with its primary is where the publication is waited for.
    pub fn nudge_primary(&self, exists: bool) -> bool {
        self.wait_for_publication && !exists
    }
}

/// The set-up of a session with `cdc`, `--cleanup` when `cleanup`, given what was `seen`. An
/// error is a configuration that cannot work on this server, with what to change.
pub(super) fn plan(cdc: &CdcSettings, cleanup: bool, seen: &Seen) -> Result<Plan, String> {
    let writes_refused = seen.from_standby && !seen.primary;
    let new_slot = seen.slot.is_none();
    if cdc.snapshot != SnapshotMode::NoData && writes_refused && new_slot {
        return Err(
            "snapshot.mode=initial on a standby records its progress in a table, which only the primary can \
             write: pass --primary-url (the primary of this standby), or use snapshot.mode=no_data"
                .into(),
        );
    }
    if cleanup && writes_refused {
        return Err(
            "--cleanup deletes relayed rows, which only the primary can do: pass --primary-url (the primary of \
             this standby), or run without --cleanup"
                .into(),
        );
    }
    let canary = match &cdc.canary {
        None => CanaryStep::None,
        Some(_) if writes_refused => CanaryStep::Off(
            "it is written on the primary, and this relay captures from a standby without --primary-url".into(),
        ),
        Some(canary) if canary.method == CanaryMethod::Table => CanaryStep::PublishTable {
            may_add: matches!(
                cdc.publication_mode,
                PublicationMode::OutboxInsertsOnly | PublicationMode::Filtered
            ),
        },
        Some(_) => CanaryStep::Message,
    };
    let slot = seen.slot.clone().unwrap_or_default();
    Ok(Plan {
        // Only for a slot still to be made: an existing one's snapshot was decided when it
        // was made.
        register_snapshot: cdc.snapshot != SnapshotMode::NoData && new_slot,
        canary,
        wait_for_publication: seen.from_standby && seen.primary,
        invalidated: slot.invalidation,
        make_failover: cdc.slot_failover && slot.failover == Some(false),
        failover_already: slot.failover == Some(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Canary, OnMissingSlot, OnServerRewind};
    use std::time::Duration;

    fn cdc() -> CdcSettings {
        CdcSettings {
            slot: "s".into(),
            publication: "p".into(),
            publication_mode: PublicationMode::OutboxInsertsOnly,
            snapshot: SnapshotMode::NoData,
            snapshot_fetch_size: 100,
            signals: Default::default(),
            heartbeat: None,
            status_interval: Duration::from_secs(1),
            on_missing_slot: OnMissingSlot::Refuse,
            on_server_rewind: OnServerRewind::Refuse,
            exactly_once: false,
            slot_failover: false,
            canary: Some(Canary {
                interval: Duration::from_secs(10),
                max_age: Duration::from_secs(60),
                topic: "c".into(),
                read_back: false,
                method: CanaryMethod::Table,
            }),
        }
    }

    const PRIMARY: Seen = Seen {
        from_standby: false,
        primary: false,
        slot: None,
    };
    const STANDBY_ALONE: Seen = Seen {
        from_standby: true,
        primary: false,
        slot: None,
    };
    const STANDBY_WITH_PRIMARY: Seen = Seen {
        from_standby: true,
        primary: true,
        slot: None,
    };

    fn with_slot(seen: Seen, failover: Option<bool>, invalidation: Option<&str>) -> Seen {
        Seen {
            slot: Some(SlotSeen {
                failover,
                invalidation: invalidation.map(str::to_owned),
            }),
            ..seen
        }
    }

    #[test]
    fn on_a_primary_every_step_runs_here() {
        let p = plan(&cdc(), true, &PRIMARY).unwrap();
        assert_eq!(p.canary, CanaryStep::PublishTable { may_add: true });
        assert!(!p.wait_for_publication && !p.nudge_primary(false));
        assert!(!p.register_snapshot, "no-data owes no snapshot");
        let initial = CdcSettings {
            snapshot: SnapshotMode::Initial,
            ..cdc()
        };
        assert!(plan(&initial, false, &PRIMARY).unwrap().register_snapshot);
        assert!(
            !plan(&initial, false, &with_slot(PRIMARY, None, None))
                .unwrap()
                .register_snapshot,
            "an existing slot's snapshot was decided when it was made"
        );
    }

    #[test]
    fn a_standby_without_its_primary_refuses_what_needs_writes_and_turns_the_canary_off() {
        let initial = CdcSettings {
            snapshot: SnapshotMode::Initial,
            ..cdc()
        };
        let err = plan(&initial, false, &STANDBY_ALONE).unwrap_err();
        assert!(err.contains("--primary-url"), "{err}");
        // An existing slot's snapshot is recorded already: nothing to write.
        let p = plan(&initial, false, &with_slot(STANDBY_ALONE, None, None)).unwrap();
        assert!(!p.register_snapshot);
        let err = plan(&cdc(), true, &STANDBY_ALONE).unwrap_err();
        assert!(err.starts_with("--cleanup"), "{err}");
        let p = plan(&cdc(), false, &STANDBY_ALONE).unwrap();
        assert!(matches!(p.canary, CanaryStep::Off(ref why) if why.contains("--primary-url")));
    }

    #[test]
    fn a_standby_with_its_primary_writes_there_and_waits_for_the_replay() {
        let initial = CdcSettings {
            snapshot: SnapshotMode::Initial,
            ..cdc()
        };
        let p = plan(&initial, true, &STANDBY_WITH_PRIMARY).unwrap();
        assert!(p.register_snapshot && p.wait_for_publication);
        assert_eq!(p.canary, CanaryStep::PublishTable { may_add: true });
        assert!(p.nudge_primary(false), "a slot made on the standby");
        assert!(!p.nudge_primary(true), "a slot that exists");
    }

    #[test]
    fn the_canary_table_is_added_only_to_a_publication_the_relay_manages() {
        for (mode, may_add) in [
            (PublicationMode::OutboxInsertsOnly, true),
            (PublicationMode::Filtered, true),
            (PublicationMode::AllTables, false),
            (PublicationMode::NoTables, false),
            (PublicationMode::Disabled, false),
        ] {
            let settings = CdcSettings {
                publication_mode: mode,
                ..cdc()
            };
            assert_eq!(
                plan(&settings, false, &PRIMARY).unwrap().canary,
                CanaryStep::PublishTable { may_add },
                "{mode:?}"
            );
        }
        let mut message = cdc();
        message.canary.as_mut().unwrap().method = CanaryMethod::Message;
        assert_eq!(
            plan(&message, false, &PRIMARY).unwrap().canary,
            CanaryStep::Message
        );
        let off = CdcSettings {
            canary: None,
            ..cdc()
        };
        assert_eq!(
            plan(&off, false, &PRIMARY).unwrap().canary,
            CanaryStep::None
        );
    }

    #[test]
    fn slot_failover_alters_an_existing_slot_and_reports_what_the_slot_is() {
        let failover = CdcSettings {
            slot_failover: true,
            ..cdc()
        };
        let p = plan(&failover, false, &with_slot(PRIMARY, Some(false), None)).unwrap();
        assert!(p.make_failover);
        assert!(p.slot_is_failover(true, &failover));
        // Without the flag, a slot that is one already is reported so while it is kept.
        let p = plan(&cdc(), false, &with_slot(PRIMARY, Some(true), None)).unwrap();
        assert!(!p.make_failover);
        assert!(p.slot_is_failover(true, &cdc()));
        assert!(
            !p.slot_is_failover(false, &cdc()),
            "made again without the flag"
        );
        // PostgreSQL before 17 says nothing of failover: nothing to alter.
        let p = plan(&failover, false, &with_slot(PRIMARY, None, None)).unwrap();
        assert!(!p.make_failover);
    }

    #[test]
    fn an_invalidated_slot_is_named_with_the_reason() {
        let p = plan(
            &cdc(),
            false,
            &with_slot(PRIMARY, None, Some("wal_removed")),
        )
        .unwrap();
        assert_eq!(p.invalidated.as_deref(), Some("wal_removed"));
    }
}
