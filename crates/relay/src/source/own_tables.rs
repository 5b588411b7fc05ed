//! The names of the tables the relay keeps for its own purposes, in the outbox table's schema:
//! in one place, so that the catalog leaves them out of the outbox tables a pattern matches
//! without knowing the modules that write them.

/// The canary's rows (`canary.rs`).
pub const CANARIES: &str = "outbox_relay_canaries";
/// Which slots owe or took their initial snapshot (`snapshot.rs`).
pub const SNAPSHOTS: &str = "outbox_relay_snapshots";
/// The slots the relay streamed from (`slot_history.rs`).
pub const SLOTS: &str = "outbox_relay_slots";
/// `--cleanup`'s ledger of relayed rows (`cleanup.rs`).
pub const CLEANUP: &str = "outbox_relay_cleanup";
/// Polling mode's whole rows of events Kafka refused for good (`dead_letter_table.rs`).
pub const DEAD_LETTERS: &str = "outbox_relay_dead_letters";

/// Where incremental snapshots stand, per slot (`incremental/sql.rs`).
pub const INCREMENTAL_SNAPSHOTS: &str = "outbox_relay_incremental_snapshots";

/// Every one of them.
pub const ALL: [&str; 6] = [
    CANARIES,
    SNAPSHOTS,
    SLOTS,
    CLEANUP,
    DEAD_LETTERS,
    INCREMENTAL_SNAPSHOTS,
];
