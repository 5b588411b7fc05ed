//! Where rows come from: logical replication (CDC) or polling, and what each needs.

use std::time::Duration;

/// The one source a `run` reads from.
#[derive(Debug, Clone)]
pub enum SourceSettings {
    Cdc(CdcSettings),
    Polling(PollingSettings),
}

/// Logical replication: slot, publication, and how the stream starts.
#[derive(Debug, Clone)]
pub struct CdcSettings {
    pub slot: String,
    pub publication: String,
    pub publication_mode: PublicationMode,
    pub snapshot: SnapshotMode,
    /// Rows the snapshot fetches at most per round trip (`snapshot.fetch.size`).
    pub snapshot_fetch_size: usize,
    pub heartbeat: Option<Heartbeat>,
    /// How often the confirmed position is reported to PostgreSQL.
    pub status_interval: Duration,
    /// What to do when a slot this relay streamed from before is gone.
    pub on_missing_slot: OnMissingSlot,
    /// What to do when the server went back in time (same system and timeline, its WAL ends
    /// before what this relay confirmed to it).
    pub on_server_rewind: OnServerRewind,
    /// `--exactly-once`: replays skip what Kafka already has.
    pub exactly_once: bool,
    /// `--slot-failover`: the slot is a failover slot (PostgreSQL 17+).
    pub slot_failover: bool,
    /// The end-to-end canary (`--canary-interval`); `None` when off.
    pub canary: Option<Canary>,
}

/// The end-to-end canary: written every `interval`, relayed through the relay's own stream
/// to `topic`; /ready turns red when the newest one Kafka acknowledged is older than
/// `max_age`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canary {
    pub interval: Duration,
    pub max_age: Duration,
    pub topic: String,
    /// `--canary-read-back`: a consumer reads the canaries back from `topic`.
    pub read_back: bool,
    /// `--canary-method`: how a canary enters the stream.
    pub method: CanaryMethod,
}

/// `--canary-method`: how a canary enters the relay's stream.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Deserialize,
    serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum CanaryMethod {
    /// A row of the canary table `outbox_relay_canaries`, in the outbox table's schema and in
    /// the relay's own publication: only consumers of that publication (or of a publication
    /// FOR ALL TABLES that captures every table) ever see it (the default).
    #[default]
    Table,
    /// A transactional logical decoding message (`pg_logical_emit_message`). PostgreSQL sends
    /// every such message to every logical decoding consumer of the database, whatever its
    /// publication: another team's Debezium connector receives it, and fails on it when its
    /// chain cannot take a message record. Only when asked for by name; CDC mode.
    Message,
}

/// `--cleanup`: relayed rows deleted by the relay, `batch` rows at most every `interval`,
/// once they are `grace` old.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleanup {
    pub batch: u32,
    pub interval: Duration,
    pub grace: Duration,
}

/// `--on-missing-slot`: a slot the relay streamed from before has disappeared.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Deserialize,
    serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum OnMissingSlot {
    /// Stop with an error that names the slot and the choices (the default).
    #[default]
    Refuse,
    /// Create it again with an exported snapshot and relay every row still in the outbox
    /// table (rows relayed before come again: consumers deduplicate by event id).
    Reread,
    /// Create it again at the current position, accepting that events written since the old
    /// slot's position are not relayed.
    AcceptGap,
}

/// `--on-server-rewind`: the server this relay streams from went back in time — restored from
/// a file-system copy or a VM snapshot, or a cold copy started — keeping its system identifier
/// and timeline while its WAL ends before what this relay confirmed to it. Resuming from the
/// confirmed position would skip every commit the server makes below it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Deserialize,
    serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum OnServerRewind {
    /// Stop with an error that names the positions and the choices (the default).
    #[default]
    Refuse,
    /// Resume from the server's slot position: everything the server has after it is relayed
    /// (events it had relayed before come again), nothing it writes is skipped.
    Reread,
    /// Resume from what was confirmed, as before the rewind: commits the server makes below
    /// it are not relayed.
    AcceptGap,
}

/// `run --mode polling`.
#[derive(Debug, Clone)]
pub struct PollingSettings {
    pub interval: Duration,
    pub batch_size: i64,
    /// An identity or serial column (insertion order); `None`: the table's own.
    pub order_by: Option<String>,
    pub retire: Retire,
    /// The end-to-end canary: a row of the canary table, read by the polls (`None` when off).
    pub canary: Option<Canary>,
}

/// How a relayed row is retired in polling mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retire {
    Delete,
    /// `UPDATE ... SET <column> = now()`; pending rows are those where it IS NULL.
    MarkProcessed(String),
}

/// What to do when the publication does not exist (Debezium's `publication.autocreate.mode`
/// plus outbox-relay's own default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PublicationMode {
    /// `FOR TABLE <outbox> WITH (publish = 'insert')`: only what the relay needs.
    #[default]
    OutboxInsertsOnly,
    /// `FOR TABLE <outbox>`, every operation.
    Filtered,
    /// `FOR ALL TABLES`; needs a superuser.
    AllTables,
    /// An empty publication, tables added by a DBA.
    NoTables,
    /// The publication must exist.
    Disabled,
}

/// Whether rows already in the outbox when the slot is created are relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnapshotMode {
    /// Existing outbox rows are not emitted; outbox-relay's default.
    #[default]
    NoData,
    /// Existing rows are emitted once, when the slot is created.
    Initial,
}

/// A statement run at an interval on its own connection (Debezium's
/// `heartbeat.action.query`), so that a database whose other tables are not published still
/// produces WAL the slot can move past.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    pub interval: Duration,
    pub action_query: Option<String>,
}

/// PostgreSQL's rule for replication slot names: lower-case letters, digits, underscore.
pub fn validate_slot_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 63 {
        return Err(format!("{name:?} must be 1 to 63 characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(format!(
            "{name:?} may contain only lower-case letters, digits and underscores"
        ));
    }
    Ok(())
}

/// Publication names are interpolated into START_REPLICATION: keep them to plain identifiers.
pub fn validate_identifier(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 63 {
        return Err(format!("{name:?} must be 1 to 63 characters"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!(
            "{name:?} may contain only letters, digits and underscores"
        ));
    }
    Ok(())
}
