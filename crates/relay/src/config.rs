//! Settings for `outbox-relay run`, from (highest first) the command line, `OUTBOX_RELAY_*`
//! environment variables, the `--config` TOML file, and defaults. clap handles the first
//! two; the file fills what they left unset; [`Settings::resolve`] applies defaults and
//! validates, naming the setting in every error.

use crate::debezium::{Heartbeat, SnapshotMode};
use crate::polling::{PollingSettings, Retire};
use crate::postgres::PublicationMode;
use crate::secret::Secret;
use clap::Args;
use outbox_router::{AdditionalField, Placement, RouterConfig, TableName, TopicTemplate};
use serde::Deserialize;
use std::path::PathBuf;
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

fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

/// Options of `run` (and of the commands that share its settings). Every option can also
/// come from the environment (`OUTBOX_RELAY_<NAME>`) or from the `--config` file, where
/// the key is the option's long name without the dashes, e.g. `postgres-url = "..."`.
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RunOptions {
    /// TOML file with any of these options (keys are the long option names, e.g. `slot = "outbox_relay"`).
    #[arg(long, env = "OUTBOX_RELAY_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Debezium connector configuration to run as it is: the JSON POSTed to Kafka Connect
    /// ({"name": ..., "config": {...}} or the config object) or a .properties file. Its
    /// database.*, slot, publication, table, EventRouter and converter options apply; the
    /// options above (URL, servers, slot, ...) still override it.
    #[arg(long, env = "OUTBOX_RELAY_DEBEZIUM_CONFIG", value_name = "FILE")]
    pub debezium_config: Option<PathBuf>,

    /// Kafka Connect worker properties (connect-distributed.properties), with --debezium-config:
    /// supplies bootstrap.servers, converters and producer.* the connector config leaves out.
    #[arg(
        long,
        env = "OUTBOX_RELAY_WORKER_CONFIG",
        value_name = "FILE",
        requires = "debezium_config"
    )]
    pub worker_config: Option<PathBuf>,

    /// How rows are read: `cdc` (logical replication, the default) or `polling` (SELECT ...
    /// FOR UPDATE SKIP LOCKED, then DELETE, for databases without logical replication).
    #[arg(long, env = "OUTBOX_RELAY_MODE", value_name = "cdc|polling")]
    pub mode: Option<String>,

    /// Polling mode: pause between polls that found less than a full batch [default: 500].
    #[arg(long, env = "OUTBOX_RELAY_POLL_INTERVAL_MS", value_name = "MS")]
    pub poll_interval_ms: Option<u64>,

    /// Polling mode: rows per poll (one transaction) [default: 1000].
    #[arg(long, env = "OUTBOX_RELAY_POLL_BATCH_SIZE", value_name = "N")]
    pub poll_batch_size: Option<i64>,

    /// Polling mode: the column giving the outbox order [default: created_at].
    #[arg(long, env = "OUTBOX_RELAY_POLL_ORDER_BY", value_name = "COLUMN")]
    pub poll_order_by: Option<String>,

    /// Polling mode: set this timestamp column to now() instead of deleting relayed rows;
    /// rows where it IS NULL are pending (the seeds' `published_at`).
    #[arg(long, env = "OUTBOX_RELAY_PROCESSED_COLUMN", value_name = "COLUMN")]
    pub processed_column: Option<String>,

    /// PostgreSQL connection URL, e.g. postgres://relay:secret@db:5432/app. The user needs the
    /// REPLICATION attribute and SELECT on the outbox table (see `sql/`).
    #[arg(
        long,
        env = "OUTBOX_RELAY_POSTGRES_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub postgres_url: Option<Secret>,

    /// File holding the PostgreSQL password (e.g. a mounted secret); overrides a password in
    /// the URL. OUTBOX_RELAY_POSTGRES_PASSWORD does the same from the environment.
    #[arg(long, env = "OUTBOX_RELAY_POSTGRES_PASSWORD_FILE", value_name = "FILE")]
    pub postgres_password_file: Option<PathBuf>,

    /// Kafka bootstrap servers, comma-separated HOST:PORT.
    #[arg(long, env = "OUTBOX_RELAY_BOOTSTRAP_SERVERS", value_name = "HOSTS")]
    pub bootstrap_servers: Option<String>,

    /// Outbox table to relay, SCHEMA.TABLE [default: public.outbox].
    #[arg(long, env = "OUTBOX_RELAY_TABLE", value_name = "SCHEMA.TABLE")]
    pub table: Option<String>,

    /// Logical replication slot (pgoutput), created when missing [default: outbox_relay].
    #[arg(long, env = "OUTBOX_RELAY_SLOT", value_name = "NAME")]
    pub slot: Option<String>,

    /// Publication for the outbox table, created when missing [default: outbox_relay].
    #[arg(long, env = "OUTBOX_RELAY_PUBLICATION", value_name = "NAME")]
    pub publication: Option<String>,

    /// Column whose value becomes header `id` (Debezium table.field.event.id) [default: id].
    #[arg(long, env = "OUTBOX_RELAY_ID_COLUMN", value_name = "COLUMN")]
    pub id_column: Option<String>,

    /// Column whose value is the record key (table.field.event.key) [default: aggregate_id].
    #[arg(long, env = "OUTBOX_RELAY_KEY_COLUMN", value_name = "COLUMN")]
    pub key_column: Option<String>,

    /// Column whose value is the record value (table.field.event.payload) [default: payload].
    #[arg(long, env = "OUTBOX_RELAY_PAYLOAD_COLUMN", value_name = "COLUMN")]
    pub payload_column: Option<String>,

    /// Column whose value builds the topic name (route.by.field) [default: aggregate_type].
    #[arg(long, env = "OUTBOX_RELAY_ROUTE_BY_COLUMN", value_name = "COLUMN")]
    pub route_by_column: Option<String>,

    /// Topic name template (route.topic.replacement) [default: ${routedByValue}.events].
    #[arg(long, env = "OUTBOX_RELAY_TOPIC_TEMPLATE", value_name = "TEMPLATE")]
    pub topic_template: Option<String>,

    /// Produce the payload as compact JSON without null fields and empty arrays (Debezium's
    /// table.expand.json.payload); a payload that is not JSON goes to the dead-letter topic.
    #[arg(long, env = "OUTBOX_RELAY_EXPAND_JSON_PAYLOAD", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub expand_json_payload: Option<bool>,

    /// Extra columns as headers, Debezium's table.fields.additional.placement syntax:
    /// COLUMN:header[:ALIAS],... [default: event_type:header:eventType]. Pass "" for none.
    #[arg(long, env = "OUTBOX_RELAY_ADDITIONAL_PLACEMENT", value_name = "LIST")]
    pub additional_placement: Option<String>,

    /// Topic for rows that cannot be routed (NULL or invalid routing value, missing column)
    /// [default: outbox-relay.dlq].
    #[arg(long, env = "OUTBOX_RELAY_DEAD_LETTER_TOPIC", value_name = "TOPIC")]
    pub dead_letter_topic: Option<String>,

    /// Partitions of topics the relay creates [default: 1].
    #[arg(long, env = "OUTBOX_RELAY_TOPIC_PARTITIONS", value_name = "N")]
    pub topic_partitions: Option<i32>,

    /// Replication factor of topics the relay creates; -1 = the broker's default [default: -1].
    #[arg(
        long,
        env = "OUTBOX_RELAY_TOPIC_REPLICATION_FACTOR",
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub topic_replication_factor: Option<i32>,

    /// Events produced but not yet acknowledged before reading pauses (backpressure) [default: 100000].
    #[arg(long, env = "OUTBOX_RELAY_MAX_IN_FLIGHT", value_name = "N")]
    pub max_in_flight: Option<usize>,

    /// How often the confirmed position is reported to PostgreSQL, in milliseconds [default: 1000].
    #[arg(long, env = "OUTBOX_RELAY_STATUS_INTERVAL_MS", value_name = "MS")]
    pub status_interval_ms: Option<u64>,

    /// Where /metrics (Prometheus), /health and /ready are served, HOST:PORT
    /// [default: 127.0.0.1:9187]. Port 0 picks a free port (logged at start-up).
    #[arg(long, env = "OUTBOX_RELAY_METRICS_ADDRESS", value_name = "HOST:PORT")]
    pub metrics_address: Option<String>,

    /// librdkafka producer property KEY=VALUE (repeatable), e.g. security.protocol=SASL_SSL,
    /// compression.codec=lz4. Applied after the relay's own settings; the relay refuses
    /// values that would break its guarantees (enable.idempotence=false, acks other than all).
    #[arg(
        long = "producer-property",
        env = "OUTBOX_RELAY_PRODUCER_PROPERTIES",
        value_name = "KEY=VALUE",
        value_delimiter = ','
    )]
    #[serde(default)]
    pub producer_property: Vec<String>,

    /// File of librdkafka producer properties, one KEY=VALUE per line (# comments), for
    /// secrets such as sasl.password or ssl.key.password. --producer-property wins over it.
    #[arg(
        long,
        env = "OUTBOX_RELAY_PRODUCER_PROPERTIES_FILE",
        value_name = "FILE"
    )]
    pub producer_properties_file: Option<PathBuf>,
}

/// Validated settings with defaults applied.
#[derive(Debug, Clone)]
pub struct Settings {
    pub postgres_url: Secret,
    pub bootstrap_servers: String,
    pub slot: String,
    pub publication: String,
    pub router: RouterConfig,
    pub dead_letter_topic: String,
    pub topic_partitions: i32,
    pub topic_replication_factor: i32,
    pub max_in_flight: usize,
    pub status_interval: Duration,
    pub producer_properties: Vec<(String, String)>,
    pub metrics_address: String,
    pub publication_mode: PublicationMode,
    pub snapshot: SnapshotMode,
    pub heartbeat: Option<Heartbeat>,
    /// Set when running from a Debezium connector configuration.
    pub debezium: Option<DebeziumSummary>,
    /// `Some` in polling mode.
    pub polling: Option<PollingSettings>,
}

/// What the start-up log says about a Debezium configuration.
#[derive(Debug, Clone)]
pub struct DebeziumSummary {
    pub connector_name: Option<String>,
    /// The converters in effect and where each came from.
    pub notes: Vec<String>,
    /// Options outbox-relay did not recognise.
    pub unknown_options: Vec<String>,
}

impl RunOptions {
    /// Fills every option the command line and environment left unset from the file.
    pub fn merge_file(mut self) -> Result<Self, ConfigError> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let text = std::fs::read_to_string(&path).map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let file: RunOptions = toml::from_str(&text).map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            message: e.message().to_owned(),
        })?;
        macro_rules! fill {
            ($($field:ident),*) => { $( if self.$field.is_none() { self.$field = file.$field; } )* };
        }
        fill!(
            mode,
            poll_interval_ms,
            poll_batch_size,
            poll_order_by,
            processed_column,
            debezium_config,
            worker_config,
            postgres_url,
            bootstrap_servers,
            table,
            slot,
            publication,
            id_column,
            key_column,
            payload_column,
            route_by_column,
            topic_template,
            additional_placement,
            dead_letter_topic,
            topic_partitions,
            topic_replication_factor,
            max_in_flight,
            status_interval_ms,
            metrics_address,
            postgres_password_file,
            producer_properties_file,
            expand_json_payload
        );
        if self.producer_property.is_empty() {
            self.producer_property = file.producer_property;
        }
        Ok(self)
    }
}

impl Settings {
    pub fn resolve(options: RunOptions) -> Result<Self, ConfigError> {
        let mut o = options.merge_file()?;
        let debezium = match &o.debezium_config {
            None => None,
            Some(path) => {
                let connector =
                    crate::debezium::read_file(path).map_err(|e| invalid("debezium-config", e))?;
                let worker = match &o.worker_config {
                    Some(p) => Some(
                        crate::debezium::read_file(p).map_err(|e| invalid("worker-config", e))?,
                    ),
                    None => None,
                };
                let setup = crate::debezium::translate(&connector, worker.as_ref())
                    .map_err(|e| invalid("debezium-config", format!("{}: {e}", path.display())))?;
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
                o.postgres_url = o.postgres_url.or(setup.postgres_url.clone());
                o.bootstrap_servers = o.bootstrap_servers.or(setup.bootstrap_servers.clone());
                o.slot = o.slot.or(Some(setup.slot.clone()));
                o.publication = o.publication.or(Some(setup.publication.clone()));
                o.table = o.table.or(Some(setup.table.to_string()));
                o.topic_partitions = o.topic_partitions.or(setup.topic_partitions);
                o.topic_replication_factor = o
                    .topic_replication_factor
                    .or(setup.topic_replication_factor);
                o.status_interval_ms = o
                    .status_interval_ms
                    .or(setup.status_interval.map(|d| d.as_millis() as u64));
                Some(setup)
            }
        };
        let postgres_url = o.postgres_url.ok_or(ConfigError::Missing {
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
                    .map_err(|e| {
                        invalid("postgres-password-file", format!("{}: {e}", path.display()))
                    })?
                    .trim_end_matches(['\r', '\n'])
                    .to_owned(),
            ),
            (None, password) => password,
        };
        let postgres_url = match password {
            Some(p) => Secret::new(
                with_password(postgres_url.expose(), &p).map_err(|m| invalid("postgres-url", m))?,
            ),
            None => postgres_url,
        };
        crate::postgres::ConnectionInfo::parse(postgres_url.expose())
            .map_err(|e| invalid("postgres-url", e.to_string()))?;
        let bootstrap_servers = o.bootstrap_servers.ok_or(ConfigError::Missing {
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
        let slot = o.slot.unwrap_or_else(|| "outbox_relay".into());
        validate_slot_name(&slot).map_err(|m| invalid("slot", m))?;
        let publication = o.publication.unwrap_or_else(|| "outbox_relay".into());
        validate_identifier(&publication).map_err(|m| invalid("publication", m))?;
        let defaults = RouterConfig::default();
        let table = match o.table {
            Some(t) => TableName::parse(&t).map_err(|e| invalid("table", e.to_string()))?,
            None => defaults.tables[0].clone(),
        };
        let topic_template = match o.topic_template {
            Some(t) => {
                TopicTemplate::parse(&t).map_err(|e| invalid("topic-template", e.to_string()))?
            }
            None => defaults.topic_template.clone(),
        };
        let additional = match o.additional_placement {
            Some(list) => AdditionalField::parse_list(&list)
                .map_err(|e| invalid("additional-placement", e.to_string()))?,
            None => defaults.additional.clone(),
        };
        let column = |value: Option<String>,
                      key: &'static str,
                      default: &str|
         -> Result<String, ConfigError> {
            let value = value.unwrap_or_else(|| default.to_owned());
            if value.trim().is_empty() {
                return Err(invalid(key, "is empty; expected a column name"));
            }
            Ok(value)
        };
        if additional
            .iter()
            .any(|f| f.placement == Placement::Envelope)
        {
            return Err(invalid(
                "additional-placement",
                "the envelope placement needs Kafka Connect converters: run with --debezium-config",
            ));
        }
        let router = RouterConfig {
            tables: vec![table],
            id_column: column(o.id_column, "id-column", &defaults.id_column)?,
            key_column: column(o.key_column, "key-column", &defaults.key_column)?,
            payload_column: column(o.payload_column, "payload-column", &defaults.payload_column)?,
            route_by_column: column(
                o.route_by_column,
                "route-by-column",
                &defaults.route_by_column,
            )?,
            topic_template,
            additional,
            tombstone_on_null_payload: true,
            expand_json_payload: o.expand_json_payload.unwrap_or(false),
            ..RouterConfig::default()
        };
        let router = match &debezium {
            Some(setup) => RouterConfig {
                tables: router.tables,
                ..setup.router.clone()
            },
            None => router,
        };
        let polling = match o.mode.as_deref().unwrap_or("cdc") {
            "cdc" => {
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
                None
            }
            "polling" => {
                let batch_size = o.poll_batch_size.unwrap_or(1000);
                if !(1..=1_000_000).contains(&batch_size) {
                    return Err(invalid(
                        "poll-batch-size",
                        format!("{batch_size}; expected 1 to 1000000"),
                    ));
                }
                Some(PollingSettings {
                    interval: Duration::from_millis(o.poll_interval_ms.unwrap_or(500)),
                    batch_size,
                    order_by: o
                        .poll_order_by
                        .clone()
                        .unwrap_or_else(|| "created_at".into()),
                    retire: match o.processed_column.clone() {
                        Some(c) => Retire::MarkProcessed(c),
                        None => Retire::Delete,
                    },
                })
            }
            other => {
                return Err(invalid(
                    "mode",
                    format!("{other:?}; expected cdc (logical replication) or polling"),
                ))
            }
        };
        let dead_letter_topic = o
            .dead_letter_topic
            .unwrap_or_else(|| "outbox-relay.dlq".into());
        outbox_router::validate_topic_name(&dead_letter_topic)
            .map_err(|m| invalid("dead-letter-topic", m))?;
        let topic_partitions = o.topic_partitions.unwrap_or(1);
        if topic_partitions < 1 {
            return Err(invalid(
                "topic-partitions",
                format!("{topic_partitions} is not a partition count; expected 1 or more"),
            ));
        }
        let topic_replication_factor = o.topic_replication_factor.unwrap_or(-1);
        if topic_replication_factor == 0 || topic_replication_factor < -1 {
            return Err(invalid(
                "topic-replication-factor",
                format!("{topic_replication_factor}; expected -1 (broker default) or 1 or more"),
            ));
        }
        let max_in_flight = o.max_in_flight.unwrap_or(100_000);
        if max_in_flight == 0 {
            return Err(invalid("max-in-flight", "must be at least 1"));
        }
        let status_interval = Duration::from_millis(o.status_interval_ms.unwrap_or(1000).max(10));
        let mut lines: Vec<String> = debezium
            .iter()
            .flat_map(|d| {
                d.producer_properties
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
        lines.extend(
            o.producer_property
                .iter()
                .filter(|p| !p.trim().is_empty())
                .cloned(),
        );
        let producer_properties = lines
            .iter()
            .map(|p| parse_producer_property(p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            postgres_url,
            bootstrap_servers,
            slot,
            publication,
            router,
            dead_letter_topic,
            topic_partitions,
            topic_replication_factor,
            max_in_flight,
            status_interval,
            producer_properties,
            metrics_address: o.metrics_address.unwrap_or_else(|| "127.0.0.1:9187".into()),
            publication_mode: debezium
                .as_ref()
                .map_or(PublicationMode::default(), |d| d.publication_mode),
            snapshot: debezium
                .as_ref()
                .map_or(SnapshotMode::default(), |d| d.snapshot),
            heartbeat: debezium.as_ref().and_then(|d| d.heartbeat.clone()),
            polling,
            debezium: debezium.map(|d| DebeziumSummary {
                connector_name: d.connector_name,
                notes: d.notes,
                unknown_options: d.unknown,
            }),
        })
    }

    pub fn table(&self) -> &TableName {
        &self.router.tables[0]
    }
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

fn parse_producer_property(text: &str) -> Result<(String, String), ConfigError> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| invalid("producer-property", format!("{text:?} is not KEY=VALUE")))?;
    let (key, value) = (key.trim().to_owned(), value.trim().to_owned());
    let breaks_guarantee = match key.as_str() {
        "enable.idempotence" => value != "true",
        "acks" | "request.required.acks" => value != "all" && value != "-1",
        "enable.gapless.guarantee" => false,
        _ => false,
    };
    if breaks_guarantee {
        return Err(invalid(
            "producer-property",
            format!("{key}={value} would allow lost or reordered events; outbox-relay always uses enable.idempotence=true and acks=all"),
        ));
    }
    Ok((key, value))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> RunOptions {
        RunOptions {
            postgres_url: Some(Secret::new("postgres://u:p@localhost/db")),
            bootstrap_servers: Some("localhost:9092".into()),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_match_the_seeds_schema() {
        let s = Settings::resolve(base()).unwrap();
        assert_eq!(s.slot, "outbox_relay");
        assert_eq!(s.publication, "outbox_relay");
        assert_eq!(s.table().to_string(), "public.outbox");
        assert_eq!(s.router.topic_template.render("Order"), "Order.events");
        assert_eq!(s.dead_letter_topic, "outbox-relay.dlq");
    }

    #[test]
    fn errors_name_the_setting() {
        let err = Settings::resolve(RunOptions {
            slot: Some("Bad-Slot".into()),
            ..base()
        })
        .unwrap_err();
        assert!(err.to_string().starts_with("slot:"), "{err}");
        let err = Settings::resolve(RunOptions {
            postgres_url: None,
            ..base()
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("--postgres-url")
                && err.to_string().contains("OUTBOX_RELAY_POSTGRES_URL")
        );
        let err = Settings::resolve(RunOptions {
            producer_property: vec!["acks=1".into()],
            ..base()
        })
        .unwrap_err();
        assert!(err.to_string().contains("acks=1"), "{err}");
        let err = Settings::resolve(RunOptions {
            topic_template: Some("a b".into()),
            ..base()
        })
        .unwrap_err();
        assert!(err.to_string().starts_with("topic-template:"), "{err}");
    }

    #[test]
    fn a_password_from_a_file_replaces_the_urls() {
        assert_eq!(
            with_password("postgres://u:old@h:5/db?sslmode=disable", "n@w/pw").unwrap(),
            "postgres://u:n%40w%2Fpw@h:5/db?sslmode=disable"
        );
        assert_eq!(
            with_password("postgresql://u@h/db", "x").unwrap(),
            "postgresql://u:x@h/db"
        );
        assert_eq!(
            with_password("host=h user=u", "it's").unwrap(),
            "host=h user=u password='it\\'s'"
        );
        let c = crate::postgres::ConnectionInfo::parse(
            &with_password("postgres://u@h/db", "p:w@d").unwrap(),
        )
        .unwrap();
        assert_eq!(c.password, "p:w@d");
    }

    #[test]
    fn the_file_fills_only_what_is_unset() {
        let dir = std::env::temp_dir().join(format!("relay-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("relay.toml");
        std::fs::write(
            &path,
            "slot = \"from_file\"\nbootstrap-servers = \"file:9092\"\ntopic-partitions = 3\n",
        )
        .unwrap();
        let s = Settings::resolve(RunOptions {
            config: Some(path.clone()),
            ..base()
        })
        .unwrap();
        assert_eq!(s.slot, "from_file");
        assert_eq!(
            s.bootstrap_servers, "localhost:9092",
            "the command line wins"
        );
        assert_eq!(s.topic_partitions, 3);
        std::fs::write(&path, "slots = \"typo\"\n").unwrap();
        let err = Settings::resolve(RunOptions {
            config: Some(path),
            ..base()
        })
        .unwrap_err();
        assert!(err.to_string().contains("unknown field `slots`"), "{err}");
    }
}
