//! A Debezium PostgreSQL connector + Outbox EventRouter configuration (and the Kafka
//! Connect worker's) translated into outbox-relay's settings. Every option is either
//! applied, accepted because it does not change what reaches Kafka, refused with an error
//! naming it (it would change the bytes and outbox-relay does not do it), or listed as
//! unknown in one start-up warning.

use super::options::Options;
use super::properties::RawConfig;
use crate::config::{Heartbeat, Preset as DebeziumSetup, PublicationMode, SnapshotMode};
use crate::secret::Secret;
use outbox_router::connect::{Converter, ExpandBehaviour, HeaderConverter, TypeModes};
use outbox_router::{
    AdditionalField, ConnectFormat, InvalidOperation, ListPattern, MessageConfig, Output,
    RouterConfig, TableName, TopicTemplate, TransactionMetadata, DEFAULT_TOPIC_REGEX,
};
use std::time::Duration;

const POSTGRES_CONNECTOR: &str = "io.debezium.connector.postgresql.PostgresConnector";
const EVENT_ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";
const DECODE_MESSAGE: &str =
    "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";

/// Options that do not change what reaches Kafka from an outbox table, or that
/// outbox-relay does better by construction (it confirms after every ack, holds no queue
/// beyond its in-flight bound, reconnects on its own).
const NO_EFFECT: &[&str] = &[
    "tasks.max",
    "tombstones.on.delete",
    "database.tcpKeepAlive",
    "database.server.id",
    "include.schema.changes",
    "max.batch.size",
    "max.queue.size",
    "max.queue.size.in.bytes",
    "poll.interval.ms",
    "slot.max.retries",
    "slot.retry.delay.ms",
    "slot.drop.on.stop",
    "slot.stream.params",
    "retriable.restart.connector.wait.ms",
    "errors.max.retries",
    "errors.retry.timeout",
    "errors.retry.delay.max.ms",
    "offset.flush.interval.ms",
    "offset.flush.timeout.ms",
    "lsn.flush.mode",
    "flush.lsn.source",
    "offset.mismatch.strategy",
    "snapshot.lock.timeout.ms",
    "snapshot.max.threads",
    "snapshot.delay.ms",
    "snapshot.isolation.mode",
    "schema.refresh.mode",
    "topic.creation.enable",
    "key.converter.schemas.enable",
    "value.converter.schemas.enable",
    "header.converter.schemas.enable",
    "value.converter.schemas.cache.size",
    "key.converter.schemas.cache.size",
    "table.field.event.type",
    "tracing.operation.name",
    "tracing.with.context.field.only",
    "database.history.kafka.bootstrap.servers",
    "schema.history.internal.kafka.bootstrap.servers",
    "schema.history.internal.kafka.topic",
    "database.history.kafka.topic",
    "message.key.columns",
    "status.update.interval.ms",
];

/// Options that would change the records, which outbox-relay does not implement: refused.
const REFUSED: &[(&str, &str)] = &[
    (
        "column.include.list",
        "columns are never dropped from outbox rows",
    ),
    (
        "column.exclude.list",
        "columns are never dropped from outbox rows",
    ),
    (
        "column.whitelist",
        "columns are never dropped from outbox rows",
    ),
    (
        "column.blacklist",
        "columns are never dropped from outbox rows",
    ),
    ("transaction.boundary", "Kafka transactions are not used"),
    ("converters", "custom converters are not supported"),
];

pub fn translate(
    connector: &RawConfig,
    worker: Option<&RawConfig>,
) -> Result<DebeziumSetup, String> {
    let o = Options::new(&connector.entries);
    let w = worker.map(|w| Options::new(&w.entries));
    let mut notes = Vec::new();

    if let Some(class) = o.get("connector.class") {
        if class != POSTGRES_CONNECTOR && class != "PostgresConnector" {
            return Err(format!(
                "connector.class: {class} is not Debezium's PostgreSQL connector ({POSTGRES_CONNECTOR})"
            ));
        }
    }
    match o.get("plugin.name") {
        None | Some("pgoutput") => {}
        Some(plugin @ ("decoderbufs" | "wal2json" | "wal2json_streaming" | "wal2json_rds" | "wal2json_rds_streaming")) => {
            return Err(format!(
                "plugin.name: outbox-relay reads pgoutput only, not {plugin}; set \"plugin.name\": \"pgoutput\" \
                 (built into PostgreSQL 10+). An existing {plugin} slot cannot be reused: give outbox-relay a new \
                 slot.name, or drop and recreate the slot with pgoutput"
            ))
        }
        Some(other) => return Err(format!("plugin.name: unknown decoding plugin {other:?}; use pgoutput")),
    }
    for (key, why) in REFUSED {
        if let Some(value) = o.get(key) {
            return Err(format!(
                "{key}={value} is not supported by outbox-relay: {why}"
            ));
        }
    }
    // Kafka Connect runs a source connector exactly-once when the connector requires it or
    // the worker enables exactly-once source support; outbox-relay's --exactly-once gives
    // the same promise without transactions (see the README's "Exactly-once").
    let worker_exactly_once = w
        .as_ref()
        .and_then(|w| w.get("exactly.once.source.support"))
        .is_some_and(|v| v == "enabled");
    let exactly_once = match o.get("exactly.once.support").map(str::to_ascii_lowercase).as_deref() {
        Some("required") => true,
        None | Some("requested") => worker_exactly_once,
        Some("disabled") => false,
        Some(other) => {
            return Err(format!(
                "exactly.once.support: {other:?} is not a value Kafka Connect accepts; use requested or required"
            ))
        }
    };
    if exactly_once {
        notes.push("exactly-once delivery (exactly.once.support / exactly.once.source.support): every record carries \
            its source position in the __outbox_relay.position header; replays skip what Kafka already has".into());
    }
    if let Some(key) = o
        .keys_with_prefix("column.mask.")
        .chain(o.keys_with_prefix("column.truncate."))
        .next()
    {
        return Err(format!(
            "{key} is not supported by outbox-relay: outbox columns are relayed unchanged"
        ));
    }
    let types = type_modes(&o, w.as_ref())?;
    refuse_byte_changing_options(&o, w.as_ref())?;

    // --- PostgreSQL ---
    let postgres_url = postgres_url(&o)?;
    let slot = o.get("slot.name").unwrap_or("debezium").to_owned();
    let slot_failover = flag(&o, "slot.failover", false)?;
    let cleanup = relay_cleanup(&o)?;
    let publication = o
        .get("publication.name")
        .unwrap_or("dbz_publication")
        .to_owned();
    let publication_mode = match o
        .get("publication.autocreate.mode")
        .map(str::to_ascii_lowercase)
        .as_deref()
        .unwrap_or("all_tables")
    {
        "all_tables" => PublicationMode::AllTables,
        "filtered" => PublicationMode::Filtered,
        "no_tables" => PublicationMode::NoTables,
        "disabled" => PublicationMode::Disabled,
        other => {
            return Err(format!(
                "publication.autocreate.mode: {other:?} is not one of all_tables, filtered, no_tables, disabled"
            ))
        }
    };
    let snapshot_mode = o
        .get("snapshot.mode")
        .map(str::to_ascii_lowercase)
        .unwrap_or_else(|| "initial".into());
    // when_needed: a snapshot when there is no position (a new slot), and again when the
    // position is lost (the slot dropped or invalidated): --on-missing-slot reread.
    let on_missing_slot =
        (snapshot_mode == "when_needed").then_some(crate::config::OnMissingSlot::Reread);
    let snapshot = match snapshot_mode.as_str() {
        "initial" | "when_needed" => SnapshotMode::Initial,
        "no_data" | "never" => SnapshotMode::NoData,
        other => {
            return Err(format!(
                "snapshot.mode={other} is not supported by outbox-relay; use initial (existing outbox rows once, \
                 when the slot is created) or no_data"
            ))
        }
    };
    let skipped = o.get("skipped.operations").unwrap_or("t");
    let skipped: Vec<&str> = skipped
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if skipped.contains(&"c") {
        return Err("skipped.operations includes c (inserts): nothing would be relayed from an outbox table".into());
    }
    if let Some(bad) = skipped
        .iter()
        .find(|s| !matches!(**s, "c" | "u" | "d" | "t" | "none"))
    {
        return Err(format!(
            "skipped.operations: unknown operation {bad:?}; expected c, u, d, t or none"
        ));
    }
    let heartbeat = match o.get("heartbeat.interval.ms") {
        None | Some("0") => None,
        Some(ms) => Some(Heartbeat {
            interval: Duration::from_millis(ms.parse().map_err(|_| {
                format!("heartbeat.interval.ms: {ms:?} is not a number of milliseconds")
            })?),
            action_query: o.get("heartbeat.action.query").map(str::to_owned),
        }),
    };
    if heartbeat.is_none() && o.get("heartbeat.action.query").is_some() {
        notes.push("heartbeat.action.query is set but heartbeat.interval.ms is 0: the query never runs (as in Debezium)".into());
    }
    // The initial snapshot reads the outbox through a cursor, this many rows at a time at
    // most (fewer when rows are large).
    let snapshot_fetch_size = match o.get("snapshot.fetch.size") {
        None => None,
        Some(n) => match n.trim().parse::<usize>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                return Err(format!(
                    "snapshot.fetch.size: {n:?} is not a positive number of rows"
                ))
            }
        },
    };
    let status_interval = match o.get("status.update.interval.ms") {
        None => None,
        Some(ms) => Some(Duration::from_millis(ms.parse().map_err(|_| {
            format!("status.update.interval.ms: {ms:?} is not a number of milliseconds")
        })?)),
    };
    let int_option = |key: &str| -> Result<Option<i32>, String> {
        o.get(key)
            .map(|v| {
                v.parse::<i32>()
                    .map_err(|_| format!("{key}: {v:?} is not a number"))
            })
            .transpose()
    };
    let topic_partitions = int_option("topic.creation.default.partitions")?;
    let topic_creation = topic_creation(&o)?;
    let topic_replication_factor = int_option("topic.creation.default.replication.factor")?;
    let topic_prefix = o
        .get("topic.prefix")
        .or_else(|| o.get("database.server.name"))
        .ok_or(
            "topic.prefix (database.server.name before Debezium 2.0) is required, as in Debezium",
        )?
        .to_owned();
    // HeartbeatImpl's records, every heartbeat.interval.ms (AbstractTopicNamingStrategy.heartbeatTopic).
    let heartbeat_topic = heartbeat.as_ref().map(|_| {
        match o
            .get("topic.heartbeat.name")
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            Some(name) => name.to_owned(),
            None => format!(
                "{}.{topic_prefix}",
                o.get("topic.heartbeat.prefix")
                    .or_else(|| o.get("heartbeat.topics.prefix"))
                    .unwrap_or("__debezium-heartbeat")
            ),
        }
        .into()
    });
    o.accept(&[
        "topic.heartbeat.name",
        "topic.heartbeat.prefix",
        "heartbeat.topics.prefix",
    ]);
    // TransactionMonitor's BEGIN/END records (AbstractTopicNamingStrategy.transactionTopic).
    let transaction_metadata =
        flag(&o, "provide.transaction.metadata", false)?.then(|| TransactionMetadata {
            topic: format!(
                "{topic_prefix}.{}",
                o.get("topic.transaction").unwrap_or("transaction")
            )
            .into(),
            skipped: skipped
                .iter()
                .filter_map(|s| s.chars().next().filter(|_| s.len() == 1))
                .collect(),
        });
    // Debezium 3.2+ adds its context headers to every record unless this is false.
    let extended_headers = flag(&o, "extended.headers.enabled", true)?;

    // --- the EventRouter ---
    let topic_prefix_for_headers = topic_prefix.clone();
    let (transform, decode_messages, after_router) = event_router(&o)?;
    let messages = messages(&o, decode_messages.as_deref())?;
    let (tables, table_patterns) = outbox_tables(&o, messages.is_some())?;
    let t = |name: &str| format!("transforms.{transform}.{name}");
    let get = |name: &str| o.get(&t(name));
    let bool_option = |names: &[&str], default: bool| -> Result<bool, String> {
        for name in names {
            if let Some(v) = get(name) {
                return match v.trim().to_ascii_lowercase().as_str() {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    _ => Err(format!("{}: {v:?} is not true or false", t(name))),
                };
            }
        }
        Ok(default)
    };
    let column = |names: &[&str], default: &str| -> String {
        names
            .iter()
            .find_map(|n| get(n))
            .unwrap_or(default)
            .trim()
            .to_owned()
    };
    let id_column = column(&["table.field.event.id"], "id");
    let key_column = column(
        &["table.field.event.key", "table.field.event.payload.id"],
        "aggregateid",
    );
    let payload_column = column(&["table.field.event.payload"], "payload");
    let route_by_column = column(&["route.by.field"], "aggregatetype");
    let regex = get("route.topic.regex").unwrap_or(DEFAULT_TOPIC_REGEX);
    let replacement = get("route.topic.replacement").unwrap_or("outbox.event.${routedByValue}");
    let topic_template = TopicTemplate::with_regex(regex, replacement).map_err(|e| {
        format!(
            "{} / {}: {e}",
            t("route.topic.regex"),
            t("route.topic.replacement")
        )
    })?;
    let additional =
        AdditionalField::parse_list(get("table.fields.additional.placement").unwrap_or(""))
            .map_err(|e| format!("{}: {e}", t("table.fields.additional.placement")))?;
    let ignore_missing_additional = match get("table.field.additional.missing")
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("ignore") => true,
        Some("error") => false,
        Some(other) => {
            return Err(format!(
                "{}: {other:?} is not error or ignore",
                t("table.field.additional.missing")
            ))
        }
        None => !bool_option(&["table.fields.additional.error.on.missing"], true)?,
    };
    let on_update = match get("table.op.invalid.behavior")
        .or_else(|| get("debezium.op.invalid.behavior"))
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("warn") => InvalidOperation::Warn,
        Some("error") => InvalidOperation::Error,
        Some("fatal") => InvalidOperation::Fatal,
        Some(other) => {
            return Err(format!(
                "{}: {other:?} is not warn, error or fatal",
                t("table.op.invalid.behavior")
            ))
        }
    };
    // Debezium never sees UPDATEs it was told to skip.
    let on_update = if skipped.contains(&"u") {
        InvalidOperation::Ignore
    } else {
        on_update
    };
    let expand = bool_option(
        &["table.expand.json.payload", "debezium.expand.json.payload"],
        false,
    )?;
    let keep_nulls = match get("table.json.payload.null.behavior")
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("ignore") => false,
        Some("optional_bytes") => true,
        Some(other) => {
            return Err(format!(
                "{}: {other:?} is not ignore or optional_bytes",
                t("table.json.payload.null.behavior")
            ))
        }
    };
    let keep_empty_arrays = match get("table.json.payload.empty.array.behavior")
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("ignore") => false,
        Some("optional_string") => true,
        Some(other) => {
            return Err(format!(
                "{}: {other:?} is not ignore or optional_string",
                t("table.json.payload.empty.array.behavior")
            ))
        }
    };
    let tombstone_on_empty_payload = bool_option(&["route.tombstone.on.empty.payload"], false)?;
    let timestamp_column = get("table.field.event.timestamp").map(str::to_owned);
    let schema_version_column = get("table.field.event.schema.version").map(str::to_owned);
    let tracing_span_context_column = Some(column(
        &["tracing.span.context.field"],
        "tracingspancontext",
    ));
    for name in [
        "table.field.event.type",
        "tracing.operation.name",
        "tracing.with.context.field.only",
    ] {
        get(name);
    }

    // --- converters: connector config, else worker config, else Kafka Connect's defaults ---
    let key = converter(&o, w.as_ref(), "key", &mut notes)?;
    let value = converter(&o, w.as_ref(), "value", &mut notes)?;
    let header = header_converter(&o, w.as_ref(), &mut notes)?;
    let chain = transform_chain(&o, &after_router)?;

    // --- Kafka ---
    let bootstrap_servers = w
        .as_ref()
        .and_then(|w| w.get("bootstrap.servers"))
        .map(str::to_owned);
    let mut producer_properties = Vec::new();
    let mut producer_unknown = Vec::new();
    // The worker's producer.*, then the connector's producer.override.* (the last one wins).
    let mut producer_settings = Vec::new();
    if let Some(w) = &w {
        producer_settings.extend(w.with_prefix("producer."));
    }
    producer_settings.extend(o.with_prefix("producer.override."));
    super::producer::translate_all(
        producer_settings,
        &mut producer_properties,
        &mut producer_unknown,
    )
    .map_err(|e| format!("producer.{e}"))?;

    let errors = error_handling(&o, connector.name.as_deref().unwrap_or("outbox-relay"))?;
    o.accept(NO_EFFECT);
    o.accept(&["exactly.once.support"]);
    o.accept_prefix("database.");
    let mut unknown = o.unused();
    unknown.extend(producer_unknown);
    Ok(DebeziumSetup {
        connector_name: connector.name.clone(),
        postgres_url: Some(postgres_url),
        initial_statements: o
            .get("database.initial.statements")
            .map(crate::source::postgres::split_statements)
            .unwrap_or_default(),
        bootstrap_servers,
        tables: tables.clone(),
        table_patterns: table_patterns.clone(),
        slot,
        publication,
        publication_mode,
        snapshot,
        snapshot_fetch_size,
        heartbeat,
        status_interval,
        exactly_once,
        slot_failover,
        cleanup,
        on_missing_slot,
        topic_partitions,
        topic_replication_factor,
        topic_creation,
        router: RouterConfig {
            chain,
            tables,
            table_patterns,
            messages,
            id_column,
            key_column,
            payload_column,
            route_by_column,
            topic_template,
            additional,
            tombstone_on_null_payload: tombstone_on_empty_payload,
            expand_json_payload: false,
            timestamp_column,
            ignore_missing_additional,
            on_update,
            output: Output::Connect(ConnectFormat {
                key,
                value,
                header,
                topic_prefix,
                expand: expand.then_some(ExpandBehaviour {
                    keep_nulls,
                    keep_empty_arrays,
                }),
                schema_version_column,
                tracing_span_context_column,
                tombstone_on_empty_payload,
                // The run id (a UUIDv7 per start) is the relay's to fill in when it starts.
                context_headers: extended_headers.then(|| {
                    outbox_router::ContextHeaders::postgres(&topic_prefix_for_headers, None)
                }),
                types,
                heartbeat_topic,
                transaction_metadata,
                errors,
            }),
        },
        producer_properties,
        notes,
        unknown,
        hidden: Default::default(),
    })
}

/// Kafka Connect's `errors.*` options (see [`outbox_router::ErrorHandling`]): a record a
/// transform or converter fails on is never dropped; with `errors.tolerance=all` and a
/// dead-letter queue it goes there as Connect writes records there.
fn error_handling(o: &Options, connector: &str) -> Result<outbox_router::ErrorHandling, String> {
    let tolerate_all = match o.get("errors.tolerance") {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("none") => false,
        Some(v) if v.eq_ignore_ascii_case("all") => true,
        Some(v) => {
            return Err(format!(
                "errors.tolerance: Invalid value {v} for configuration errors.tolerance: String must be one of: none, all"
            ))
        }
    };
    let dead_letter_queue = o
        .get("errors.deadletterqueue.topic.name")
        .filter(|t| !t.is_empty())
        .map(|t| -> Result<std::sync::Arc<str>, String> {
            outbox_router::validate_topic_name(t)
                .map_err(|e| format!("errors.deadletterqueue.topic.name: {e}"))?;
            Ok(t.into())
        })
        .transpose()?;
    // Read, so not reported as unknown: the relay's topic creation applies to it.
    o.get("errors.deadletterqueue.topic.replication.factor");
    Ok(outbox_router::ErrorHandling {
        tolerate_all,
        dead_letter_queue,
        context_headers: flag(o, "errors.deadletterqueue.context.headers.enable", false)?,
        log: flag(o, "errors.log.enable", false)?,
        log_messages: flag(o, "errors.log.include.messages", false)?,
        connector: connector.to_owned(),
    })
}

/// `topic.creation.default.*` and `topic.creation.groups` (Kafka Connect's
/// `SourceConnectorConfig`, `TopicCreationGroup`): every setting of a group other than
/// include, exclude, partitions and replication.factor is a topic config; a group without
/// partitions or replication.factor takes the default group's.
fn topic_creation(o: &Options) -> Result<crate::config::TopicCreation, String> {
    const GROUP_SETTINGS: &[&str] = &["include", "exclude", "partitions", "replication.factor"];
    let configs_of = |group: &str| -> Vec<(String, String)> {
        o.with_prefix(&format!("topic.creation.{group}."))
            .into_iter()
            .filter(|(k, _)| !GROUP_SETTINGS.contains(&k.as_str()))
            .map(|(k, v)| (k, v.to_owned()))
            .collect()
    };
    let regexes = |key: &str| -> Result<Vec<regex::Regex>, String> {
        o.get(key)
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                regex::Regex::new(&format!("^(?:{r})$"))
                    .map_err(|e| format!("{key}: {r:?} is not a regular expression: {e}"))
            })
            .collect()
    };
    let mut groups = Vec::new();
    for name in o
        .get("topic.creation.groups")
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
    {
        let include = regexes(&format!("topic.creation.{name}.include"))?;
        if include.is_empty() {
            return Err(format!(
                "topic.creation.{name}.include is required for the topic creation group {name}"
            ));
        }
        let int = |setting: &str| -> Result<Option<i32>, String> {
            let key = format!("topic.creation.{name}.{setting}");
            o.get(&key)
                .map(|v| {
                    v.parse()
                        .map_err(|_| format!("{key}: {v:?} is not a number"))
                })
                .transpose()
        };
        groups.push(crate::config::TopicGroup {
            name: name.to_owned(),
            exclude: regexes(&format!("topic.creation.{name}.exclude"))?,
            include,
            partitions: int("partitions")?,
            replication_factor: int("replication.factor")?,
            configs: configs_of(name),
        });
    }
    Ok(crate::config::TopicCreation {
        configs: configs_of("default"),
        groups,
    })
}

/// Options that would change the records' bytes, accepted at their default (or harmless)
/// values and refused otherwise: outbox-relay does not implement them, and a warning would
/// let records differ from Debezium's silently.
fn refuse_byte_changing_options(o: &Options, w: Option<&Options>) -> Result<(), String> {
    let is = |key: &str, allowed: &[&str]| -> Result<(), String> {
        match o.get(key) {
            Some(v) if !allowed.iter().any(|a| a.eq_ignore_ascii_case(v.trim())) => Err(format!(
                "{key}={v} is not supported by outbox-relay (it changes the records' bytes); accepted: {}",
                allowed.join(", ")
            )),
            _ => Ok(()),
        }
    };
    for key in [
        "column.propagate.source.type",
        "datatype.propagate.source.type",
    ] {
        is(key, &[""]).map_err(|_| {
            format!(
                "{key} is not supported by outbox-relay: it adds __debezium.source.column.* parameters to \
                 column schemas, which outbox-relay does not write; remove it"
            )
        })?;
    }
    is("include.schema.comments", &["false"])?;
    is("topic.delimiter", &["."])?;
    is(
        "topic.naming.strategy",
        &[
            "io.debezium.schema.SchemaTopicNamingStrategy",
            "io.debezium.schema.DefaultTopicNamingStrategy",
        ],
    )?;
    is("schema.name.adjustment.mode", &["none"])?;
    is("field.name.adjustment.mode", &["none"])?;
    is("sanitize.field.names", &["false"])?;
    // A partitioner other than Kafka's default (murmur2 of the key) moves keys to other
    // partitions than the ones consumers see today.
    let default_partitioners = [
        "org.apache.kafka.clients.producer.internals.DefaultPartitioner",
        "org.apache.kafka.clients.producer.internals.BuiltInPartitioner",
    ];
    for (source, key) in [
        (Some(o), "producer.override.partitioner.class"),
        (w, "producer.partitioner.class"),
    ] {
        if let Some(class) = source.and_then(|s| s.get(key)) {
            if !default_partitioners.contains(&class.trim()) {
                return Err(format!(
                    "{key}={class} is not supported by outbox-relay: it partitions by murmur2 of the key, \
                     as Kafka's default partitioner does; another partitioner would move keys"
                ));
            }
        }
    }
    Ok(())
}

/// The relay's own `--cleanup` options in a connector configuration (Debezium has none):
/// `outbox.relay.cleanup`, `.batch`, `.interval.seconds`, `.grace.minutes`.
fn relay_cleanup(o: &Options) -> Result<crate::config::CleanupOptions, String> {
    let number = |key: &str| -> Result<Option<u64>, String> {
        o.get(key)
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("{key}: {v:?} is not a whole number"))
            })
            .transpose()
    };
    let batch = number("outbox.relay.cleanup.batch")?
        .map(|n| {
            u32::try_from(n).map_err(|_| format!("outbox.relay.cleanup.batch: {n} is too large"))
        })
        .transpose()?;
    Ok(crate::config::CleanupOptions {
        cleanup: o
            .get("outbox.relay.cleanup")
            .map(|_| flag(o, "outbox.relay.cleanup", false))
            .transpose()?,
        cleanup_batch: batch,
        cleanup_interval: number("outbox.relay.cleanup.interval.seconds")?,
        cleanup_grace: number("outbox.relay.cleanup.grace.minutes")?,
    })
}

/// A true/false option (any case), `default` when absent.
fn flag(o: &Options, key: &str, default: bool) -> Result<bool, String> {
    choice(o, key, &[("true", true), ("false", false)], default)
}

/// One of an option's values, matched without regard to case as Debezium's
/// `EnumeratedValue.parse` does.
fn choice<T: Copy>(o: &Options, key: &str, choices: &[(&str, T)], default: T) -> Result<T, String> {
    let Some(value) = o.get(key) else {
        return Ok(default);
    };
    let value = value.trim();
    choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(value))
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            format!("{key}: {value:?} is not one of {}", names.join(", "))
        })
}

/// The connector options that change how columns are typed and written.
fn type_modes(o: &Options, w: Option<&Options>) -> Result<TypeModes, String> {
    use outbox_router::connect::{
        BinaryMode, DecimalMode, HstoreMode, IntervalMode, TimePrecisionMode,
    };
    if let Some(mode @ ("microseconds" | "nanoseconds" | "structured")) =
        o.get("time.precision.mode").map(str::trim)
    {
        return Err(format!(
            "time.precision.mode={mode} is not supported by outbox-relay; use adaptive (the default), \
             adaptive_time_microseconds, connect or isostring"
        ));
    }
    for prefix in ["value.converter", "key.converter"] {
        let key = format!("{prefix}.decimal.format");
        let value = o.get(&key).or_else(|| w.and_then(|w| w.get(&key)));
        if let Some(v) = value {
            if !v.trim().eq_ignore_ascii_case("BASE64") {
                return Err(format!(
                    "{key}={v} is not supported by outbox-relay: decimals are written as JsonConverter's \
                     default (BASE64); use decimal.handling.mode=string or double for readable numbers"
                ));
            }
        }
    }
    let money_fraction_digits = match o.get("money.fraction.digits") {
        None => 2,
        Some(v) => v.trim().parse().map_err(|_| {
            format!("money.fraction.digits: {v:?} is not a number of digits (0-255)")
        })?,
    };
    let include_unknown = flag(o, "include.unknown.datatypes", false)?;
    Ok(TypeModes {
        decimal: choice(
            o,
            "decimal.handling.mode",
            &[
                ("precise", DecimalMode::Precise),
                ("double", DecimalMode::Double),
                ("string", DecimalMode::String),
            ],
            DecimalMode::Precise,
        )?,
        time: choice(
            o,
            "time.precision.mode",
            &[
                ("adaptive", TimePrecisionMode::Adaptive),
                (
                    "adaptive_time_microseconds",
                    TimePrecisionMode::AdaptiveTimeMicroseconds,
                ),
                ("connect", TimePrecisionMode::Connect),
                ("isostring", TimePrecisionMode::IsoString),
            ],
            TimePrecisionMode::Adaptive,
        )?,
        interval: choice(
            o,
            "interval.handling.mode",
            &[
                ("numeric", IntervalMode::Numeric),
                ("string", IntervalMode::String),
            ],
            IntervalMode::Numeric,
        )?,
        hstore: choice(
            o,
            "hstore.handling.mode",
            &[("json", HstoreMode::Json), ("map", HstoreMode::Map)],
            HstoreMode::Json,
        )?,
        binary: choice(
            o,
            "binary.handling.mode",
            &[
                ("bytes", BinaryMode::Bytes),
                ("base64", BinaryMode::Base64),
                ("base64-url-safe", BinaryMode::Base64UrlSafe),
                ("hex", BinaryMode::Hex),
            ],
            BinaryMode::Bytes,
        )?,
        money_fraction_digits,
        include_unknown,
    })
}

fn postgres_url(o: &Options) -> Result<Secret, String> {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    let enc = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
    let host = o
        .get("database.hostname")
        .ok_or("database.hostname is required")?;
    let port = o.get("database.port").unwrap_or("5432");
    port.parse::<u16>()
        .map_err(|_| format!("database.port: {port:?} is not a port number"))?;
    let user = o.get("database.user").ok_or("database.user is required")?;
    let dbname = o
        .get("database.dbname")
        .ok_or("database.dbname is required")?;
    let mut url = format!("postgres://{}", enc(user));
    if let Some(password) = o.get("database.password") {
        url.push(':');
        url.push_str(&enc(password));
    }
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    url.push_str(&format!("@{host}:{port}/{}", enc(dbname)));
    let mut params = Vec::new();
    match o.get("database.sslmode") {
        None => {}
        Some(mode @ ("disable" | "allow" | "prefer" | "require" | "verify-ca" | "verify-full")) => {
            params.push(format!("sslmode={mode}"))
        }
        Some(other) => return Err(format!("database.sslmode: {other:?} is not disable, allow, prefer, require, verify-ca or verify-full")),
    }
    for (option, param) in [
        ("database.sslrootcert", "sslrootcert"),
        ("database.sslcert", "sslcert"),
        ("database.sslkey", "sslkey"),
    ] {
        if let Some(path) = o.get(option) {
            params.push(format!("{param}={}", enc(path)));
        }
    }
    if o.get("database.sslpassword").is_some() {
        return Err("database.sslpassword (an encrypted client key) is not supported: decrypt the key file (openssl pkey)".into());
    }
    if !params.is_empty() {
        url.push('?');
        url.push_str(&params.join("&"));
    }
    Ok(Secret::new(url))
}

/// The outbox tables of `table.include.list`, a comma-separated list of regular
/// expressions in Debezium: an entry that is a plain `schema.table` (dots escaped or not)
/// names one table; any other entry is a pattern matched against `schema.table` (whole,
/// without regard to case), now and for tables created later.
fn outbox_tables(
    o: &Options,
    messages: bool,
) -> Result<(Vec<TableName>, Vec<ListPattern>), String> {
    let Some((key, list)) = ["table.include.list", "table.whitelist"]
        .iter()
        .find_map(|k| o.get(k).map(|v| (*k, v)))
    else {
        // The table-less outbox: logical decoding messages only.
        if messages {
            return Ok((Vec::new(), Vec::new()));
        }
        return Err(
            "table.include.list is required: name the outbox table, e.g. public.outbox".into(),
        );
    };
    let (mut tables, mut patterns) = (Vec::new(), Vec::new());
    for entry in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let plain = entry.replace("\\.", ".");
        let is_name = plain.contains('.')
            && plain
                .chars()
                .all(|c| c == '.' || c == '_' || c == '$' || c.is_alphanumeric());
        if is_name {
            tables.push(TableName::parse(&plain).map_err(|e| format!("{key}: {e}"))?);
        } else {
            patterns.push(ListPattern::new(entry).map_err(|e| format!("{key}: {e}"))?);
        }
    }
    if tables.is_empty() && patterns.is_empty() {
        return Err(format!(
            "{key} names no table; name the outbox table, e.g. public.outbox"
        ));
    }
    Ok((tables, patterns))
}

/// Logical decoding messages, relayed when the transform chain decodes them before the
/// EventRouter (`DecodeLogicalDecodingMessageContent`, as Debezium documents it), filtered
/// by `message.prefix.include.list` / `exclude.list` (Debezium's `LogicalDecodingMessageFilter`).
fn messages(o: &Options, decode: Option<&str>) -> Result<Option<MessageConfig>, String> {
    let list = |key: &str| -> Result<Vec<ListPattern>, String> {
        split_regex_list(o.get(key).unwrap_or(""))
            .iter()
            .map(|p| ListPattern::new(p).map_err(|e| format!("{key}: {e}")))
            .collect()
    };
    let include = list("message.prefix.include.list")?;
    let exclude = list("message.prefix.exclude.list")?;
    if !include.is_empty() && !exclude.is_empty() {
        return Err(
            "message.prefix.include.list and message.prefix.exclude.list cannot both be set (as in Debezium)"
                .into(),
        );
    }
    let Some(alias) = decode else {
        if !include.is_empty() || !exclude.is_empty() {
            return Err(format!(
                "message.prefix.include.list / exclude.list: outbox-relay relays logical decoding messages as outbox \
                 events, through {DECODE_MESSAGE} before the EventRouter (Debezium's documented chain); add it to \
                 transforms, e.g. \"transforms\": \"decode,outbox\", \"transforms.decode.type\": \"{DECODE_MESSAGE}\""
            ));
        }
        return Ok(None);
    };
    Ok(Some(MessageConfig {
        include,
        exclude,
        keep_null_fields: flag(o, &format!("transforms.{alias}.fields.null.include"), false)?,
    }))
}

/// A Debezium list of regular expressions: comma-separated, `\,` a literal comma, each
/// entry trimmed (`Strings.RegExSplitter`).
fn split_regex_list(list: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let mut current = String::new();
    let mut chars = list.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&',') => {
                current.push(',');
                chars.next();
            }
            ',' => entries.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    entries.push(current);
    entries
        .into_iter()
        .map(|e| e.trim().to_owned())
        .filter(|e| !e.is_empty())
        .collect()
}

const PREDICATES: &[&str] = &[
    "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
    "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
];

/// The transforms after the EventRouter, in order, with their predicates (Kafka Connect's
/// `transforms.<alias>.predicate` naming one of `predicates`, and `negate`).
fn transform_chain(
    o: &Options,
    aliases: &[String],
) -> Result<outbox_router::transforms::Chain, String> {
    use outbox_router::transforms::{Chain, Predicate, Step};
    let mut steps = Vec::new();
    let declared: Vec<String> = o
        .get("predicates")
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for alias in aliases {
        let key = |name: &str| format!("transforms.{alias}.{name}");
        let class = o.get(&key("type")).unwrap_or_default();
        let (entry, side) =
            outbox_router::transforms::lookup(class).expect("event_router() accepted only these");
        let get = |name: &str| o.get(name).map(str::to_owned);
        let transform = (entry.parse)(
            &outbox_router::transforms::Options { alias, get: &get },
            side,
        )?;
        let predicate = match o.get(&key("predicate")) {
            None => None,
            Some(name) => {
                let name = name.trim();
                if !declared.iter().any(|d| d == name) {
                    return Err(format!(
                        "{}: predicate {name:?} is not declared in predicates ({})",
                        key("predicate"),
                        declared.join(",")
                    ));
                }
                let pkey = |field: &str| format!("predicates.{name}.{field}");
                let preq = |field: &str| {
                    o.get(&pkey(field))
                        .ok_or_else(|| format!("{} is missing", pkey(field)))
                };
                let predicate = match o.get(&pkey("type")).unwrap_or_default() {
                    "org.apache.kafka.connect.transforms.predicates.TopicNameMatches" => {
                        Predicate::topic_name_matches(preq("pattern")?)
                            .map_err(|e| format!("{}: {e}", pkey("pattern")))?
                    }
                    "org.apache.kafka.connect.transforms.predicates.HasHeaderKey" => {
                        Predicate::HasHeaderKey(preq("name")?.to_owned())
                    }
                    "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone" => {
                        Predicate::RecordIsTombstone
                    }
                    other => {
                        return Err(format!(
                            "{}: the predicate {other:?} is not supported; outbox-relay applies {}",
                            pkey("type"),
                            PREDICATES.join(", ")
                        ))
                    }
                };
                Some((predicate, flag(o, &key("negate"), false)?))
            }
        };
        steps.push(Step {
            alias: alias.clone(),
            class: class.to_owned(),
            transform,
            predicate,
        });
    }
    // Declared predicates no transform uses are still read (Kafka Connect validates them).
    for name in &declared {
        o.get(&format!("predicates.{name}.type"));
        o.get(&format!("predicates.{name}.pattern"));
        o.get(&format!("predicates.{name}.name"));
    }
    Ok(Chain { steps })
}

/// Whether `class` is one of Kafka Connect's transforms outbox-relay applies after the
/// EventRouter.
fn after_router(class: &str) -> bool {
    outbox_router::transforms::lookup(class).is_some()
}

/// The alias of the one EventRouter transform, of the `DecodeLogicalDecodingMessageContent`
/// transform before it, if any, and of the transforms after it (Kafka Connect's own, see
/// [`transform_chain`]).
fn event_router(o: &Options) -> Result<(String, Option<String>, Vec<String>), String> {
    let list = o.get("transforms").ok_or(
        "transforms: no Outbox EventRouter configured; outbox-relay replaces Debezium + io.debezium.transforms.outbox.EventRouter",
    )?;
    let aliases: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect();
    let mut router = None;
    let mut decode = None;
    let mut after = Vec::new();
    for alias in aliases {
        let key = format!("transforms.{alias}.type");
        match o.get(&key) {
            Some(class) if router.is_some() && after_router(class) => {
                after.push(alias.to_owned());
                continue;
            }
            Some(class) if after_router(class) => {
                return Err(format!(
                    "{key}: {class} is supported after the EventRouter (it transforms the routed records); put it after \
                     the EventRouter's alias in transforms"
                ))
            }
            Some(EVENT_ROUTER) if router.is_none() => router = Some(alias.to_owned()),
            Some(EVENT_ROUTER) => return Err("transforms: more than one EventRouter".into()),
            Some(DECODE_MESSAGE) if router.is_none() && decode.is_none() => {
                decode = Some(alias.to_owned())
            }
            Some(DECODE_MESSAGE) => {
                return Err(format!(
                    "{key}: {DECODE_MESSAGE} is supported once, before the EventRouter (which then routes the decoded messages)"
                ))
            }
            Some(other) => {
                return Err(format!(
                    "{key}: the transform {other} is not supported; outbox-relay applies {EVENT_ROUTER} (with \
                     {DECODE_MESSAGE} before it), and after it {}",
                    outbox_router::transforms::supported_classes().join(", ")
                ))
            }
            None => return Err(format!("{key} is missing")),
        }
        if o.get(&format!("transforms.{alias}.predicate")).is_some() {
            return Err(format!(
                "transforms.{alias}.predicate: transform predicates are not supported"
            ));
        }
        o.get(&format!("transforms.{alias}.negate"));
    }
    let router = router.ok_or_else(|| format!("transforms: none of {list:?} is {EVENT_ROUTER}"))?;
    Ok((router, decode, after))
}

/// The converter `class` configured under `key` (`value.converter`…), with the
/// JsonConverter settings read from the same configuration.
fn converter_class(class: &str, key: &str, options: &Options) -> Result<Converter, String> {
    match class {
        "org.apache.kafka.connect.json.JsonConverter" => Ok(Converter::Json {
            schemas_enable: schemas_enable(options, key)?.unwrap_or(true),
            replace_null_with_default: flag(
                options,
                &format!("{key}.replace.null.with.default"),
                true,
            )?,
        }),
        "org.apache.kafka.connect.storage.StringConverter" => Ok(Converter::String),
        "org.apache.kafka.connect.converters.ByteArrayConverter" => Ok(Converter::ByteArray),
        "io.confluent.connect.avro.AvroConverter"
        | "io.apicurio.registry.utils.converter.AvroConverter"
            if key == "header.converter" =>
        {
            Err(format!(
                "{key}: {class} is not supported as a header converter; outbox-relay writes Avro keys and values"
            ))
        }
        "io.confluent.connect.avro.AvroConverter" => {
            super::avro::confluent(key, options).map(|c| Converter::Avro(std::sync::Arc::new(c)))
        }
        "io.apicurio.registry.utils.converter.AvroConverter" => {
            super::avro::apicurio(key, options).map(|c| Converter::Avro(std::sync::Arc::new(c)))
        }
        other => Err(format!(
            "{key}: {other} is not supported; outbox-relay writes what JsonConverter, StringConverter, ByteArrayConverter or a schema-registry AvroConverter (Confluent's, Apicurio's) would"
        )),
    }
}

fn schemas_enable(o: &Options, prefix: &str) -> Result<Option<bool>, String> {
    let key = format!("{prefix}.schemas.enable");
    match o.get(&key) {
        None => Ok(None),
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            _ => Err(format!("{key}: {v:?} is not true or false")),
        },
    }
}

/// `key.converter` / `value.converter`: the connector's, else the worker's, else
/// JsonConverter with schemas (Kafka Connect's stock worker configuration).
fn converter(
    o: &Options,
    w: Option<&Options>,
    part: &str,
    notes: &mut Vec<String>,
) -> Result<Converter, String> {
    let key = format!("{part}.converter");
    let (class, source, options) = match (o.get(&key), w.and_then(|w| w.get(&key))) {
        (Some(c), _) => (c, "connector config", o),
        (None, Some(c)) => (c, "worker config", w.expect("worker present")),
        (None, None) => (
            "org.apache.kafka.connect.json.JsonConverter",
            "Kafka Connect default",
            o,
        ),
    };
    let converter = converter_class(class, &key, options)?;
    notes.push(format!(
        "{key} = {class}{} ({source})",
        match &converter {
            Converter::Avro(avro) => super::avro::describe(avro),
            Converter::Json {
                schemas_enable,
                replace_null_with_default,
            } => format!(
                ", schemas.enable={schemas_enable}{}",
                if *replace_null_with_default {
                    ""
                } else {
                    ", replace.null.with.default=false"
                }
            ),
            _ => String::new(),
        }
    ));
    Ok(converter)
}

fn header_converter(
    o: &Options,
    w: Option<&Options>,
    notes: &mut Vec<String>,
) -> Result<HeaderConverter, String> {
    let key = "header.converter";
    let (class, source, options) = match (o.get(key), w.and_then(|w| w.get(key))) {
        (Some(c), _) => (c, "connector config", o),
        (None, Some(c)) => (c, "worker config", w.expect("worker present")),
        (None, None) => (
            "org.apache.kafka.connect.storage.SimpleHeaderConverter",
            "Kafka Connect default",
            o,
        ),
    };
    let converter = match class {
        "org.apache.kafka.connect.storage.SimpleHeaderConverter" => HeaderConverter::Simple,
        other => HeaderConverter::Other(converter_class(other, key, options)?),
    };
    notes.push(format!("{key} = {class} ({source})"));
    Ok(converter)
}
