//! Settings for `outbox-relay run` and `check`, by concern: where rows come from
//! ([`SourceSettings`]), where they go ([`KafkaSettings`]), how they are routed
//! ([`RouterConfig`]) and where the relay is observed ([`Settings::metrics_address`]).
//!
//! [`RunOptions`] are what a user types (command line, environment, `--config` file);
//! a foreign configuration (a Debezium connector) arrives as a [`Preset`] that the
//! `debezium` module translates into native settings — this module does not know Debezium.
//! [`Settings::resolve`] applies the defaults of `defaults.rs` and validates, naming the
//! setting in every error.

pub mod defaults;
mod kafka;
mod options;
mod postgres;
mod source;

pub use kafka::{
    client_config_error, parse_producer_property, ClientRole, KafkaSettings, TopicCreation,
    TopicGroup,
};
pub use options::{Mode, RunOptions};
pub use postgres::{ConnectionInfo, SessionTarget};
pub use source::{
    validate_identifier, validate_slot_name, Canary, CanaryMethod, CdcSettings, Cleanup, Heartbeat,
    OnMissingSlot, OnServerRewind, PollingSettings, PublicationMode, Retire, SnapshotMode,
    SourceSettings,
};

use crate::secret::Secret;
use outbox_router::{
    AdditionalField, ListPattern, MessageConfig, Placement, RouterConfig, TableName, TopicTemplate,
};
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{key}: {message}")]
    Invalid { key: &'static str, message: String },
    #[error("missing required setting {key}: pass {flag} or set {env}, or put `{key} = ...` in the --config file")]
    Missing {
        key: &'static str,
        flag: &'static str,
        env: &'static str,
    },
    #[error("config file {path}: {message}")]
    File { path: String, message: String },
}

pub fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

/// Validated settings with defaults applied.
#[derive(Debug, Clone)]
pub struct Settings {
    pub postgres_url: Secret,
    /// `--primary-url`: the primary of the standby `postgres_url` names, for writes.
    pub primary_url: Option<Secret>,
    /// Run on every SQL connection (Debezium's `database.initial.statements`).
    pub initial_statements: Vec<String>,
    pub source: SourceSettings,
    pub kafka: KafkaSettings,
    pub router: RouterConfig,
    pub metrics_address: String,
    /// `--metrics-topic-limit`.
    pub metrics_topic_limit: usize,
    /// What the start-up log and `check` say about a foreign configuration, if one was used.
    pub preset: Option<PresetSummary>,
    /// `--cleanup`; `None` when off.
    pub cleanup: Option<source::Cleanup>,
}

/// The native settings a foreign configuration (a Debezium connector and its Kafka Connect
/// worker) stands for; command-line options still override the connection and names.
#[derive(Debug, Clone)]
pub struct Preset {
    pub connector_name: Option<String>,
    pub postgres_url: Option<Secret>,
    /// `database.initial.statements`, split.
    pub initial_statements: Vec<String>,
    pub bootstrap_servers: Option<String>,
    /// `table.include.list`: tables named exactly, and patterns for the rest.
    pub tables: Vec<TableName>,
    pub table_patterns: Vec<outbox_router::ListPattern>,
    pub slot: String,
    pub publication: String,
    pub publication_mode: PublicationMode,
    pub snapshot: SnapshotMode,
    /// `snapshot.fetch.size`.
    pub snapshot_fetch_size: Option<usize>,
    pub heartbeat: Option<Heartbeat>,
    pub status_interval: Option<Duration>,
    /// `exactly.once.support=required` (or the worker's `exactly.once.source.support=enabled`).
    pub exactly_once: bool,
    /// `slot.failover=true`.
    pub slot_failover: bool,
    /// `outbox.relay.cleanup*` (the relay's own options).
    pub cleanup: CleanupOptions,
    /// `snapshot.mode=when_needed`: a lost position is reread.
    pub on_missing_slot: Option<OnMissingSlot>,
    pub topic_partitions: Option<i32>,
    pub topic_replication_factor: Option<i32>,
    /// `topic.creation.*` topic configs and groups.
    pub topic_creation: kafka::TopicCreation,
    pub router: RouterConfig,
    /// librdkafka properties (translated from `producer.*` / `producer.override.*`).
    pub producer_properties: Vec<(String, String)>,
    /// Lines for the start-up log: which converters are in effect and from where.
    pub notes: Vec<String>,
    /// Options that were not recognised (one warning lists them).
    pub unknown: Vec<String>,
    /// Each option given and what outbox-relay does with it (from the option catalog), for
    /// `check`: `key: treatment (doc)`, never its value.
    pub described: Vec<String>,
    /// The values config providers expanded: no message shows them.
    pub hidden: crate::secret::Redaction,
}

/// `--cleanup` and its settings as a connector configuration gives them.
#[derive(Debug, Clone, Default)]
pub struct CleanupOptions {
    pub cleanup: Option<bool>,
    pub cleanup_batch: Option<u32>,
    pub cleanup_interval: Option<u64>,
    pub cleanup_grace: Option<u64>,
}

/// What the start-up log and `check` say about a preset.
#[derive(Debug, Clone)]
pub struct PresetSummary {
    pub connector_name: Option<String>,
    pub notes: Vec<String>,
    pub unknown_options: Vec<String>,
    /// Each option given and what outbox-relay does with it (see [`Preset::described`]).
    pub described: Vec<String>,
    /// The values config providers expanded: no message shows them.
    pub hidden: crate::secret::Redaction,
}

impl Settings {
    /// `options` already merged with their `--config` file; `preset` from `--debezium-config`.
    pub fn resolve(o: RunOptions, preset: Option<Preset>) -> Result<Self, ConfigError> {
        let hidden = preset
            .as_ref()
            .map(|p| p.hidden.clone())
            .unwrap_or_default();
        Self::resolve_visible(o, preset).map_err(|e| match e {
            ConfigError::Invalid { key, message } => ConfigError::Invalid {
                key,
                message: hidden.apply(&message),
            },
            ConfigError::File { path, message } => ConfigError::File {
                path,
                message: hidden.apply(&message),
            },
            missing => missing,
        })
    }

    fn resolve_visible(mut o: RunOptions, preset: Option<Preset>) -> Result<Self, ConfigError> {
        if let Some(p) = &preset {
            overlay_preset(&mut o, p)?;
        }
        let postgres_url = resolve_postgres_url(&o)?;
        // --table (a comma-separated list) wins over the connector's table.include.list.
        let native_messages = o
            .message_prefix
            .as_deref()
            .map(|list| -> Result<MessageConfig, ConfigError> {
                let include = list
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(|p| ListPattern::new(p).map_err(|e| invalid("message-prefix", e)))
                    .collect::<Result<Vec<_>, _>>()?;
                if include.is_empty() {
                    return Err(invalid(
                        "message-prefix",
                        "names no prefix; expected REGEX[,REGEX...]",
                    ));
                }
                Ok(MessageConfig {
                    include,
                    ..MessageConfig::default()
                })
            })
            .transpose()?;
        let (tables, table_patterns) = match (&o.table, &preset) {
            (Some(list), _) if list.trim().is_empty() && native_messages.is_some() => {
                (Vec::new(), Vec::new())
            }
            (Some(list), _) => (parse_tables(list)?, Vec::new()),
            (None, Some(p)) => (p.tables.clone(), p.table_patterns.clone()),
            (None, None) => (
                vec![TableName::parse(defaults::TABLE).expect("the default table name is valid")],
                Vec::new(),
            ),
        };
        let router = match &preset {
            Some(p) => {
                let mut router = RouterConfig {
                    tables,
                    table_patterns,
                    ..p.router.clone()
                };
                if let outbox_router::Output::Connect(format) = &mut router.output {
                    if !o.propagate_tracing.unwrap_or(false) {
                        format.tracing_span_context_column = None;
                    }
                    // One run id per start, like a Debezium task's (UUIDv7: time-ordered).
                    if let Some(context) = &mut format.context_headers {
                        context.run_id = Some(uuid::Uuid::now_v7().to_string());
                    }
                }
                router
            }
            None => RouterConfig {
                messages: native_messages.clone(),
                ..resolve_router(&o, tables)?
            },
        };
        if preset.is_some() && native_messages.is_some() {
            return Err(invalid(
                "message-prefix",
                "with a Debezium configuration, relay messages with message.prefix.include.list and                  DecodeLogicalDecodingMessageContent in the connector config",
            ));
        }
        let source = resolve_source(&o, preset.as_ref())?;
        if matches!(source, SourceSettings::Polling(_)) && router.messages.is_some() {
            return Err(invalid(
                "message-prefix",
                "logical decoding messages reach the relay through logical replication: use CDC mode",
            ));
        }
        if matches!(source, SourceSettings::Polling(_))
            && (router.tables.len() != 1 || !router.table_patterns.is_empty())
        {
            return Err(invalid(
                "table",
                "polling mode relays one outbox table per instance; run one instance per table, or use CDC mode (one slot for several tables)",
            ));
        }
        let kafka = resolve_kafka(&o, preset.as_ref())?;
        let cleanup = resolve_cleanup(&o, &source)?;
        if o.exactly_once == Some(true) {
            if let Some(v) = kafka.property(&["enable.gapless.guarantee"]) {
                if v != "true" {
                    return Err(invalid(
                        "producer-property",
                        format!("enable.gapless.guarantee={v} cannot be combined with --exactly-once, which relies on \
                                 partitions without gaps"),
                    ));
                }
            }
        }
        let primary_url = o
            .primary_url
            .clone()
            .map(|url| {
                ConnectionInfo::parse(url.expose())
                    .map(|_| url)
                    .map_err(|e| invalid("primary-url", e.to_string()))
            })
            .transpose()?;
        if primary_url.is_some() && matches!(source, SourceSettings::Polling(_)) {
            return Err(invalid(
                "primary-url",
                "applies only with --mode cdc (capture from a standby); polling needs the primary itself",
            ));
        }
        Ok(Self {
            postgres_url,
            primary_url,
            initial_statements: preset
                .as_ref()
                .map(|p| p.initial_statements.clone())
                .unwrap_or_default(),
            source,
            kafka,
            router,
            metrics_address: o
                .metrics_address
                .unwrap_or_else(|| defaults::METRICS_ADDRESS.into()),
            metrics_topic_limit: o
                .metrics_topic_limit
                .unwrap_or(defaults::METRICS_TOPIC_LIMIT),
            cleanup,
            preset: preset.map(|p| PresetSummary {
                connector_name: p.connector_name,
                notes: p.notes,
                unknown_options: p.unknown,
                described: p.described,
                hidden: p.hidden,
            }),
        })
    }

    /// The outbox table (one per relay today).
    pub fn table(&self) -> &TableName {
        &self.router.tables[0]
    }

    /// The slot and publication in CDC mode.
    pub fn cdc(&self) -> Option<&CdcSettings> {
        match &self.source {
            SourceSettings::Cdc(c) => Some(c),
            SourceSettings::Polling(_) => None,
        }
    }
}

/// The preset fills what the options leave unset; EventRouter options come only from it.
fn overlay_preset(o: &mut RunOptions, p: &Preset) -> Result<(), ConfigError> {
    for (flag, set) in [
        ("--id-column", o.id_column.is_some()),
        ("--key-column", o.key_column.is_some()),
        ("--payload-column", o.payload_column.is_some()),
        ("--route-by-column", o.route_by_column.is_some()),
        ("--topic-template", o.topic_template.is_some()),
        ("--additional-placement", o.additional_placement.is_some()),
        ("--expand-json-payload", o.expand_json_payload.is_some()),
    ] {
        if set {
            return Err(invalid(
                "debezium-config",
                format!("{flag} cannot be combined with a Debezium configuration; set the EventRouter option in the connector config instead"),
            ));
        }
    }
    o.postgres_url = o.postgres_url.take().or(p.postgres_url.clone());
    o.bootstrap_servers = o.bootstrap_servers.take().or(p.bootstrap_servers.clone());
    o.slot = o.slot.take().or(Some(p.slot.clone()));
    o.publication = o.publication.take().or(Some(p.publication.clone()));
    o.exactly_once = o.exactly_once.or(p.exactly_once.then_some(true));
    o.slot_failover = o.slot_failover.or(p.slot_failover.then_some(true));
    o.on_missing_slot = o.on_missing_slot.or(p.on_missing_slot);
    o.cleanup = o.cleanup.or(p.cleanup.cleanup);
    o.cleanup_batch = o.cleanup_batch.or(p.cleanup.cleanup_batch);
    o.cleanup_interval = o.cleanup_interval.or(p.cleanup.cleanup_interval);
    o.cleanup_grace = o.cleanup_grace.or(p.cleanup.cleanup_grace);
    o.topic_partitions = o.topic_partitions.or(p.topic_partitions);
    o.topic_replication_factor = o.topic_replication_factor.or(p.topic_replication_factor);
    o.status_interval_ms = o
        .status_interval_ms
        .or(p.status_interval.map(|d| d.as_millis() as u64));
    Ok(())
}

fn resolve_postgres_url(o: &RunOptions) -> Result<Secret, ConfigError> {
    let url = o.postgres_url.clone().ok_or(ConfigError::Missing {
        key: "postgres-url",
        flag: "--postgres-url",
        env: "OUTBOX_RELAY_POSTGRES_URL",
    })?;
    let password = match (
        &o.postgres_password_file,
        std::env::var("OUTBOX_RELAY_POSTGRES_PASSWORD").ok(),
    ) {
        (Some(path), _) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| invalid("postgres-password-file", format!("{}: {e}", path.display())))?
                .trim_end_matches(['\r', '\n'])
                .to_owned(),
        ),
        (None, password) => password,
    };
    let url = match password {
        Some(p) => {
            Secret::new(with_password(url.expose(), &p).map_err(|m| invalid("postgres-url", m))?)
        }
        None => url,
    };
    ConnectionInfo::parse(url.expose()).map_err(|e| invalid("postgres-url", e.to_string()))?;
    Ok(url)
}

/// `--table`: one table or several, comma-separated.
fn parse_tables(list: &str) -> Result<Vec<TableName>, ConfigError> {
    let tables = list
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| TableName::parse(t).map_err(|e| invalid("table", e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    if tables.is_empty() {
        return Err(invalid(
            "table",
            "names no table; expected SCHEMA.TABLE[,SCHEMA.TABLE…]",
        ));
    }
    Ok(tables)
}

fn resolve_router(o: &RunOptions, tables: Vec<TableName>) -> Result<RouterConfig, ConfigError> {
    let column =
        |value: &Option<String>, key: &'static str, default: &str| -> Result<String, ConfigError> {
            let value = value.clone().unwrap_or_else(|| default.to_owned());
            if value.trim().is_empty() {
                return Err(invalid(key, "is empty; expected a column name"));
            }
            Ok(value)
        };
    let topic_template = TopicTemplate::parse(
        o.topic_template
            .as_deref()
            .unwrap_or(defaults::TOPIC_TEMPLATE),
    )
    .map_err(|e| invalid("topic-template", e.to_string()))?;
    let additional = AdditionalField::parse_list(
        o.additional_placement
            .as_deref()
            .unwrap_or(defaults::ADDITIONAL_PLACEMENT),
    )
    .map_err(|e| invalid("additional-placement", e.to_string()))?;
    if additional
        .iter()
        .any(|f| f.placement == Placement::Envelope)
    {
        return Err(invalid(
            "additional-placement",
            "the envelope placement needs Kafka Connect converters: run with --debezium-config",
        ));
    }
    Ok(RouterConfig {
        tables,
        table_patterns: Vec::new(),
        messages: None,
        id_column: column(&o.id_column, "id-column", defaults::ID_COLUMN)?,
        key_column: column(&o.key_column, "key-column", defaults::KEY_COLUMN)?,
        payload_column: column(
            &o.payload_column,
            "payload-column",
            defaults::PAYLOAD_COLUMN,
        )?,
        route_by_column: column(
            &o.route_by_column,
            "route-by-column",
            defaults::ROUTE_BY_COLUMN,
        )?,
        topic_template,
        additional,
        tombstone_on_null_payload: true,
        expand_json_payload: o.expand_json_payload.unwrap_or(false),
        ..RouterConfig::default()
    })
}

/// `--cleanup`, `--cleanup-batch`, `--cleanup-interval`, `--cleanup-grace`.
fn resolve_cleanup(
    o: &RunOptions,
    source: &SourceSettings,
) -> Result<Option<source::Cleanup>, ConfigError> {
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
    Ok(Some(source::Cleanup {
        batch,
        interval: Duration::from_secs(interval),
        grace: Duration::from_secs(grace * 60),
    }))
}

/// `--canary-interval`, `--canary-max-age`, `--canary-topic`, `--canary-method`.
fn resolve_canary(o: &RunOptions) -> Result<Option<source::Canary>, ConfigError> {
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
    Ok(Some(source::Canary {
        interval: Duration::from_secs(interval),
        max_age: Duration::from_secs(max_age),
        topic,
        read_back: o.canary_read_back.unwrap_or(false),
        method,
    }))
}

fn resolve_source(o: &RunOptions, preset: Option<&Preset>) -> Result<SourceSettings, ConfigError> {
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
                publication_mode: preset
                    .map_or_else(PublicationMode::default, |p| p.publication_mode),
                snapshot: preset.map_or_else(SnapshotMode::default, |p| p.snapshot),
                snapshot_fetch_size: preset
                    .and_then(|p| p.snapshot_fetch_size)
                    .unwrap_or(defaults::SNAPSHOT_FETCH_SIZE),
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
            }))
        }
        Mode::Polling => {
            if o.on_missing_slot.is_some() {
                return Err(invalid(
                    "on-missing-slot",
                    "applies only with --mode cdc (polling uses no slot)",
                ));
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

fn resolve_kafka(o: &RunOptions, preset: Option<&Preset>) -> Result<KafkaSettings, ConfigError> {
    let bootstrap_servers = o.bootstrap_servers.clone().ok_or(ConfigError::Missing {
        key: "bootstrap-servers",
        flag: "--bootstrap-servers",
        env: "OUTBOX_RELAY_BOOTSTRAP_SERVERS",
    })?;
    if bootstrap_servers.trim().is_empty() {
        return Err(invalid(
            "bootstrap-servers",
            "is empty; expected HOST:PORT[,HOST:PORT...]",
        ));
    }
    let dead_letter_topic = o
        .dead_letter_topic
        .clone()
        .unwrap_or_else(|| defaults::DEAD_LETTER_TOPIC.into());
    outbox_router::validate_topic_name(&dead_letter_topic)
        .map_err(|m| invalid("dead-letter-topic", m))?;
    let topic_partitions = o.topic_partitions.unwrap_or(defaults::TOPIC_PARTITIONS);
    if topic_partitions < 1 {
        return Err(invalid(
            "topic-partitions",
            format!("{topic_partitions} is not a partition count; expected 1 or more"),
        ));
    }
    let topic_replication_factor = o
        .topic_replication_factor
        .unwrap_or(defaults::TOPIC_REPLICATION_FACTOR);
    if topic_replication_factor == 0 || topic_replication_factor < -1 {
        return Err(invalid(
            "topic-replication-factor",
            format!("{topic_replication_factor}; expected -1 (broker default) or 1 or more"),
        ));
    }
    let max_in_flight = o.max_in_flight.unwrap_or(defaults::MAX_IN_FLIGHT);
    if max_in_flight == 0 {
        return Err(invalid("max-in-flight", "must be at least 1"));
    }
    let stuck_partition_after = o
        .stuck_partition_after
        .unwrap_or(defaults::STUCK_PARTITION_AFTER_S);
    if stuck_partition_after == 0 {
        return Err(invalid(
            "stuck-partition-after",
            "must be at least 1 second",
        ));
    }
    let max_in_flight_bytes = o
        .max_in_flight_bytes
        .unwrap_or(defaults::MAX_IN_FLIGHT_BYTES);
    if max_in_flight_bytes < 1024 {
        return Err(invalid(
            "max-in-flight-bytes",
            format!("{max_in_flight_bytes}: must be at least 1024"),
        ));
    }
    // Lowest precedence first: the preset's producer.*, the properties file, the options.
    let mut lines: Vec<String> = preset
        .iter()
        .flat_map(|p| {
            p.producer_properties
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
        })
        .collect();
    if let Some(path) = &o.producer_properties_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            invalid(
                "producer-properties-file",
                format!("{}: {e}", path.display()),
            )
        })?;
        lines.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned),
        );
    }
    let given: Vec<String> = if o.producer_property_from_file {
        o.producer_property.clone()
    } else {
        o.producer_property
            .iter()
            .flat_map(|list| kafka::split_property_list(list))
            .collect()
    };
    lines.extend(given);
    let properties = lines
        .iter()
        .map(|p| parse_producer_property(p))
        .collect::<Result<Vec<_>, _>>()?;
    for (key, value) in &properties {
        kafka::librdkafka_accepts(key, value)?;
    }
    Ok(KafkaSettings {
        bootstrap_servers,
        properties,
        topic_partitions,
        topic_replication_factor,
        max_in_flight,
        max_in_flight_bytes,
        stuck_partition_after: Duration::from_secs(stuck_partition_after),
        dead_letter_topic,
        topic_creation: preset.map(|p| p.topic_creation.clone()).unwrap_or_default(),
    })
}

/// `url` with its password replaced by `password` (URL or key=value connection strings).
fn with_password(url: &str, password: &str) -> Result<String, String> {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    for scheme in ["postgres://", "postgresql://"] {
        if let Some(rest) = url.strip_prefix(scheme) {
            let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(authority_end);
            let Some((userinfo, host)) = authority.rsplit_once('@') else {
                return Err("the URL names no user; expected postgres://USER@HOST/DATABASE".into());
            };
            let user = userinfo.split(':').next().unwrap_or_default();
            let encoded = utf8_percent_encode(password, NON_ALPHANUMERIC);
            return Ok(format!("{scheme}{user}:{encoded}@{host}{tail}"));
        }
    }
    let escaped = password.replace('\\', "\\\\").replace('\'', "\\'");
    Ok(format!("{url} password='{escaped}'"))
}

#[cfg(test)]
mod tests;
