//! Settings for `outbox-relay run` and `check`, by concern: where rows come from
//! ([`SourceSettings`]), where they go ([`KafkaSettings`]), how they are routed
//! ([`RouterConfig`]) and where the relay is observed ([`Settings::metrics_address`]).
//!
//! [`RunOptions`] are what a user types (command line, environment, `--config` file). A
//! foreign configuration (a Debezium connector) arrives as a [`Preset`] that the `debezium`
//! module makes: the native options it means, as [`RunOptions`] too, merged below the
//! user's by the one rule [`RunOptions::over`], and what has no native option (the
//! EventRouter's routing, converters, topic configs). This module does not know Debezium.
//! [`Settings::resolve`] applies the defaults of `defaults.rs` and validates, naming the
//! setting in every error; `source.rs` resolves the source's settings, `kafka.rs` Kafka's.

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
    OnMissingSlot, OnServerRewind, PollingSettings, PublicationMode, Retire, SignalSettings,
    SnapshotMode, SourceSettings,
};

use crate::secret::Secret;
use outbox_router::{
    AdditionalField, ListPattern, MessageConfig, Placement, RouterConfig, TableName, TopicTemplate,
};
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
    /// `--debezium-metrics`: Debezium's metric names beside the relay's, for a connector
    /// configuration.
    pub debezium_metrics: bool,
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
    /// What the configuration means in native options (the URL, servers, slot, publication,
    /// `--exactly-once`, `--cleanup`, …): below the command line's, by [`RunOptions::over`].
    pub options: RunOptions,
    /// `database.initial.statements`, split.
    pub initial_statements: Vec<String>,
    /// `table.include.list`: tables named exactly, and patterns for the rest.
    pub tables: Vec<TableName>,
    pub table_patterns: Vec<outbox_router::ListPattern>,
    pub heartbeat: Option<Heartbeat>,
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
        let source = source::resolve_source(&o, preset.as_ref())?;
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
        let kafka = kafka::resolve_kafka(&o, preset.as_ref())?;
        let cleanup = source::resolve_cleanup(&o, &source)?;
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
            debezium_metrics: o.debezium_metrics.unwrap_or(true),
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
    let mut connector = p.options.clone();
    if o.mode == Some(Mode::Polling) {
        // How a slot starts (snapshot.mode, publication.autocreate.mode and their defaults) is
        // no polling's concern: left out, where the user's own such options are refused.
        connector.snapshot_mode = None;
        connector.snapshot_fetch_size = None;
        connector.publication_mode = None;
    }
    *o = std::mem::take(o)
        .over(connector)
        .map_err(|e| invalid("debezium-config", e))?;
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
