//! Every option of a Debezium PostgreSQL connector + Outbox EventRouter configuration that
//! outbox-relay knows, one entry each: its name, its aliases, where it applies, what
//! outbox-relay does with it (its parser, or why it has no effect, or why it is refused),
//! and its documentation line. `translate` runs the parsers in this order into a [`Draft`];
//! `check` and the Connect REST API's `config/validate` describe each option from here.

use super::options::{flag, Options};
use super::parsers as c;
use crate::config::{Heartbeat, OnMissingSlot, PublicationMode, SnapshotMode};
use outbox_router::connect::{Converter, HeaderConverter, TypeModes};
use outbox_router::transforms::Chain;
use outbox_router::{
    AdditionalField, ErrorHandling, InvalidOperation, ListPattern, MessageConfig, TableName,
    TopicTemplate, DEFAULT_TOPIC_REGEX,
};
use std::time::Duration;

/// Where an option is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    /// The connector's own options.
    Connector,
    /// `transforms.<the EventRouter's alias>.<name>`.
    EventRouter,
    /// The connector's, else the Kafka Connect worker's (converters, producer settings).
    ConnectorOrWorker,
    /// outbox-relay's own options in a connector configuration.
    Relay,
}

impl Applies {
    /// Connect's `group` for the option.
    pub fn group(self) -> &'static str {
        match self {
            Applies::Connector => "Connector",
            Applies::EventRouter => "Outbox EventRouter",
            Applies::ConnectorOrWorker => "Kafka Connect",
            Applies::Relay => "outbox-relay",
        }
    }
}

/// A parser: reads its option (and aliases) and fills the draft.
pub type Parse = fn(&Ctx<'_>, &mut Draft) -> Result<(), String>;

/// What outbox-relay does with an option.
#[derive(Clone, Copy)]
pub enum Treatment {
    /// Applied: this parser reads it.
    Parsed(Parse),
    /// Applied when given: the value is the native option `--<flag>`'s, parsed as the
    /// command line parses it. Absent, the native option's own default applies.
    Native(&'static str),
    /// The same, and absent, Debezium's default (the entry's), where it differs from
    /// outbox-relay's.
    NativeOrDefault(&'static str),
    /// Applied: read by the parser of the entry named here, with the options it goes with.
    With(&'static str),
    /// Accepted: it does not change what reaches Kafka, or outbox-relay does what it asks
    /// by construction.
    NoEffect,
    /// Refused when set: it would change the records and outbox-relay does not do it.
    Refused(&'static str),
    /// Accepted, not carried out (why): a configuration that sets it still runs, and the
    /// relay says at start that it does not do it.
    NotRun(&'static str),
}

/// One option.
pub struct Spec {
    /// Its name; a name ending in `*` is a family (`topic.creation.*`).
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub applies: Applies,
    pub treatment: Treatment,
    pub default: Option<&'static str>,
    pub doc: &'static str,
}

impl Spec {
    /// What `check` and `config/validate` say outbox-relay does with it.
    pub fn treatment_text(&self) -> String {
        match self.treatment {
            Treatment::Parsed(_) => "applied".into(),
            Treatment::Native(flag) | Treatment::NativeOrDefault(flag) => {
                format!("applied as --{flag}")
            }
            Treatment::With(other) => format!("applied (with {other})"),
            Treatment::NoEffect => "accepted, no effect on the records".into(),
            Treatment::Refused(why) => format!("refused: {why}"),
            Treatment::NotRun(why) => format!("accepted, not run: {why}"),
        }
    }

    fn matches(&self, name: &str) -> bool {
        let family = |n: &str| match n.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == n,
        };
        family(self.name) || self.aliases.iter().any(|a| family(a))
    }
}

/// The options as `translate` reads them.
pub struct Ctx<'a> {
    pub o: &'a Options<'a>,
    pub w: Option<&'a Options<'a>>,
}

/// What the parsers make of a configuration, before `translate` assembles the settings.
#[derive(Default)]
pub struct Draft {
    pub notes: Vec<String>,
    /// What the configuration means in native options (`--slot`, `--exactly-once`, …),
    /// merged under the command line's by the same rule as the `--config` file.
    pub run: crate::config::RunOptions,
    pub types: TypeModes,
    pub initial_statements: Vec<String>,
    pub skipped: Vec<String>,
    pub heartbeat: Option<Heartbeat>,
    pub topic_creation: crate::config::TopicCreation,
    pub topic_prefix: String,
    pub heartbeat_topic_name: Option<String>,
    pub heartbeat_topic_prefix: Option<String>,
    pub transaction_metadata: bool,
    pub transaction_topic: Option<String>,
    /// `notification.enabled.channels` (`sink`, `log`) and the sink's topic.
    pub notifications: Option<outbox_router::Notifications>,
    pub extended_headers: bool,
    /// The EventRouter's alias, the DecodeLogicalDecodingMessageContent's, the transforms
    /// before and after the EventRouter.
    pub router_alias: String,
    pub decode_alias: Option<String>,
    pub before_router: Vec<String>,
    pub after_router: Vec<String>,
    pub before_chain: Option<Chain>,
    pub messages: Option<MessageConfig>,
    pub tables: Vec<TableName>,
    pub table_patterns: Vec<ListPattern>,
    pub id_column: String,
    pub key_column: String,
    pub payload_column: String,
    pub route_by_column: String,
    pub topic_template: Option<TopicTemplate>,
    pub additional: Vec<AdditionalField>,
    pub ignore_missing_additional: bool,
    pub on_update: InvalidOperation,
    pub expand: bool,
    pub keep_nulls: bool,
    pub keep_empty_arrays: bool,
    pub tombstone_on_empty_payload: bool,
    pub timestamp_column: Option<String>,
    pub schema_version_column: Option<String>,
    pub tracing_span_context_column: String,
    pub key: Option<Converter>,
    pub value: Option<Converter>,
    pub header: Option<HeaderConverter>,
    pub chain: Chain,
    pub producer_properties: Vec<(String, String)>,
    pub producer_unknown: Vec<String>,
    pub errors: ErrorHandling,
}

impl Draft {
    /// `transforms.<the EventRouter's alias>.<name>`.
    pub fn t(&self, name: &str) -> String {
        format!("transforms.{}.{name}", self.router_alias)
    }
}

/// An EventRouter option's value, by its name or an alias, in that order.
fn router_get<'a>(c: &Ctx<'a>, d: &Draft, names: &[&str]) -> Option<&'a str> {
    names.iter().find_map(|n| c.o.get(&d.t(n)))
}

/// An EventRouter true/false option, by its name or an alias.
fn router_flag(c: &Ctx<'_>, d: &Draft, names: &[&str], default: bool) -> Result<bool, String> {
    for name in names {
        if let Some(v) = c.o.get(&d.t(name)) {
            return match v.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(format!("{}: {v:?} is not true or false", d.t(name))),
            };
        }
    }
    Ok(default)
}

/// An EventRouter column option, by its name or an alias, else `default`.
fn router_column(c: &Ctx<'_>, d: &Draft, names: &[&str], default: &str) -> String {
    router_get(c, d, names).unwrap_or(default).trim().to_owned()
}

fn millis(key: &str, v: &str) -> Result<Duration, String> {
    v.parse()
        .map(Duration::from_millis)
        .map_err(|_| format!("{key}: {v:?} is not a number of milliseconds"))
}

fn int(c: &Ctx<'_>, key: &str) -> Result<Option<i32>, String> {
    c.o.get(key)
        .map(|v| {
            v.parse::<i32>()
                .map_err(|_| format!("{key}: {v:?} is not a number"))
        })
        .transpose()
}

const CONNECTOR: &str = "io.debezium.connector.postgresql.PostgresConnector";

macro_rules! spec {
    ($name:expr, $applies:ident, $treatment:expr, $doc:expr) => {
        spec!($name, [], $applies, None, $treatment, $doc)
    };
    ($name:expr, [$($alias:expr),*], $applies:ident, $default:expr, $treatment:expr, $doc:expr) => {
        Spec {
            name: $name,
            aliases: &[$($alias),*],
            applies: Applies::$applies,
            treatment: $treatment,
            default: $default,
            doc: $doc,
        }
    };
}

use Treatment::{Native, NativeOrDefault, NoEffect, NotRun, Parsed, Refused, With};

/// Every option outbox-relay knows, in the order `translate` reads them.
pub const CATALOG: &[Spec] = &[
    // --- the connector ---
    spec!("connector.class", [], Connector, Some(CONNECTOR), Parsed(|c, _| {
        match c.o.get("connector.class") {
            Some(class) if class != CONNECTOR && class != "PostgresConnector" => Err(format!(
                "connector.class: {class} is not Debezium's PostgreSQL connector ({CONNECTOR})"
            )),
            _ => Ok(()),
        }
    }), "Debezium's PostgreSQL connector, the one outbox-relay replaces"),
    spec!("plugin.name", [], Connector, Some("pgoutput"), Parsed(|c, _| {
        match c.o.get("plugin.name") {
            None | Some("pgoutput") => Ok(()),
            Some(plugin @ ("decoderbufs" | "wal2json" | "wal2json_streaming" | "wal2json_rds" | "wal2json_rds_streaming")) => Err(format!(
                "plugin.name: outbox-relay reads pgoutput only, not {plugin}; set \"plugin.name\": \"pgoutput\" \
                 (built into PostgreSQL 10+). An existing {plugin} slot cannot be reused: give outbox-relay a new \
                 slot.name, or drop and recreate the slot with pgoutput"
            )),
            Some(other) => Err(format!("plugin.name: unknown decoding plugin {other:?}; use pgoutput")),
        }
    }), "the logical decoding plugin: pgoutput only"),
    spec!("column.include.list", ["column.whitelist"], Connector, None,
        Refused("columns are never dropped from outbox rows"), "columns to capture"),
    spec!("column.exclude.list", ["column.blacklist"], Connector, None,
        Refused("columns are never dropped from outbox rows"), "columns not to capture"),
    spec!("transaction.boundary", [], Connector, Some("poll"), Parsed(|c, _| {
        // Kafka Connect's default, written out; the others place commit points that
        // outbox-relay, which writes no Kafka transactions, does not make.
        match c.o.get("transaction.boundary").map(str::to_ascii_lowercase).as_deref() {
            None | Some("poll") => Ok(()),
            Some(other) => Err(format!(
                "transaction.boundary={other} is not supported by outbox-relay: Kafka transactions are not used \
                 (--exactly-once keeps its promise without them); remove it or set poll, Kafka Connect's default"
            )),
        }
    }), "Kafka Connect's transaction boundaries for exactly-once source connectors: poll (the default) only"),
    spec!("converters", Connector, Refused("custom converters are not supported"),
        "custom column converters"),
    spec!("exactly.once.support", [], Connector, Some("requested"), Parsed(|c, d| {
        // Kafka Connect runs a source connector exactly-once when the connector requires
        // it or the worker enables exactly-once source support; outbox-relay's
        // --exactly-once gives the same promise without transactions.
        let worker = c.w.and_then(|w| w.get("exactly.once.source.support")).is_some_and(|v| v == "enabled");
        let exactly_once = match c.o.get("exactly.once.support").map(str::to_ascii_lowercase).as_deref() {
            Some("required") => true,
            None | Some("requested") => worker,
            Some("disabled") => false,
            Some(other) => return Err(format!(
                "exactly.once.support: {other:?} is not a value Kafka Connect accepts; use requested or required"
            )),
        };
        d.run.exactly_once = Some(exactly_once);
        if exactly_once {
            d.notes.push("exactly-once delivery (exactly.once.support / exactly.once.source.support): every record \
                carries its source position in the __outbox_relay.position header; replays skip what Kafka already has".into());
        }
        Ok(())
    }), "exactly-once delivery (with the worker's exactly.once.source.support): the relay's --exactly-once"),
    spec!("column.mask.*", ["column.truncate.*"], Connector, None,
        Refused("outbox columns are relayed unchanged"), "column masking and truncation"),
    spec!("time.precision.mode", [], Connector, Some("adaptive"), Parsed(|c, d| {
        d.types = c::type_modes(c.o, c.w)?;
        c::refuse_byte_changing_options(c.o, c.w)
    }), "how time columns are typed; read with the other type options"),
    spec!("decimal.handling.mode", [], Connector, Some("precise"), With("time.precision.mode"),
        "how numeric columns are typed: precise, double or string"),
    spec!("interval.handling.mode", [], Connector, Some("numeric"), With("time.precision.mode"),
        "how interval columns are typed: numeric or string"),
    spec!("hstore.handling.mode", [], Connector, Some("json"), With("time.precision.mode"),
        "how hstore columns are typed: json or map"),
    spec!("binary.handling.mode", [], Connector, Some("bytes"), With("time.precision.mode"),
        "how bytea columns are typed: bytes, base64, base64-url-safe or hex"),
    spec!("money.fraction.digits", [], Connector, Some("2"), With("time.precision.mode"),
        "the scale of money columns"),
    spec!("include.unknown.datatypes", [], Connector, Some("false"), With("time.precision.mode"),
        "columns of types Debezium does not know, as bytes"),
    spec!("value.converter.decimal.format", ["key.converter.decimal.format"], ConnectorOrWorker, Some("BASE64"),
        With("time.precision.mode"), "JsonConverter's decimal format: BASE64 only"),
    spec!("column.propagate.source.type", ["datatype.propagate.source.type"], Connector, None,
        With("time.precision.mode"), "refused: adds __debezium.source.column.* schema parameters"),
    spec!("include.schema.comments", [], Connector, Some("false"), With("time.precision.mode"), "false only"),
    spec!("topic.delimiter", [], Connector, Some("."), With("time.precision.mode"), "\".\" only"),
    spec!("topic.naming.strategy", [], Connector, None, With("time.precision.mode"),
        "Debezium's default topic naming strategies only"),
    spec!("schema.name.adjustment.mode", [], Connector, Some("none"), With("time.precision.mode"),
        "none, or avro: the connector's schema names made valid Avro names"),
    spec!("field.name.adjustment.mode", [], Connector, Some("none"), With("time.precision.mode"), "none only"),
    spec!("sanitize.field.names", [], Connector, Some("false"), With("time.precision.mode"), "false only"),
    spec!("producer.override.partitioner.class", [], Connector, None, With("time.precision.mode"),
        "Kafka's default partitioner only (murmur2 of the key)"),
    // --- PostgreSQL ---
    spec!("database.hostname", [], Connector, None, Parsed(|c, d| {
        d.run.postgres_url = Some(c::postgres_url(c.o)?);
        d.initial_statements = c.o.get("database.initial.statements")
            .map(crate::source::postgres::split_statements).unwrap_or_default();
        Ok(())
    }), "the PostgreSQL server (several hosts: use --postgres-url)"),
    spec!("database.port", [], Connector, Some("5432"), With("database.hostname"), "its port"),
    spec!("database.user", [], Connector, None, With("database.hostname"), "the role"),
    spec!("database.password", [], Connector, None, With("database.hostname"), "its password (never shown)"),
    spec!("database.dbname", [], Connector, None, With("database.hostname"), "the database"),
    spec!("database.sslmode", [], Connector, Some("prefer"), With("database.hostname"), "TLS to PostgreSQL"),
    spec!("database.sslrootcert", ["database.sslcert", "database.sslkey"], Connector, None,
        With("database.hostname"), "TLS certificates and key files"),
    spec!("database.sslpassword", [], Connector, None, With("database.hostname"),
        "refused: an encrypted client key (decrypt it)"),
    spec!("database.initial.statements", [], Connector, None, With("database.hostname"),
        "SQL run on every connection the relay opens"),
    spec!("slot.name", [], Connector, Some("debezium"), NativeOrDefault("slot"), "the replication slot"),
    spec!("slot.failover", [], Connector, Some("false"), Native("slot-failover"),
        "a failover slot (PostgreSQL 17+), synchronised to standbys"),
    spec!("outbox.relay.cleanup", [], Relay, Some("false"), Native("cleanup"),
        "outbox-relay deletes relayed and confirmed outbox rows"),
    spec!("outbox.relay.cleanup.batch", [], Relay, Some("5000"), Native("cleanup-batch"), "rows per delete"),
    spec!("outbox.relay.cleanup.interval.seconds", [], Relay, Some("1"), Native("cleanup-interval"),
        "seconds between deletes"),
    spec!("outbox.relay.cleanup.grace.minutes", [], Relay, Some("0"), Native("cleanup-grace"),
        "minutes a relayed row is kept"),
    spec!("publication.name", [], Connector, Some("dbz_publication"), NativeOrDefault("publication"), "the publication"),
    spec!("publication.autocreate.mode", [], Connector, Some("all_tables"), Parsed(|c, d| {
        d.run.publication_mode = Some(match c.o.get("publication.autocreate.mode").map(str::to_ascii_lowercase).as_deref().unwrap_or("all_tables") {
            "all_tables" => PublicationMode::AllTables,
            "filtered" => PublicationMode::Filtered,
            "no_tables" => PublicationMode::NoTables,
            "disabled" => PublicationMode::Disabled,
            other => return Err(format!(
                "publication.autocreate.mode: {other:?} is not one of all_tables, filtered, no_tables, disabled"
            )),
        });
        Ok(())
    }), "how the publication is created: all_tables, filtered, no_tables or disabled"),
    spec!("snapshot.mode", [], Connector, Some("initial"), Parsed(|c, d| {
        let mode = c.o.get("snapshot.mode").map(str::to_ascii_lowercase).unwrap_or_else(|| "initial".into());
        d.run.snapshot_mode = Some(match mode.as_str() {
            "initial" => SnapshotMode::Initial,
            // A snapshot when there is no position (a new slot), and again when the position
            // is lost (the slot dropped or invalidated): --on-missing-slot reread.
            "when_needed" => {
                d.run.on_missing_slot = Some(OnMissingSlot::Reread);
                SnapshotMode::Initial
            }
            "no_data" | "never" => SnapshotMode::NoData,
            // Every start; the stream then from the slot (Debezium's streams from where its
            // snapshot began, passing over what the slot still held).
            "always" => SnapshotMode::Always,
            // ConfigurationBasedSnapshotter: the data at every start or never, streaming or not,
            // a new snapshot when the position is lost; the schema options mean nothing for
            // PostgreSQL (its schema is not snapshotted).
            "configuration_based" => {
                let option = |name: &str| flag(c.o, &format!("snapshot.mode.configuration.based.{name}"), false);
                if !option("start.stream")? {
                    return Err("snapshot.mode=configuration_based with snapshot.mode.configuration.based.start.stream=false \
                                (its default) never streams: outbox-relay relays the stream after any snapshot; set it to true"
                        .into());
                }
                if option("snapshot.on.data.error")? {
                    d.run.on_missing_slot = Some(OnMissingSlot::Reread);
                }
                if option("snapshot.data")? { SnapshotMode::Always } else { SnapshotMode::NoData }
            }
            "initial_only" => SnapshotMode::InitialOnly,
            "custom" => return Err(format!(
                "snapshot.mode=custom loads a Java Snapshotter by name (snapshot.mode.custom.name{}), which outbox-relay \
                 cannot run; use initial, always, when_needed, no_data or configuration_based",
                c.o.get("snapshot.mode.custom.name").map(|n| format!("={n}")).unwrap_or_default()
            )),
            other => return Err(format!(
                "snapshot.mode={other} is not one of initial, always, when_needed, no_data, never, configuration_based, \
                 initial_only, custom"
            )),
        });
        Ok(())
    }), "initial, always (every start), when_needed (again when the position is lost), no_data or never, configuration_based"),
    spec!("snapshot.mode.configuration.based.*", [], Connector, None, With("snapshot.mode"),
        "snapshot.mode=configuration_based: snapshot.data (every start), start.stream (must be true), \
         snapshot.on.data.error (a new snapshot when the position is lost); snapshot.schema and \
         snapshot.on.schema.error change nothing for PostgreSQL"),
    spec!("snapshot.mode.custom.name", [], Connector, None, With("snapshot.mode"),
        "snapshot.mode=custom's Snapshotter: refused"),
    spec!("skipped.operations", [], Connector, Some("t"), Parsed(|c, d| {
        d.skipped = c.o.get("skipped.operations").unwrap_or("t").split(',').map(str::trim)
            .filter(|s| !s.is_empty()).map(str::to_owned).collect();
        if d.skipped.iter().any(|s| s == "c") {
            return Err("skipped.operations includes c (inserts): nothing would be relayed from an outbox table".into());
        }
        if let Some(bad) = d.skipped.iter().find(|s| !matches!(s.as_str(), "c" | "u" | "d" | "t" | "none")) {
            return Err(format!("skipped.operations: unknown operation {bad:?}; expected c, u, d, t or none"));
        }
        Ok(())
    }), "operations not dispatched: u, d, t"),
    spec!("heartbeat.interval.ms", [], Connector, Some("0"), Parsed(|c, d| {
        d.heartbeat = match c.o.get("heartbeat.interval.ms") {
            None | Some("0") => None,
            Some(ms) => Some(Heartbeat {
                interval: millis("heartbeat.interval.ms", ms)?,
                action_query: c.o.get("heartbeat.action.query").map(str::to_owned),
            }),
        };
        if d.heartbeat.is_none() && c.o.get("heartbeat.action.query").is_some() {
            d.notes.push("heartbeat.action.query is set but heartbeat.interval.ms is 0: the query never runs (as in Debezium)".into());
        }
        Ok(())
    }), "heartbeat records (and the action query) every so many milliseconds"),
    spec!("heartbeat.action.query", [], Connector, None, With("heartbeat.interval.ms"),
        "SQL run on each heartbeat"),
    spec!("snapshot.fetch.size", [], Connector, None, Native("snapshot-fetch-size"),
        "rows per fetch of the initial snapshot"),
    spec!("status.update.interval.ms", [], Connector, Some("10000"), Parsed(|c, d| {
        // Given only: where it is not, the relay confirms every second (Debezium: 10 s).
        if let Some(ms) = c.o.get("status.update.interval.ms") {
            d.run.status_interval_ms = Some(millis("status.update.interval.ms", ms)?.as_millis() as u64);
        }
        Ok(())
    }), "how often the position is confirmed to PostgreSQL at most"),
    spec!("topic.creation.default.partitions", [], Connector, None, Parsed(|c, d| {
        d.run.topic_partitions = int(c, "topic.creation.default.partitions")?;
        d.topic_creation = c::topic_creation(c.o)?;
        d.run.topic_replication_factor = int(c, "topic.creation.default.replication.factor")?;
        Ok(())
    }), "partitions of the topics the relay creates"),
    spec!("topic.creation.default.replication.factor", [], Connector, None,
        With("topic.creation.default.partitions"), "their replication factor"),
    spec!("topic.creation.*", [], Connector, None, With("topic.creation.default.partitions"),
        "topic configs and groups of the topics the relay creates"),
    spec!("topic.prefix", ["database.server.name"], Connector, None, Parsed(|c, d| {
        d.topic_prefix = c.o.get("topic.prefix").or_else(|| c.o.get("database.server.name"))
            .ok_or("topic.prefix (database.server.name before Debezium 2.0) is required, as in Debezium")?
            .to_owned();
        Ok(())
    }), "names the envelope schemas, the heartbeat and transaction topics"),
    spec!("topic.heartbeat.name", [], Connector, None, Parsed(|c, d| {
        d.heartbeat_topic_name = c.o.get("topic.heartbeat.name").map(str::trim)
            .filter(|n| !n.is_empty()).map(str::to_owned);
        d.heartbeat_topic_prefix = c.o.get("topic.heartbeat.prefix")
            .or_else(|| c.o.get("heartbeat.topics.prefix")).map(str::to_owned);
        Ok(())
    }), "the heartbeat topic"),
    spec!("topic.heartbeat.prefix", ["heartbeat.topics.prefix"], Connector, Some("__debezium-heartbeat"),
        With("topic.heartbeat.name"), "the heartbeat topic's prefix"),
    spec!("notification.enabled.channels", [], Connector, None, Parsed(|c, d| {
        // NotificationService: each name trimmed, matched exactly; unknown names ignored.
        let channels: Vec<&str> = c.o.get("notification.enabled.channels").unwrap_or("")
            .split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
        let sink = channels.contains(&"sink");
        let topic = c.o.get("notification.sink.topic.name").map(str::trim).filter(|t| !t.is_empty());
        if sink && topic.is_none() {
            return Err("The 'notification.sink.topic.name' value is invalid: Notification topic name must be provided \
                        when kafka notification channel is enabled".into());
        }
        if channels.contains(&"jmx") {
            d.notes.push("notification.enabled.channels: jmx is not a channel outbox-relay writes to (no JMX runs \
                          here); sink and log are".into());
        }
        let log = channels.contains(&"log");
        d.notifications = (sink || log).then(|| outbox_router::Notifications {
            sink_topic: sink.then(|| topic.expect("checked").into()),
            log,
        });
        Ok(())
    }), "the notification channels: sink (records to notification.sink.topic.name) and log; jmx is noted, not run"),
    spec!("notification.sink.topic.name", [], Connector, None, With("notification.enabled.channels"),
        "the topic of the sink notification channel"),
    spec!("signal.data.collection", [], Connector, None, Native("signal-table"),
        "the signal table (schema.table): signals inserted there, incremental snapshots' watermarks written there"),
    spec!("signal.enabled.channels", [], Connector, Some("source"), Native("signal-channels"),
        "where signals are read: source, kafka, file"),
    spec!("signal.kafka.topic", [], Connector, None, Native("signal-kafka-topic"),
        "the Kafka signal channel's topic (<topic.prefix>-signal by default)"),
    spec!("signal.kafka.bootstrap.servers", [], Connector, None, Native("signal-kafka-bootstrap-servers"),
        "the Kafka signal channel's brokers"),
    spec!("signal.kafka.groupId", [], Connector, Some("kafka-signal"), Native("signal-kafka-group-id"),
        "the Kafka signal channel's consumer group"),
    spec!("signal.file", [], Connector, Some("file-signals.txt"), Native("signal-file"),
        "the file signal channel's file, one JSON signal per line, emptied once read"),
    spec!("signal.poll.interval.ms", [], Connector, Some("5000"), Native("signal-poll-interval-ms"),
        "how often the kafka and file channels are read"),
    spec!("signal.kafka.poll.timeout.ms", [], Connector, None, NoEffect,
        "the Kafka signal channel waits for records without polling"),
    spec!("signal.consumer.*", [], Connector, None, NotRun("the Kafka signal channel's consumer connects as the relay's \
        own clients do (security.protocol, sasl.*, ssl.*); other consumer settings are not passed"),
        "the Kafka signal channel's consumer settings"),
    spec!("incremental.snapshot.chunk.size", [], Connector, Some("1024"), Native("incremental-snapshot-chunk-size"),
        "rows an incremental snapshot reads per chunk"),
    spec!("incremental.snapshot.watermarking.strategy", [], Connector, Some("insert_insert"), Parsed(|c, _| {
        match c.o.get("incremental.snapshot.watermarking.strategy").map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(()),
            Some(v) if v == "insert_insert" => Ok(()),
            Some(v) => Err(format!("incremental.snapshot.watermarking.strategy={v}: outbox-relay writes insert_insert \
                watermarks (an open and a close row per chunk); set insert_insert or leave it out")),
        }
    }), "incremental snapshot watermarks: insert_insert"),
    spec!("read.only", [], Connector, Some("false"), Native("incremental-snapshot-read-only"),
        "incremental snapshots without watermark rows (nothing written to the database)"),
    spec!("incremental.snapshot.allow.schema.changes", [], Connector, None, NoEffect,
        "an outbox table's Relation is read again from the stream"),
    spec!("provide.transaction.metadata", [], Connector, Some("false"), Parsed(|c, d| {
        d.transaction_metadata = flag(c.o, "provide.transaction.metadata", false)?;
        d.transaction_topic = c.o.get("topic.transaction").map(str::to_owned);
        Ok(())
    }), "BEGIN and END records on <topic.prefix>.transaction"),
    spec!("topic.transaction", [], Connector, Some("transaction"), With("provide.transaction.metadata"),
        "the transaction topic's name after the prefix"),
    spec!("extended.headers.enabled", [], Connector, Some("true"), Parsed(|c, d| {
        d.extended_headers = flag(c.o, "extended.headers.enabled", true)?;
        Ok(())
    }), "Debezium's __debezium.context.* headers on every record"),
    // --- the transform chain ---
    spec!("transforms", [], Connector, None, Parsed(|c, d| {
        let c::RouterAliases { router, decode, before, after } = c::event_router(c.o)?;
        d.router_alias = router;
        d.before_router = before;
        d.after_router = after;
        d.messages = c::messages(c.o, decode.as_deref())?;
        d.decode_alias = decode;
        let (tables, patterns) = c::outbox_tables(c.o, d.messages.is_some())?;
        d.tables = tables;
        d.table_patterns = patterns;
        Ok(())
    }), "the Outbox EventRouter, with DecodeLogicalDecodingMessageContent or Kafka Connect's transforms before it (on the change event), and Kafka Connect's transforms after it"),
    spec!("message.prefix.include.list", ["message.prefix.exclude.list"], Connector, None, With("transforms"),
        "the logical decoding messages relayed, by prefix"),
    spec!("table.include.list", ["table.whitelist"], Connector, None, With("transforms"),
        "the outbox tables (names or patterns)"),
    spec!("schema.include.list", ["schema.whitelist", "schema.exclude.list", "schema.blacklist"], Connector, None,
        Parsed(|c, d| {
            d.table_patterns = c::schema_filter(c.o, &d.tables, std::mem::take(&mut d.table_patterns))?;
            Ok(())
        }),
        "the schemas captured: every outbox table named must be in one, and a table pattern takes only their tables"),
    spec!("predicates", [], Connector, None, Parsed(|c, d| {
        let sources = c::RoutedSources {
            tables: &d.tables,
            table_patterns: &d.table_patterns,
            topic_prefix: &d.topic_prefix,
            skipped: &d.skipped,
            messages: d.messages.is_some(),
        };
        c::router_predicate(c.o, &d.router_alias, &sources)?;
        // The predicate is checked against the change events' topics, which a routing
        // transform before the EventRouter would change.
        let predicate = format!("transforms.{}.predicate", d.router_alias);
        if let Some(name) = c.o.get(&predicate) {
            // Whether a record is a tombstone is known once the transforms before the
            // EventRouter made it.
            let class = c.o.get(&format!("predicates.{name}.type")).unwrap_or_default();
            if let (Some(alias), true) = (d.before_router.first(), class.ends_with(".RecordIsTombstone")) {
                return Err(format!(
                    "{predicate}: {name} (RecordIsTombstone) on the EventRouter after transforms before it \
                     (transforms.{alias}) is not supported; use TopicNameMatches on the change events' topics"
                ));
            }
            for alias in &d.before_router {
                let class = c.o.get(&format!("transforms.{alias}.type")).unwrap_or_default();
                if class.ends_with(".RegexRouter") || class.ends_with(".TimestampRouter") {
                    return Err(format!(
                        "{predicate}: a predicate on the EventRouter after transforms.{alias} ({class}), which renames \
                         the change events' topics, is not supported; put {alias} after the EventRouter, or drop the \
                         predicate"
                    ));
                }
            }
        }
        d.chain = c::transform_chain(c.o, &d.after_router)?;
        if !d.before_router.is_empty() {
            d.before_chain = Some(c::transform_chain(c.o, &d.before_router)?);
        }
        Ok(())
    }), "Kafka Connect's predicates of the transforms before and after the EventRouter"),
    // --- the EventRouter (transforms.<alias>.*) ---
    spec!("table.field.event.id", [], EventRouter, Some("id"), Parsed(|c, d| {
        d.id_column = router_column(c, d, &["table.field.event.id"], "id");
        Ok(())
    }), "the event id column, written to the id header"),
    spec!("table.field.event.key", ["table.field.event.payload.id"], EventRouter, Some("aggregateid"), Parsed(|c, d| {
        d.key_column = router_column(c, d, &["table.field.event.key", "table.field.event.payload.id"], "aggregateid");
        Ok(())
    }), "the record key column"),
    spec!("table.field.event.payload", [], EventRouter, Some("payload"), Parsed(|c, d| {
        d.payload_column = router_column(c, d, &["table.field.event.payload"], "payload");
        Ok(())
    }), "the record value column"),
    spec!("route.by.field", [], EventRouter, Some("aggregatetype"), Parsed(|c, d| {
        d.route_by_column = router_column(c, d, &["route.by.field"], "aggregatetype");
        Ok(())
    }), "the column the topic is named after"),
    spec!("route.topic.replacement", [], EventRouter, Some("outbox.event.${routedByValue}"), Parsed(|c, d| {
        let regex = router_get(c, d, &["route.topic.regex"]).unwrap_or(DEFAULT_TOPIC_REGEX);
        let replacement = router_get(c, d, &["route.topic.replacement"]).unwrap_or("outbox.event.${routedByValue}");
        d.topic_template = Some(TopicTemplate::with_regex(regex, replacement).map_err(|e| {
            format!("{} / {}: {e}", d.t("route.topic.regex"), d.t("route.topic.replacement"))
        })?);
        Ok(())
    }), "the topic, from the routing value"),
    spec!("route.topic.regex", [], EventRouter, Some(DEFAULT_TOPIC_REGEX), With("route.topic.replacement"),
        "the routing value's regular expression (Java's syntax)"),
    spec!("table.fields.additional.placement", [], EventRouter, None, Parsed(|c, d| {
        d.additional = AdditionalField::parse_list(router_get(c, d, &["table.fields.additional.placement"]).unwrap_or(""))
            .map_err(|e| format!("{}: {e}", d.t("table.fields.additional.placement")))?;
        Ok(())
    }), "columns as headers, envelope fields or the partition"),
    spec!("table.field.additional.missing", ["table.fields.additional.error.on.missing"], EventRouter, Some("error"), Parsed(|c, d| {
        d.ignore_missing_additional = match router_get(c, d, &["table.field.additional.missing"])
            .map(str::to_ascii_lowercase).as_deref()
        {
            Some("ignore") => true,
            Some("error") => false,
            Some(other) => return Err(format!("{}: {other:?} is not error or ignore", d.t("table.field.additional.missing"))),
            None => !router_flag(c, d, &["table.fields.additional.error.on.missing"], true)?,
        };
        Ok(())
    }), "an additional column a table lacks: error or ignore"),
    spec!("table.op.invalid.behavior", ["debezium.op.invalid.behavior"], EventRouter, Some("warn"), Parsed(|c, d| {
        d.on_update = match router_get(c, d, &["table.op.invalid.behavior", "debezium.op.invalid.behavior"])
            .map(str::to_ascii_lowercase).as_deref()
        {
            None | Some("warn") => InvalidOperation::Warn,
            Some("error") => InvalidOperation::Error,
            Some("fatal") => InvalidOperation::Fatal,
            Some(other) => return Err(format!("{}: {other:?} is not warn, error or fatal", d.t("table.op.invalid.behavior"))),
        };
        Ok(())
    }), "an UPDATE of an outbox row: warn, error or fatal"),
    spec!("table.expand.json.payload", ["debezium.expand.json.payload"], EventRouter, Some("false"), Parsed(|c, d| {
        d.expand = router_flag(c, d, &["table.expand.json.payload", "debezium.expand.json.payload"], false)?;
        Ok(())
    }), "a JSON payload written as a Connect struct"),
    spec!("table.json.payload.null.behavior", [], EventRouter, Some("ignore"), Parsed(|c, d| {
        d.keep_nulls = match router_get(c, d, &["table.json.payload.null.behavior"]).map(str::to_ascii_lowercase).as_deref() {
            None | Some("ignore") => false,
            Some("optional_bytes") => true,
            Some(other) => return Err(format!("{}: {other:?} is not ignore or optional_bytes", d.t("table.json.payload.null.behavior"))),
        };
        Ok(())
    }), "expanded JSON nulls: ignore or optional_bytes"),
    spec!("table.json.payload.empty.array.behavior", [], EventRouter, Some("ignore"), Parsed(|c, d| {
        d.keep_empty_arrays = match router_get(c, d, &["table.json.payload.empty.array.behavior"]).map(str::to_ascii_lowercase).as_deref() {
            None | Some("ignore") => false,
            Some("optional_string") => true,
            Some(other) => return Err(format!("{}: {other:?} is not ignore or optional_string", d.t("table.json.payload.empty.array.behavior"))),
        };
        Ok(())
    }), "expanded empty JSON arrays: ignore or optional_string"),
    spec!("route.tombstone.on.empty.payload", [], EventRouter, Some("false"), Parsed(|c, d| {
        d.tombstone_on_empty_payload = router_flag(c, d, &["route.tombstone.on.empty.payload"], false)?;
        Ok(())
    }), "a NULL or blank payload written as a tombstone"),
    spec!("table.field.event.timestamp", [], EventRouter, None, Parsed(|c, d| {
        d.timestamp_column = router_get(c, d, &["table.field.event.timestamp"]).map(str::to_owned);
        Ok(())
    }), "the record timestamp column"),
    spec!("table.field.event.schema.version", [], EventRouter, None, Parsed(|c, d| {
        d.schema_version_column = router_get(c, d, &["table.field.event.schema.version"]).map(str::to_owned);
        Ok(())
    }), "the envelope schema's version column"),
    spec!("tracing.span.context.field", [], EventRouter, Some("tracingspancontext"), Parsed(|c, d| {
        d.tracing_span_context_column = router_column(c, d, &["tracing.span.context.field"], "tracingspancontext");
        for name in ["table.field.event.type", "tracing.operation.name", "tracing.with.context.field.only"] {
            c.o.get(&d.t(name));
        }
        Ok(())
    }), "the trace context column, propagated as traceparent / tracestate"),
    spec!("table.field.event.type", ["tracing.operation.name", "tracing.with.context.field.only"], EventRouter, None,
        NoEffect, "read by Debezium for tracing only"),
    // --- converters ---
    spec!("key.converter", [], ConnectorOrWorker, Some("org.apache.kafka.connect.json.JsonConverter"), Parsed(|c, d| {
        d.key = Some(c::converter(c.o, c.w, "key", &mut d.notes)?);
        Ok(())
    }), "JsonConverter (schemas.enable, replace.null.with.default), StringConverter, ByteArrayConverter or \
        Debezium's BinaryDataConverter, a schema-registry AvroConverter (Confluent's, Apicurio's) or Confluent's \
        JsonSchemaConverter or ProtobufConverter"),
    spec!("value.converter", [], ConnectorOrWorker, Some("org.apache.kafka.connect.json.JsonConverter"), Parsed(|c, d| {
        d.value = Some(c::converter(c.o, c.w, "value", &mut d.notes)?);
        Ok(())
    }), "JsonConverter (schemas.enable, replace.null.with.default), StringConverter, ByteArrayConverter, \
        Debezium's BinaryDataConverter or CloudEventsConverter (JSON), a schema-registry AvroConverter \
        (Confluent's, Apicurio's) or Confluent's JsonSchemaConverter or ProtobufConverter"),
    spec!("header.converter", [], ConnectorOrWorker, Some("org.apache.kafka.connect.storage.SimpleHeaderConverter"), Parsed(|c, d| {
        d.header = Some(c::header_converter(c.o, c.w, &mut d.notes)?);
        Ok(())
    }), "SimpleHeaderConverter, or a key/value converter for headers"),
    spec!("key.converter.schemas.enable", ["value.converter.schemas.enable", "header.converter.schemas.enable",
        "key.converter.replace.null.with.default", "value.converter.replace.null.with.default",
        "header.converter.replace.null.with.default"], ConnectorOrWorker, Some("true"),
        With("value.converter"), "JsonConverter's options"),
    spec!("value.converter.delegate.converter.type*", ["key.converter.delegate.converter.type*",
        "header.converter.delegate.converter.type*"], ConnectorOrWorker, None, With("value.converter"),
        "BinaryDataConverter's delegate for what is not bytes, and its options"),
    spec!("value.converter.*", ["key.converter.*", "header.converter.*"], ConnectorOrWorker, None,
        With("value.converter"), "a converter's own options: a schema registry's URL, credentials (never shown), \
        subject name strategy, auto.register.schemas, use.latest.version, Apicurio's apicurio.registry.*"),
    spec!("value.converter.schemas.cache.size", ["key.converter.schemas.cache.size"], ConnectorOrWorker, None,
        NoEffect, "JsonConverter's schema cache"),
    spec!("transforms.*", [], Connector, None, With("predicates"),
        "each transform's type, options, predicate and negate"),
    spec!("predicates.*", [], Connector, None, With("predicates"), "each predicate's type and options"),
    // --- Kafka ---
    spec!("producer.override.interceptor.classes", [], ConnectorOrWorker, None,
        NotRun(INTERCEPTORS_NOT_RUN), "the Java producer's interceptors"),
    spec!("producer.override.metric.reporters", [], ConnectorOrWorker, None, NoEffect,
        "Java metric reporters: the relay's metrics are on --metrics-address"),
    spec!("producer.override.*", [], ConnectorOrWorker, None, Parsed(|c, d| {
        d.run.bootstrap_servers = c.w.and_then(|w| w.get("bootstrap.servers")).map(str::to_owned);
        // The worker's producer.*, then the connector's producer.override.* (the last one wins).
        let mut settings = Vec::new();
        if let Some(w) = c.w {
            settings.extend(w.with_prefix("producer."));
        }
        settings.extend(c.o.with_prefix("producer.override."));
        for (key, value) in &settings {
            if key == "interceptor.classes" && !value.trim().is_empty() {
                d.notes.push(format!("producer interceptor.classes={} is not run: {INTERCEPTORS_NOT_RUN}", value.trim()));
            }
        }
        super::producer::translate_all(settings, &mut d.producer_properties, &mut d.producer_unknown)
            .map_err(|e| format!("producer.{e}"))
    }), "the producer's settings (the worker's producer.*, then these)"),
    spec!("errors.tolerance", [], Connector, Some("none"), Parsed(|c, d| {
        d.errors = c::error_handling(c.o, &d.errors.connector)?;
        Ok(())
    }), "none: a record a transform or converter fails on goes to the relay's dead-letter topic; all: to \
        errors.deadletterqueue.topic.name when set"),
    spec!("errors.deadletterqueue.topic.name", ["errors.deadletterqueue.topic.replication.factor"], Connector, None,
        With("errors.tolerance"), "Kafka Connect's dead-letter queue (with errors.tolerance=all)"),
    spec!("errors.deadletterqueue.context.headers.enable", [], Connector, Some("false"), With("errors.tolerance"),
        "the __connect.errors.* headers on its records"),
    spec!("errors.log.enable", ["errors.log.include.messages"], Connector, Some("false"), With("errors.tolerance"),
        "each failure logged as Kafka Connect's LogReporter logs it"),
    // --- no effect on the records ---
    spec!("tasks.max", [], Connector, Some("1"), NoEffect, "one task, as Debezium's PostgreSQL connector"),
    spec!("tombstones.on.delete", ["include.schema.changes"], Connector, None, NoEffect,
        "change events of the outbox are not written"),
    spec!("database.tcpKeepAlive", ["database.server.id"], Connector, None, NoEffect, "the relay keeps its connections alive"),
    spec!("max.queue.size", [], Connector, None, Native("max-in-flight"),
        "the events produced and not yet acknowledged before reading pauses (the relay's default: 4,096)"),
    spec!("max.batch.size", ["max.queue.size.in.bytes", "poll.interval.ms"], Connector, None,
        NoEffect, "the relay bounds what it holds in bytes (--max-in-flight-bytes)"),
    spec!("slot.max.retries", ["slot.retry.delay.ms", "retriable.restart.connector.wait.ms"], Connector, None,
        NoEffect, "the relay retries a busy slot and reconnects on its own"),
    spec!("slot.drop.on.stop", ["slot.stream.params"], Connector, None, NoEffect, "the slot is kept"),
    spec!("errors.max.retries", ["errors.retry.timeout", "errors.retry.delay.max.ms"], Connector, None, NoEffect,
        "the relay retries what can succeed, never what cannot"),
    spec!("offset.flush.interval.ms", ["offset.flush.timeout.ms", "lsn.flush.mode", "flush.lsn.source",
        "offset.mismatch.strategy"], Connector, None, NoEffect,
        "the position is confirmed once Kafka acknowledged every event before it"),
    spec!("snapshot.lock.timeout.ms", ["snapshot.max.threads", "snapshot.delay.ms", "snapshot.isolation.mode"],
        Connector, None, NoEffect, "the snapshot reads the outbox in one repeatable-read transaction"),
    spec!("schema.refresh.mode", [], Connector, None, NoEffect, "relation changes are read from the stream"),
    spec!("topic.creation.enable", [], Connector, None, NoEffect, "the relay creates its topics"),
    spec!("database.history.kafka.bootstrap.servers", ["schema.history.internal.kafka.bootstrap.servers",
        "schema.history.internal.kafka.topic", "database.history.kafka.topic"], Connector, None, NoEffect,
        "PostgreSQL keeps no schema history"),
    spec!("message.key.columns", [], Connector, None, Parsed(|c, d| {
        // The change event's key is the primary key's (or first unique index's) columns; only
        // the transforms before the EventRouter see it (the routed record's key is the
        // EventRouter's).
        match (c.o.get("message.key.columns"), d.before_router.first()) {
            (Some(_), Some(alias)) => Err(format!(
                "message.key.columns is not supported with transforms before the EventRouter \
                 (transforms.{alias}): their change events carry the table's primary key (or, without one, its \
                 first unique index) as their key"
            )),
            _ => Ok(()),
        }
    }), "the change event's key: the primary key (or first unique index) only; the routed record's key is the EventRouter's"),
    spec!("database.*", [], Connector, None, NoEffect, "other connection options of Debezium's"),
];

/// Why `interceptor.classes` is accepted but not run.
pub const INTERCEPTORS_NOT_RUN: &str = "outbox-relay runs no Java classes: a header an interceptor adds (a trace \
    context) is not on the records, and what it counts is not counted; the relay's own metrics and logs stand in";

/// The entry of `name` in a configuration whose EventRouter's alias is `router`, if
/// outbox-relay knows the option.
pub fn describe(name: &str, router: &str) -> Option<&'static Spec> {
    let local = name.strip_prefix(&format!("transforms.{router}."));
    CATALOG.iter().find(|s| match (s.applies, local) {
        (Applies::EventRouter, Some(local)) => s.matches(local),
        (Applies::EventRouter, None) => false,
        // A transform's options: the EventRouter's own are matched above.
        _ => (local.is_none() || s.name == "transforms.*") && s.matches(name),
    })
}
