//! Where rows come from: logical replication (CDC) or polling, what each needs, and how the
//! options resolve into it (a new source option: its flag in `options.rs`, its setting and
//! check here, and, for a Debezium name, one `Native` line in the option catalog).

use super::{defaults, invalid, ConfigError, Mode, Preset, RunOptions};
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
    /// Signals and the incremental snapshots they start.
    pub signals: Box<SignalSettings>,
}

/// Debezium's signals (`signal.*`) and incremental snapshots (`incremental.snapshot.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalSettings {
    /// `--signal-table`: where the source channel's signals are inserted and incremental
    /// snapshots write their watermarks.
    pub table: Option<outbox_router::TableName>,
    /// `--signal-channels`.
    pub source: bool,
    pub kafka: bool,
    pub file: bool,
    /// The Kafka channel's topic, brokers (`None`: the relay's) and group.
    pub kafka_topic: Option<String>,
    pub kafka_bootstrap_servers: Option<String>,
    pub kafka_group_id: String,
    /// The file channel's file.
    pub file_path: std::path::PathBuf,
    pub poll_interval: Duration,
    pub chunk_size: usize,
    /// `--incremental-snapshot-read-only`: no watermark rows (read.only).
    pub read_only: bool,
}

impl Default for SignalSettings {
    fn default() -> Self {
        Self {
            table: None,
            source: true,
            kafka: false,
            file: false,
            kafka_topic: None,
            kafka_bootstrap_servers: None,
            kafka_group_id: "kafka-signal".into(),
            file_path: "file-signals.txt".into(),
            poll_interval: Duration::from_millis(defaults::SIGNAL_POLL_INTERVAL_MS),
            chunk_size: defaults::INCREMENTAL_SNAPSHOT_CHUNK_SIZE,
            read_only: false,
        }
    }
}

impl SignalSettings {
    /// Whether any channel can bring a signal.
    pub fn any(&self) -> bool {
        (self.source && self.table.is_some()) || self.kafka || self.file
    }
}

fn resolve_signals(o: &RunOptions) -> Result<SignalSettings, ConfigError> {
    let mut settings = SignalSettings::default();
    if let Some(table) = o
        .signal_table
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        let parsed = outbox_router::TableName::parse(table)
            .map_err(|e| invalid("signal-table", format!("{table:?}: {e}")))?;
        settings.table = Some(parsed);
    }
    if let Some(list) = &o.signal_channels {
        settings.source = false;
        for channel in list.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            match channel.to_ascii_lowercase().as_str() {
                "source" => settings.source = true,
                "kafka" => settings.kafka = true,
                "file" => settings.file = true,
                "jmx" => tracing::warn!(
                    "signal channel jmx: no JMX runs in outbox-relay; use source, kafka or file"
                ),
                other => {
                    return Err(invalid(
                        "signal-channels",
                        format!("{other:?} is not a signal channel (source, kafka, file)"),
                    ))
                }
            }
        }
    }
    settings.kafka_topic = o
        .signal_kafka_topic
        .clone()
        .filter(|t| !t.trim().is_empty());
    settings.kafka_bootstrap_servers = o
        .signal_kafka_bootstrap_servers
        .clone()
        .filter(|t| !t.trim().is_empty());
    if let Some(group) = o
        .signal_kafka_group_id
        .clone()
        .filter(|g| !g.trim().is_empty())
    {
        settings.kafka_group_id = group;
    }
    if let Some(path) = &o.signal_file {
        settings.file_path = path.clone();
    }
    if let Some(ms) = o.signal_poll_interval_ms {
        settings.poll_interval = Duration::from_millis(ms.max(10));
    }
    if let Some(n) = o.incremental_snapshot_chunk_size {
        settings.chunk_size = n.get();
    }
    settings.read_only = o.incremental_snapshot_read_only.unwrap_or(false);
    Ok(settings)
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

/// `--publication-mode`: what to do when the publication does not exist (Debezium's
/// `publication.autocreate.mode` plus outbox-relay's own default).
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

/// `--snapshot-mode`: whether rows already in the outbox when the slot is created are
/// relayed.
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
pub enum SnapshotMode {
    /// Existing outbox rows are not emitted; outbox-relay's default.
    #[default]
    NoData,
    /// Existing rows are emitted once, when the slot is created.
    Initial,
    /// Existing rows are emitted at every start (Debezium's `always`): read again in a
    /// snapshot of their own when the slot exists, then the stream from the slot, so rows
    /// the slot still holds come twice rather than not at all.
    Always,
    /// Existing rows are emitted once, and nothing is streamed (Debezium's `initial_only`):
    /// no slot is created; the relay then stays up, idle, until stopped.
    InitialOnly,
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

/// `--cleanup`, `--cleanup-batch`, `--cleanup-interval`, `--cleanup-grace`.
pub(super) fn resolve_cleanup(
    o: &RunOptions,
    source: &SourceSettings,
) -> Result<Option<Cleanup>, ConfigError> {
    if !o.cleanup.unwrap_or(false) {
        for (key, set) in [
            ("cleanup-batch", o.cleanup_batch.is_some()),
            ("cleanup-interval", o.cleanup_interval.is_some()),
            ("cleanup-grace", o.cleanup_grace.is_some()),
        ] {
            if set {
                return Err(invalid(key, "applies only with --cleanup"));
            }
        }
        return Ok(None);
    }
    let batch = o.cleanup_batch.unwrap_or(defaults::CLEANUP_BATCH);
    if !(1..=1_000_000).contains(&batch) {
        return Err(invalid(
            "cleanup-batch",
            format!("{batch}; expected 1 to 1000000"),
        ));
    }
    let interval = o.cleanup_interval.unwrap_or(defaults::CLEANUP_INTERVAL_S);
    if interval == 0 {
        return Err(invalid("cleanup-interval", "0; expected at least 1 second"));
    }
    let grace = o.cleanup_grace.unwrap_or(0);
    if grace > 60 * 24 * 366 {
        return Err(invalid(
            "cleanup-grace",
            format!("{grace} minutes; expected at most a year (527040)"),
        ));
    }
    if let SourceSettings::Polling(polling) = source {
        if polling.retire == Retire::Delete {
            return Err(invalid(
                "cleanup",
                "polling mode without --processed-column deletes each row as it relays it: there is nothing left \
                 to clean; pass --processed-column to keep rows (and --cleanup-grace to keep them a while)",
            ));
        }
    }
    Ok(Some(Cleanup {
        batch,
        interval: Duration::from_secs(interval),
        grace: Duration::from_secs(grace * 60),
    }))
}

/// `--canary-interval`, `--canary-max-age`, `--canary-topic`, `--canary-method`.
fn resolve_canary(o: &RunOptions) -> Result<Option<Canary>, ConfigError> {
    let interval = o.canary_interval.unwrap_or(defaults::CANARY_INTERVAL_S);
    if interval == 0 {
        if o.canary_read_back == Some(true) {
            return Err(invalid(
                "canary-read-back",
                "reads canaries back, and --canary-interval 0 writes none",
            ));
        }
        if o.canary_method.is_some() {
            return Err(invalid(
                "canary-method",
                "says how canaries are written, and --canary-interval 0 writes none",
            ));
        }
        return Ok(None);
    }
    let method = o.canary_method.unwrap_or_default();
    if method == CanaryMethod::Message && o.mode == Some(Mode::Polling) {
        return Err(invalid(
            "canary-method",
            "message applies only with --mode cdc (polling reads no slot; its canary is a row of the canary table)",
        ));
    }
    let max_age = o.canary_max_age.unwrap_or(defaults::CANARY_MAX_AGE_S);
    if max_age <= interval {
        return Err(invalid(
            "canary-max-age",
            format!("{max_age} s; it must be longer than --canary-interval ({interval} s), or every wait between two canaries would turn /ready red"),
        ));
    }
    let topic = o
        .canary_topic
        .clone()
        .unwrap_or_else(|| defaults::CANARY_TOPIC.into());
    if topic.trim().is_empty() {
        return Err(invalid("canary-topic", "empty"));
    }
    Ok(Some(Canary {
        interval: Duration::from_secs(interval),
        max_age: Duration::from_secs(max_age),
        topic,
        read_back: o.canary_read_back.unwrap_or(false),
        method,
    }))
}

pub(super) fn resolve_source(
    o: &RunOptions,
    preset: Option<&Preset>,
) -> Result<SourceSettings, ConfigError> {
    match o.mode.unwrap_or(Mode::Cdc) {
        Mode::Cdc => {
            for (key, set) in [
                ("poll-interval-ms", o.poll_interval_ms.is_some()),
                ("poll-batch-size", o.poll_batch_size.is_some()),
                ("poll-order-by", o.poll_order_by.is_some()),
                ("processed-column", o.processed_column.is_some()),
            ] {
                if set {
                    return Err(invalid(key, "applies only with --mode polling"));
                }
            }
            let slot = o.slot.clone().unwrap_or_else(|| defaults::SLOT.into());
            validate_slot_name(&slot).map_err(|m| invalid("slot", m))?;
            let publication = o
                .publication
                .clone()
                .unwrap_or_else(|| defaults::PUBLICATION.into());
            validate_identifier(&publication).map_err(|m| invalid("publication", m))?;
            Ok(SourceSettings::Cdc(CdcSettings {
                slot,
                publication,
                publication_mode: o.publication_mode.unwrap_or_default(),
                snapshot: o.snapshot_mode.unwrap_or_default(),
                snapshot_fetch_size: o
                    .snapshot_fetch_size
                    .map_or(defaults::SNAPSHOT_FETCH_SIZE, |n| n.get()),
                heartbeat: preset.and_then(|p| p.heartbeat.clone()),
                status_interval: Duration::from_millis(
                    o.status_interval_ms
                        .unwrap_or(defaults::STATUS_INTERVAL_MS)
                        .max(10),
                ),
                on_missing_slot: o.on_missing_slot.unwrap_or_default(),
                on_server_rewind: o.on_server_rewind.unwrap_or_default(),
                exactly_once: o.exactly_once.unwrap_or(false),
                slot_failover: o.slot_failover.unwrap_or(false),
                canary: resolve_canary(o)?,
                signals: Box::new(resolve_signals(o)?),
            }))
        }
        Mode::Polling => {
            for (key, set) in [
                ("on-missing-slot", o.on_missing_slot.is_some()),
                ("snapshot-mode", o.snapshot_mode.is_some()),
                ("snapshot-fetch-size", o.snapshot_fetch_size.is_some()),
                ("publication-mode", o.publication_mode.is_some()),
                ("signal-table", o.signal_table.is_some()),
                ("signal-channels", o.signal_channels.is_some()),
            ] {
                if set {
                    return Err(invalid(
                        key,
                        "applies only with --mode cdc (polling reads the table itself: no slot, no publication)",
                    ));
                }
            }
            if o.on_server_rewind.is_some() {
                return Err(invalid(
                    "on-server-rewind",
                    "applies only with --mode cdc (polling reads the table, not positions)",
                ));
            }
            if o.slot_failover == Some(true) {
                return Err(invalid(
                    "slot-failover",
                    "applies only with --mode cdc (polling uses no slot)",
                ));
            }
            if o.exactly_once == Some(true) {
                return Err(invalid(
                    "exactly-once",
                    "applies only with --mode cdc: rows read by polling have no commit position to compare with what                      Kafka holds (a row that commits late gets an older id than rows already relayed)",
                ));
            }
            let batch_size = o.poll_batch_size.unwrap_or(defaults::POLL_BATCH_SIZE);
            if !(1..=1_000_000).contains(&batch_size) {
                return Err(invalid(
                    "poll-batch-size",
                    format!("{batch_size}; expected 1 to 1000000"),
                ));
            }
            Ok(SourceSettings::Polling(PollingSettings {
                interval: Duration::from_millis(
                    o.poll_interval_ms.unwrap_or(defaults::POLL_INTERVAL_MS),
                ),
                batch_size,
                order_by: o.poll_order_by.clone(),
                retire: match o.processed_column.clone() {
                    Some(c) => Retire::MarkProcessed(c),
                    None => Retire::Delete,
                },
                canary: resolve_canary(o)?,
            }))
        }
    }
}
