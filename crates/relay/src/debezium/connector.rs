//! A Debezium PostgreSQL connector + Outbox EventRouter configuration (and the Kafka
//! Connect worker's) translated into outbox-relay's settings. Every option is either
//! applied, accepted because it does not change what reaches Kafka, refused with an error
//! naming it (it would change the bytes and outbox-relay does not do it), or listed as
//! unknown in one start-up warning.

use super::options::Options;
use super::properties::RawConfig;
use crate::config::{Preset as DebeziumSetup, RunOptions};
use outbox_router::connect::{Converter, ExpandBehaviour, HeaderConverter};
use outbox_router::{ConnectFormat, InvalidOperation, Output, RouterConfig, TransactionMetadata};

/// Translates a connector configuration (and its worker's): each option of the catalog in
/// its order, parsed, accepted or refused (see `option_catalog.rs`), then the settings assembled.
pub fn translate(
    connector: &RawConfig,
    worker: Option<&RawConfig>,
) -> Result<DebeziumSetup, String> {
    use super::option_catalog::{Applies, Ctx, Draft, Treatment, CATALOG};
    let o = Options::new(&connector.entries);
    let w = worker.map(|w| Options::new(&w.entries));
    let ctx = Ctx {
        o: &o,
        w: w.as_ref(),
    };
    let mut d = Draft::default();
    d.errors.connector = connector
        .name
        .clone()
        .unwrap_or_else(|| "outbox-relay".into());
    for spec in CATALOG {
        let names = || std::iter::once(spec.name).chain(spec.aliases.iter().copied());
        let full = |name: &str| match spec.applies {
            Applies::EventRouter => d.t(name),
            _ => name.to_owned(),
        };
        match spec.treatment {
            Treatment::Parsed(parse) => parse(&ctx, &mut d)?,
            Treatment::Native(flag) | Treatment::NativeOrDefault(flag) => {
                let given = names().find_map(|name| o.get(&full(name)).map(|v| (full(name), v)));
                let value = match spec.treatment {
                    Treatment::NativeOrDefault(_) => {
                        given.or_else(|| spec.default.map(|v| (spec.name.to_owned(), v)))
                    }
                    _ => given,
                };
                if let Some((name, value)) = value {
                    // Kafka's ConfigDef reads a boolean in any case; clap, true or false.
                    let value = match value.to_ascii_lowercase() {
                        lower if lower == "true" || lower == "false" => lower,
                        _ => value.to_owned(),
                    };
                    let native =
                        RunOptions::from_flag(flag, &value).map_err(|e| format!("{name}: {e}"))?;
                    d.run = native.over(std::mem::take(&mut d.run))?;
                }
            }
            Treatment::Refused(why) => {
                for name in names() {
                    match name.strip_suffix('*') {
                        Some(prefix) => {
                            if let Some(key) = o.keys_with_prefix(prefix).next() {
                                return Err(format!(
                                    "{key} is not supported by outbox-relay: {why}"
                                ));
                            }
                        }
                        None => {
                            if let Some(value) = o.get(name) {
                                return Err(format!(
                                    "{name}={value} is not supported by outbox-relay: {why}"
                                ));
                            }
                        }
                    }
                }
            }
            // Known options: never listed as unknown, whether or not they mattered here. A
            // family read with another option is left to that option's parser, which marks
            // the keys it knows (a misspelt transform option stays unknown).
            Treatment::NoEffect | Treatment::With(_) | Treatment::NotRun(_) => {
                for name in names() {
                    match name.strip_suffix('*') {
                        Some(prefix) if matches!(spec.treatment, Treatment::NoEffect) => {
                            o.accept_prefix(&full(prefix))
                        }
                        Some(_) => {}
                        None => o.accept(&[full(name).as_str()]),
                    }
                }
            }
        }
    }
    finish(d, &o, connector)
}

/// The settings a draft makes: what depends on several options is decided here.
fn finish(
    mut d: super::option_catalog::Draft,
    o: &Options,
    connector: &RawConfig,
) -> Result<DebeziumSetup, String> {
    // HeartbeatImpl's records, every heartbeat.interval.ms (AbstractTopicNamingStrategy.heartbeatTopic).
    let heartbeat_topic = d.heartbeat.as_ref().map(|_| {
        d.heartbeat_topic_name
            .clone()
            .unwrap_or_else(|| {
                format!(
                    "{}.{}",
                    d.heartbeat_topic_prefix
                        .as_deref()
                        .unwrap_or("__debezium-heartbeat"),
                    d.topic_prefix
                )
            })
            .into()
    });
    // TransactionMonitor's BEGIN/END records (AbstractTopicNamingStrategy.transactionTopic).
    let transaction_metadata = d.transaction_metadata.then(|| TransactionMetadata {
        topic: format!(
            "{}.{}",
            d.topic_prefix,
            d.transaction_topic.as_deref().unwrap_or("transaction")
        )
        .into(),
        skipped: d
            .skipped
            .iter()
            .filter_map(|s| s.chars().next().filter(|_| s.len() == 1))
            .collect(),
    });
    // Debezium never sees UPDATEs it was told to skip.
    let on_update = if d.skipped.iter().any(|s| s == "u") {
        InvalidOperation::Ignore
    } else {
        d.on_update
    };
    let mut unknown = o.unused();
    unknown.extend(d.producer_unknown);
    let described = connector
        .entries
        .keys()
        .filter(|k| !unknown.contains(k))
        .filter_map(|k| {
            let d = super::option_doc(k, &connector.entries)?;
            Some(format!("{k} [{}]: {} ({})", d.group, d.treatment, d.doc))
        })
        .collect();
    let topic_template = d
        .topic_template
        .ok_or("transforms: no Outbox EventRouter configured")?;
    if let (Some(Converter::CloudEvents(ce)), true) = (&mut d.value, d.expand) {
        ce.expanded_payload = Some((
            d.payload_column.clone(),
            ExpandBehaviour {
                keep_nulls: d.keep_nulls,
                keep_empty_arrays: d.keep_empty_arrays,
            },
        ));
    }
    if let Some(value) = &d.value {
        super::converters::cloudevents::check_header_converter(
            value,
            d.header.as_ref().unwrap_or(&HeaderConverter::Simple),
        )?;
    }
    // The change events the transforms before the EventRouter read name the database.
    let before = d.before_chain.map(|chain| outbox_router::BeforeRouter {
        chain,
        version: super::DEBEZIUM_VERSION.into(),
        database: o.get("database.dbname").unwrap_or_default().to_owned(),
    });
    Ok(DebeziumSetup {
        connector_name: connector.name.clone(),
        options: d.run,
        initial_statements: d.initial_statements,
        tables: d.tables.clone(),
        table_patterns: d.table_patterns.clone(),
        heartbeat: d.heartbeat,
        topic_creation: d.topic_creation,
        router: RouterConfig {
            chain: d.chain,
            before,
            tables: d.tables,
            table_patterns: d.table_patterns,
            messages: d.messages,
            id_column: d.id_column,
            key_column: d.key_column,
            payload_column: d.payload_column,
            route_by_column: d.route_by_column,
            topic_template,
            additional: d.additional,
            tombstone_on_null_payload: d.tombstone_on_empty_payload,
            expand_json_payload: false,
            timestamp_column: d.timestamp_column,
            ignore_missing_additional: d.ignore_missing_additional,
            on_update,
            output: Output::Connect(ConnectFormat {
                avro_schema_names: o
                    .get("schema.name.adjustment.mode")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("avro")),
                key: d.key.expect("the key.converter entry sets it"),
                value: d.value.expect("the value.converter entry sets it"),
                header: d.header.unwrap_or(HeaderConverter::Simple),
                expand: d.expand.then_some(ExpandBehaviour {
                    keep_nulls: d.keep_nulls,
                    keep_empty_arrays: d.keep_empty_arrays,
                }),
                schema_version_column: d.schema_version_column,
                tracing_span_context_column: Some(d.tracing_span_context_column),
                tombstone_on_empty_payload: d.tombstone_on_empty_payload,
                // The run id (a UUIDv7 per start) is the relay's to fill in when it starts.
                context_headers: d
                    .extended_headers
                    .then(|| outbox_router::ContextHeaders::postgres(&d.topic_prefix, None)),
                topic_prefix: d.topic_prefix,
                types: d.types,
                heartbeat_topic,
                transaction_metadata,
                notifications: d.notifications.clone(),
                errors: d.errors,
            }),
        },
        producer_properties: d.producer_properties,
        notes: d.notes,
        unknown,
        described,
        hidden: Default::default(),
    })
}
