use super::*;
use crate::config::{PublicationMode, SnapshotMode};
use outbox_router::connect::{Converter, HeaderConverter, JsonConverter};
use outbox_router::{InvalidOperation, Output, Placement};

fn fixture(name: &str) -> RawConfig {
    read_file(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/debezium")
            .join(name),
    )
    .unwrap()
}

fn connect(setup: &crate::config::Preset) -> &outbox_router::ConnectFormat {
    match &setup.router.output {
        Output::Connect(f) => f,
        Output::Raw => panic!("raw output"),
    }
}

fn config(extra: &[(&str, &str)]) -> RawConfig {
    let mut entries: std::collections::BTreeMap<String, String> = [
        (
            "connector.class",
            "io.debezium.connector.postgresql.PostgresConnector",
        ),
        ("database.hostname", "db"),
        ("database.user", "u"),
        ("database.dbname", "app"),
        ("topic.prefix", "app"),
        ("table.include.list", "public.outbox"),
        ("transforms", "outbox"),
        (
            "transforms.outbox.type",
            "io.debezium.transforms.outbox.EventRouter",
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in extra {
        entries.insert(k.to_string(), v.to_string());
    }
    RawConfig {
        name: None,
        entries,
    }
}

#[test]
fn every_seed_connector_config_translates_as_it_is() {
    for name in [
        "seed-000-outbox-connector.json",
        "seed-001-user-outbox-connector.json",
        "seed-003-order-outbox-connector.json",
        "seed-004-outbox-connector.json",
    ] {
        let setup = translate(&fixture(name), None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(setup.unknown.is_empty(), "{name}: {:?}", setup.unknown);
        assert_eq!(setup.options.slot.as_deref(), Some("debezium"), "{name}");
        assert_eq!(
            setup.options.publication.as_deref(),
            Some("dbz_publication"),
            "{name}"
        );
        assert_eq!(
            setup.options.publication_mode,
            Some(PublicationMode::AllTables),
            "{name}"
        );
        assert_eq!(
            setup.options.snapshot_mode,
            Some(SnapshotMode::Initial),
            "{name}: Debezium's default"
        );
        assert_eq!(setup.router.route_by_column, "aggregate_type");
        assert_eq!(setup.router.key_column, "aggregate_id");
        assert_eq!(setup.router.payload_column, "payload");
        assert_eq!(setup.router.id_column, "id");
        assert_eq!(setup.router.on_update, InvalidOperation::Warn);
    }
    let s = translate(&fixture("seed-003-order-outbox-connector.json"), None).unwrap();
    assert_eq!(s.tables[0].to_string(), "public.outbox_events");
    assert_eq!(
        s.router.topic_template.render("Order"),
        "Order.events.created"
    );
    assert_eq!(
        s.options.postgres_url.as_ref().unwrap().expose(),
        "postgres://postgres:password@postgres-orders-db:5432/orders%5Fdb"
    );
    assert_eq!(connect(&s).topic_prefix, "orders-server");
    // No converters anywhere: Kafka Connect's stock JsonConverter with schemas.
    let f = connect(&s);
    assert_eq!(
        f.key,
        Converter::Json(JsonConverter {
            schemas_enable: true,
            replace_null_with_default: true
        })
    );
    assert_eq!(
        f.value,
        Converter::Json(JsonConverter {
            schemas_enable: true,
            replace_null_with_default: true
        })
    );
    assert_eq!(f.header, HeaderConverter::Simple);
    let s = translate(&fixture("seed-001-user-outbox-connector.json"), None).unwrap();
    assert_eq!(connect(&s).key, Converter::String);
    assert_eq!(
        connect(&s).value,
        Converter::Json(JsonConverter {
            schemas_enable: false,
            replace_null_with_default: true
        })
    );
    assert_eq!(s.connector_name.as_deref(), Some("user-outbox-connector"));
}

#[test]
fn debezium_defaults_and_old_option_names() {
    let s = translate(&config(&[]), None).unwrap();
    assert_eq!(s.router.key_column, "aggregateid");
    assert_eq!(s.router.route_by_column, "aggregatetype");
    assert_eq!(
        s.router.topic_template.render("Order"),
        "outbox.event.Order"
    );
    assert!(!connect(&s).tombstone_on_empty_payload);
    let s = translate(
        &config(&[
            ("transforms.outbox.table.field.event.payload.id", "agg"),
            ("transforms.outbox.debezium.op.invalid.behavior", "fatal"),
            ("transforms.outbox.debezium.expand.json.payload", "true"),
            (
                "transforms.outbox.table.fields.additional.error.on.missing",
                "false",
            ),
            ("database.server.name", "old"),
        ]),
        None,
    )
    .unwrap();
    assert_eq!(s.router.key_column, "agg");
    assert_eq!(s.router.on_update, InvalidOperation::Fatal);
    let t = translate(
        &config(&[
            ("topic.creation.default.partitions", "6"),
            ("topic.creation.default.replication.factor", "3"),
        ]),
        None,
    )
    .unwrap();
    assert_eq!(
        (
            t.options.topic_partitions,
            t.options.topic_replication_factor
        ),
        (Some(6), Some(3))
    );
    assert!(connect(&s).expand.is_some());
    assert!(s.router.ignore_missing_additional);
}

#[test]
fn placements_regex_and_converters() {
    let s = translate(
        &config(&[
            (
                "transforms.outbox.table.fields.additional.placement",
                "type:header:eventType, type:envelope:kind, shard:partition",
            ),
            (
                "transforms.outbox.route.topic.regex",
                "(?<routedByValue>[a-z]+)",
            ),
            (
                "transforms.outbox.route.topic.replacement",
                "events.${routedByValue}",
            ),
            (
                "key.converter",
                "org.apache.kafka.connect.storage.StringConverter",
            ),
            (
                "value.converter",
                "org.apache.kafka.connect.converters.ByteArrayConverter",
            ),
            (
                "header.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
            ("header.converter.schemas.enable", "false"),
        ]),
        None,
    )
    .unwrap();
    let placements: Vec<Placement> = s.router.additional.iter().map(|f| f.placement).collect();
    assert_eq!(
        placements,
        [Placement::Header, Placement::Envelope, Placement::Partition]
    );
    assert_eq!(s.router.topic_template.render("order"), "events.order");
    assert_eq!(
        s.router.topic_template.render("Order"),
        "Order",
        "no whole match: the value itself"
    );
    assert_eq!(connect(&s).value, Converter::ByteArray);
    assert_eq!(
        connect(&s).header,
        HeaderConverter::Other(Converter::Json(JsonConverter {
            schemas_enable: false,
            replace_null_with_default: true
        }))
    );
}

#[test]
fn the_worker_config_supplies_what_the_connector_does_not() {
    let worker = RawConfig {
        name: None,
        entries: properties::parse_properties(
            "bootstrap.servers=kafka:9092\ngroup.id=connect\nkey.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter.schemas.enable=false\n\
             producer.compression.type=zstd\n",
        ),
    };
    let s = translate(
        &config(&[(
            "value.converter",
            "org.apache.kafka.connect.storage.StringConverter",
        )]),
        Some(&worker),
    )
    .unwrap();
    assert_eq!(s.options.bootstrap_servers.as_deref(), Some("kafka:9092"));
    assert_eq!(connect(&s).key, Converter::String, "from the worker");
    assert_eq!(connect(&s).value, Converter::String, "the connector wins");
    assert_eq!(
        s.producer_properties,
        [("compression.type".to_owned(), "zstd".to_owned())]
    );
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("key.converter") && n.contains("worker config")),
        "{:?}",
        s.notes
    );
}

/// Kafka Connect applies a connector's `producer.override.*` over the worker's `producer.*`:
/// the override comes last, and the last value of a property wins.
#[test]
fn a_connector_producer_override_wins_over_the_worker_producer_setting() {
    let worker = RawConfig {
        name: None,
        entries: properties::parse_properties("producer.linger.ms=5\n"),
    };
    let s = translate(
        &config(&[("producer.override.linger.ms", "3")]),
        Some(&worker),
    )
    .unwrap();
    let linger: Vec<&str> = s
        .producer_properties
        .iter()
        .filter(|(k, _)| k == "linger.ms")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(linger, ["5", "3"], "{:?}", s.producer_properties);
}

/// Java producer interceptors cannot run here: the configuration still runs, the relay says
/// at start that they are not run, and `check` does not list them as applied.
#[test]
fn producer_interceptors_are_accepted_and_reported_not_run() {
    let interceptor =
        "io.opentelemetry.instrumentation.kafkaclients.v2_6.TracingProducerInterceptor";
    let s = translate(
        &config(&[("producer.override.interceptor.classes", interceptor)]),
        None,
    )
    .unwrap();
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains(interceptor) && n.contains("not run")),
        "{:?}",
        s.notes
    );
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    let entries = [(
        "producer.override.interceptor.classes".to_owned(),
        interceptor.to_owned(),
    )]
    .into();
    let doc = super::option_doc("producer.override.interceptor.classes", &entries).unwrap();
    assert!(
        doc.treatment.starts_with("accepted, not run"),
        "{}",
        doc.treatment
    );
    let doc = super::option_doc("producer.override.linger.ms", &entries).unwrap();
    assert_eq!(doc.treatment, "applied");
}

#[test]
fn unknown_options_are_listed_and_semantic_ones_refused() {
    let s = translate(
        &config(&[
            ("frobnicate", "1"),
            ("transforms.outbox.route.by.feild", "x"),
        ]),
        None,
    )
    .unwrap();
    assert_eq!(
        s.unknown,
        ["frobnicate", "transforms.outbox.route.by.feild"]
    );
    for (key, value, expected) in [
        ("plugin.name", "decoderbufs", "pgoutput"),
        ("plugin.name", "wal2json", "pgoutput"),
        (
            "column.exclude.list",
            "public.outbox.payload",
            "column.exclude.list",
        ),
        (
            "value.converter",
            "io.confluent.connect.avro.AvroConverter",
            "value.converter",
        ),
        ("snapshot.mode", "custom", "snapshot.mode"),
        (
            "table.include.list",
            "public.outbox_(",
            "table.include.list",
        ),
        ("table.include.list", " , ", "names no table"),
        ("transforms", "outbox,unwrap", "transforms.unwrap.type"),
        (
            "transforms.outbox.route.topic.regex",
            "(?=x).*",
            "route.topic.regex",
        ),
        ("time.precision.mode", "structured", "time.precision.mode"),
        (
            "publication.autocreate.mode",
            "some",
            "publication.autocreate.mode",
        ),
    ] {
        let err = translate(&config(&[(key, value)]), None).unwrap_err();
        assert!(err.contains(expected), "{key}={value}: {err}");
    }
    let mut no_prefix = config(&[]);
    no_prefix.entries.remove("topic.prefix");
    assert!(translate(&no_prefix, None)
        .unwrap_err()
        .contains("topic.prefix"));
}

#[test]
fn database_options_build_the_connection_url() {
    let s = translate(
        &config(&[
            ("database.port", "6432"),
            ("database.password", "p@ss word"),
            ("database.sslmode", "verify-full"),
            ("database.sslrootcert", "/certs/ca.pem"),
        ]),
        None,
    )
    .unwrap();
    let url = s.options.postgres_url.unwrap();
    assert_eq!(
        url.expose(),
        "postgres://u:p%40ss%20word@db:6432/app?sslmode=verify-full&sslrootcert=%2Fcerts%2Fca%2Epem"
    );
    crate::config::ConnectionInfo::parse(url.expose()).unwrap();
}

#[test]
fn context_headers_follow_extended_headers_enabled() {
    // CommonConnectorConfig.EXTENDED_HEADERS_ENABLED: default true.
    let on = translate(&config(&[]), None).unwrap();
    let context = connect(&on).context_headers.clone().expect("on by default");
    assert_eq!(context.connector_logical_name, "app", "topic.prefix");
    assert_eq!(context.connector_name, "postgresql");
    assert_eq!(context.task_id, "0");
    let off = translate(&config(&[("extended.headers.enabled", "false")]), None).unwrap();
    assert_eq!(connect(&off).context_headers, None);
    assert!(translate(&config(&[("extended.headers.enabled", "maybe")]), None).is_err());
}

#[test]
fn exactly_once_support_turns_on_exactly_once_delivery() {
    let on = |connector: &[(&str, &str)], worker: Option<&[(&str, &str)]>| {
        let worker = worker.map(|w| RawConfig {
            name: None,
            entries: w
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        });
        translate(&config(connector), worker.as_ref()).map(|s| s.options.exactly_once == Some(true))
    };
    assert_eq!(on(&[], None), Ok(false));
    assert_eq!(on(&[("exactly.once.support", "required")], None), Ok(true));
    assert_eq!(
        on(&[("exactly.once.support", "requested")], None),
        Ok(false)
    );
    assert_eq!(
        on(&[], Some(&[("exactly.once.source.support", "enabled")])),
        Ok(true),
        "the worker's exactly-once source support"
    );
    let err = on(&[("exactly.once.support", "always")], None).unwrap_err();
    assert!(err.starts_with("exactly.once.support:"), "{err}");
}

/// Debezium's `slot.failover` is `--slot-failover`; anything but true or false is refused
/// by name.
#[test]
fn slot_failover_makes_a_failover_slot() {
    let on = |connector: &[(&str, &str)]| {
        translate(&config(connector), None).map(|s| s.options.slot_failover == Some(true))
    };
    assert_eq!(on(&[]), Ok(false));
    assert_eq!(on(&[("slot.failover", "true")]), Ok(true));
    assert_eq!(on(&[("slot.failover", "FALSE")]), Ok(false));
    let err = on(&[("slot.failover", "yes")]).unwrap_err();
    assert!(err.starts_with("slot.failover:"), "{err}");
}

#[test]
fn type_modes_are_read_case_insensitively_and_unsupported_ones_refused() {
    use outbox_router::connect::{DecimalMode, HstoreMode, TimePrecisionMode};
    let s = translate(
        &config(&[
            ("decimal.handling.mode", "DOUBLE"),
            ("time.precision.mode", "connect"),
            ("hstore.handling.mode", "map"),
            ("money.fraction.digits", "4"),
            ("transforms.outbox.table.op.invalid.behavior", "ERROR"),
            ("snapshot.mode", "NO_DATA"),
        ]),
        None,
    )
    .unwrap();
    let types = connect(&s).types;
    assert_eq!(types.decimal, DecimalMode::Double);
    assert_eq!(types.time, TimePrecisionMode::Connect);
    assert_eq!(types.hstore, HstoreMode::Map);
    assert_eq!(types.money_fraction_digits, 4);
    assert_eq!(s.router.on_update, InvalidOperation::Error);
    assert_eq!(s.options.snapshot_mode, Some(SnapshotMode::NoData));
    for (key, value, named) in [
        ("time.precision.mode", "nanoseconds", "time.precision.mode"),
        ("decimal.handling.mode", "exact", "decimal.handling.mode"),
        (
            "value.converter.decimal.format",
            "NUMERIC",
            "decimal.format",
        ),
        (
            "column.propagate.source.type",
            ".*",
            "column.propagate.source.type",
        ),
        (
            "datatype.propagate.source.type",
            ".+\\.NUMERIC",
            "datatype.propagate.source.type",
        ),
        ("include.schema.comments", "true", "include.schema.comments"),
        ("topic.delimiter", "_", "topic.delimiter"),
        (
            "schema.name.adjustment.mode",
            "avro_unicode",
            "schema.name.adjustment.mode",
        ),
        (
            "producer.override.partitioner.class",
            "org.apache.kafka.clients.producer.RoundRobinPartitioner",
            "partitioner.class",
        ),
        ("topic.creation.groups", "g", "topic.creation.g.include"),
    ] {
        let e = translate(&config(&[(key, value)]), None).unwrap_err();
        assert!(e.contains(named), "{key}={value}: {e}");
    }
    // Their default values are accepted.
    translate(
        &config(&[
            ("include.schema.comments", "false"),
            ("topic.delimiter", "."),
            ("schema.name.adjustment.mode", "none"),
            ("value.converter.decimal.format", "base64"),
        ]),
        None,
    )
    .unwrap();
    // avro: the connector's schema names made valid Avro names.
    let setup = translate(&config(&[("schema.name.adjustment.mode", "avro")]), None).unwrap();
    assert!(connect(&setup).avro_schema_names);
}

/// `table.include.list` is a list of regular expressions in Debezium (`Selectors`,
/// case-insensitive, whole `schema.table`): plain names stay exact names, the rest are
/// patterns the relay matches at start and against tables created later.
#[test]
fn table_include_list_names_several_tables_and_patterns() {
    let s = translate(
        &config(&[(
            "table.include.list",
            r"public.orders_outbox, billing\.outbox ,app\.outbox_\d+",
        )]),
        None,
    )
    .unwrap();
    let names: Vec<String> = s.tables.iter().map(ToString::to_string).collect();
    assert_eq!(names, ["public.orders_outbox", "billing.outbox"]);
    let [pattern] = s.table_patterns.as_slice() else {
        panic!("{:?}", s.table_patterns)
    };
    assert!(pattern.matches("app", "outbox_7"));
    assert!(pattern.matches("APP", "Outbox_12"));
    assert!(!pattern.matches("app", "outbox_x"));
    assert!(!pattern.matches("app", "outbox_7_old"));
    assert_eq!(s.router.tables, s.tables);
}

#[test]
fn initial_statements_and_replace_null_with_default_are_read() {
    let s = translate(
        &config(&[
            (
                "database.initial.statements",
                "SET search_path = app;SET application_name = 'a;;b'",
            ),
            ("value.converter.replace.null.with.default", "FALSE"),
        ]),
        None,
    )
    .unwrap();
    assert_eq!(
        s.initial_statements,
        ["SET search_path = app", "SET application_name = 'a;b'"]
    );
    assert_eq!(
        connect(&s).value,
        Converter::Json(JsonConverter {
            schemas_enable: true,
            replace_null_with_default: false
        })
    );
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    let err = translate(
        &config(&[("key.converter.replace.null.with.default", "maybe")]),
        None,
    )
    .unwrap_err();
    assert!(
        err.contains("key.converter.replace.null.with.default"),
        "{err}"
    );
}

/// Messages are relayed through DecodeLogicalDecodingMessageContent before the EventRouter
/// (Debezium's documented chain); the prefix lists are Debezium's regex lists (`\,` a
/// literal comma), not both at once (`validateLogicalDecodingMessageExcludeList`).
#[test]
fn message_prefix_lists_and_the_decode_transform() {
    let decode = [
        ("transforms", "decode,outbox"),
        (
            "transforms.decode.type",
            "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
        ),
        ("transforms.decode.fields.null.include", "true"),
    ];
    let mut with = decode.to_vec();
    with.push(("message.prefix.include.list", r"outbox, a\,b ,orders\..*"));
    let s = translate(&config(&with), None).unwrap();
    let messages = s.router.messages.as_ref().expect("messages relayed");
    assert!(messages.keep_null_fields);
    assert!(messages.accepts("Outbox") && messages.accepts("a,b") && messages.accepts("orders.v2"));
    assert!(!messages.accepts("outbox2") && !messages.accepts("a"));
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    // The table-less outbox: no table.include.list.
    let mut no_table = config(&decode);
    no_table.entries.remove("table.include.list");
    let s = translate(&no_table, None).unwrap();
    assert!(s.tables.is_empty() && s.router.messages.is_some());
    // Without the decode transform there is neither message relaying nor a table-less outbox.
    assert!(translate(&config(&[]), None)
        .unwrap()
        .router
        .messages
        .is_none());
    for (extra, expected) in [
        (
            vec![("message.prefix.include.list", "outbox")],
            "DecodeLogicalDecodingMessageContent",
        ),
        (
            vec![
                ("message.prefix.include.list", "a"),
                ("message.prefix.exclude.list", "b"),
            ],
            "cannot both be set",
        ),
        (
            vec![
                ("transforms", "outbox,decode"),
                (
                    "transforms.decode.type",
                    "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
                ),
            ],
            "before the EventRouter",
        ),
    ] {
        let mut all = decode.to_vec();
        if extra[0].0 == "message.prefix.include.list" && expected != "cannot both be set" {
            all.clear();
        }
        all.extend(extra);
        let err = translate(&config(&all), None).unwrap_err();
        assert!(err.contains(expected), "{all:?}: {err}");
    }
    let mut no_table = config(&[]);
    no_table.entries.remove("table.include.list");
    assert!(translate(&no_table, None)
        .unwrap_err()
        .contains("table.include.list is required"));
}

/// `snapshot.fetch.size` bounds the rows of each snapshot fetch; a value that is not a
/// positive number is refused naming the option. `max.queue.size` is the in-flight window in
/// events; `producer.buffer.memory` bounds the producer's queue in bytes, as it bounds the
/// Java producer's buffer.
#[test]
fn snapshot_fetch_size_and_buffer_memory_are_honoured() {
    assert_eq!(
        translate(&config(&[]), None)
            .unwrap()
            .options
            .snapshot_fetch_size,
        None
    );
    let s = translate(&config(&[("snapshot.fetch.size", "500")]), None).unwrap();
    assert_eq!(
        s.options.snapshot_fetch_size,
        std::num::NonZeroUsize::new(500)
    );
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    for bad in ["0", "-1", "many"] {
        let e = translate(&config(&[("snapshot.fetch.size", bad)]), None).unwrap_err();
        assert!(e.to_string().contains("snapshot.fetch.size"), "{e}");
    }
    // Debezium's queue of records: the relay's in-flight window in events.
    let s = translate(&config(&[("max.queue.size", "20000")]), None).unwrap();
    assert_eq!(s.options.max_in_flight, Some(20_000));
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    let e = translate(&config(&[("max.queue.size", "many")]), None).unwrap_err();
    assert!(e.to_string().contains("max.queue.size"), "{e}");
    let s = translate(
        &config(&[("producer.override.buffer.memory", "16777216")]),
        None,
    )
    .unwrap();
    assert!(
        s.producer_properties
            .contains(&("queue.buffering.max.kbytes".into(), "16384".into())),
        "{:?}",
        s.producer_properties
    );
}

/// `snapshot.mode=when_needed`, as Debezium documents it: a snapshot when there is no
/// position (a new slot) and again when the position is lost (`--on-missing-slot reread`);
/// `initial` snapshots once and stops on a lost position. The relay's own outbox.relay.*
/// cleanup options come through too.
#[test]
fn when_needed_rereads_a_lost_position_and_relay_options_come_through() {
    use crate::config::{OnMissingSlot, SnapshotMode};
    let on = |connector: &[(&str, &str)]| {
        translate(&config(connector), None)
            .map(|s| (s.options.snapshot_mode, s.options.on_missing_slot))
    };
    assert_eq!(
        on(&[("snapshot.mode", "when_needed")]),
        Ok((Some(SnapshotMode::Initial), Some(OnMissingSlot::Reread)))
    );
    assert_eq!(
        on(&[("snapshot.mode", "initial")]),
        Ok((Some(SnapshotMode::Initial), None))
    );
    let s = translate(
        &config(&[
            ("outbox.relay.cleanup", "true"),
            ("outbox.relay.cleanup.batch", "100"),
            ("outbox.relay.cleanup.grace.minutes", "30"),
        ]),
        None,
    )
    .unwrap();
    assert_eq!(s.options.cleanup, Some(true));
    assert_eq!(s.options.cleanup_batch, Some(100));
    assert_eq!(s.options.cleanup_grace, Some(30));
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    let err = translate(&config(&[("outbox.relay.cleanup.batch", "many")]), None).unwrap_err();
    assert!(err.starts_with("outbox.relay.cleanup.batch:"), "{err}");
}

/// Kafka Connect's transforms after the EventRouter, with predicates: read in the order of
/// `transforms`; a transform before the EventRouter, an unknown class, an undeclared
/// predicate are refused by name, the supported classes named.
#[test]
fn transforms_after_the_event_router_are_chained_with_their_predicates() {
    use outbox_router::transforms::Predicate;
    let s = translate(
        &config(&[
            ("transforms", "outbox,route,tag,drop,skip"),
            (
                "transforms.route.type",
                "org.apache.kafka.connect.transforms.RegexRouter",
            ),
            ("transforms.route.regex", "(.*)"),
            ("transforms.route.replacement", "prod.$1"),
            (
                "transforms.tag.type",
                "org.apache.kafka.connect.transforms.InsertHeader",
            ),
            ("transforms.tag.header", "source"),
            ("transforms.tag.value.literal", "007"),
            (
                "transforms.drop.type",
                "org.apache.kafka.connect.transforms.DropHeaders",
            ),
            ("transforms.drop.headers", "eventType, trace"),
            (
                "transforms.skip.type",
                "org.apache.kafka.connect.transforms.Filter",
            ),
            ("transforms.skip.predicate", "tombstones"),
            ("transforms.skip.negate", "true"),
            ("predicates", "tombstones"),
            (
                "predicates.tombstones.type",
                "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
            ),
        ]),
        None,
    )
    .unwrap();
    let steps = &s.router.chain.steps;
    let aliases: Vec<&str> = steps.iter().map(|s| s.alias.as_str()).collect();
    assert_eq!(aliases, ["route", "tag", "drop", "skip"]);
    assert_eq!(
        steps[1].class,
        "org.apache.kafka.connect.transforms.InsertHeader"
    );
    let tag = format!("{:?}", steps[1].transform);
    assert!(tag.contains("Int8") && tag.contains("Int(7)"), "{tag}");
    let drop = format!("{:?}", steps[2].transform);
    assert!(drop.contains(r#"["eventType", "trace"]"#), "{drop}");
    assert!(matches!(
        &steps[3].predicate,
        Some((Predicate::RecordIsTombstone, true))
    ));
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);

    // Any of them may come before the EventRouter too: it then runs on the change event.
    let before = translate(
        &config(&[
            ("transforms", "route,outbox"),
            (
                "transforms.route.type",
                "org.apache.kafka.connect.transforms.RegexRouter",
            ),
            ("transforms.route.regex", "(.*)"),
            ("transforms.route.replacement", "cdc.$1"),
        ]),
        None,
    )
    .unwrap();
    let chain = &before
        .router
        .before
        .expect("a chain before the EventRouter")
        .chain;
    assert_eq!(chain.steps[0].alias, "route");
    assert!(before.router.chain.steps.is_empty());
    let refused = |extra: &[(&str, &str)]| translate(&config(extra), None).unwrap_err();
    // A predicate on the EventRouter is checked against the change events' topics, which a
    // RegexRouter before it renames.
    let renamed = refused(&[
        ("transforms", "route,outbox"),
        (
            "transforms.route.type",
            "org.apache.kafka.connect.transforms.RegexRouter",
        ),
        ("transforms.route.regex", "(.*)"),
        ("transforms.route.replacement", "cdc.$1"),
        ("predicates", "isOutbox"),
        (
            "predicates.isOutbox.type",
            "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        ),
        ("predicates.isOutbox.pattern", ".*"),
        ("transforms.outbox.predicate", "isOutbox"),
    ]);
    assert!(
        renamed.contains("transforms.outbox.predicate") && renamed.contains("renames"),
        "{renamed}"
    );
    let unknown = refused(&[
        ("transforms", "outbox,flat"),
        (
            "transforms.flat.type",
            "com.example.transforms.Custom$Value",
        ),
    ]);
    assert!(
        unknown.contains("Custom$Value is not supported") && unknown.contains("RegexRouter"),
        "{unknown}"
    );
    let bad_format = refused(&[
        ("transforms", "outbox,stamp"),
        (
            "transforms.stamp.type",
            "org.apache.kafka.connect.transforms.TimestampRouter",
        ),
        ("transforms.stamp.timestamp.format", "EEE yyyy"),
    ]);
    assert!(
        bad_format.starts_with("transforms.stamp.timestamp.format:"),
        "{bad_format}"
    );
    let undeclared = refused(&[
        ("transforms", "outbox,skip"),
        (
            "transforms.skip.type",
            "org.apache.kafka.connect.transforms.Filter",
        ),
        ("transforms.skip.predicate", "nope"),
    ]);
    assert!(
        undeclared.contains("predicate \"nope\" is not declared"),
        "{undeclared}"
    );
}

/// The option catalog: one entry per option, no name twice; every option a configuration
/// gives is described from it (by the transform registry for a transform after the
/// EventRouter), never with its value; an option nobody knows is not.
#[test]
fn each_option_is_described_by_the_catalog() {
    use super::{option_doc, CATALOG};
    let mut names: Vec<&str> = CATALOG
        .iter()
        .flat_map(|s| std::iter::once(s.name).chain(s.aliases.iter().copied()))
        .collect();
    let all = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all, "an option named twice in the catalog");
    assert!(CATALOG.iter().all(|s| !s.doc.is_empty()));

    let s = translate(
        &config(&[
            ("slot.name", "orders"),
            ("database.password", "s3cr3t-value"),
            ("transforms", "outbox,mask"),
            ("transforms.outbox.route.by.field", "aggregate_type"),
            (
                "transforms.mask.type",
                "org.apache.kafka.connect.transforms.MaskField$Value",
            ),
            ("transforms.mask.fields", "secret"),
            ("snapshot.delay.ms", "100"),
        ]),
        None,
    )
    .unwrap();
    let line = |key: &str| {
        s.described
            .iter()
            .find(|d| d.starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("{key} not described: {:?}", s.described))
            .clone()
    };
    assert_eq!(
        line("slot.name"),
        "slot.name [Connector]: applied as --slot (the replication slot)"
    );
    assert!(line("transforms.outbox.route.by.field").contains("[Outbox EventRouter]: applied"));
    assert!(line("transforms.mask.fields").contains("MaskField"));
    assert!(line("snapshot.delay.ms").contains("no effect"));
    assert!(line("database.password").contains("applied (with database.hostname)"));
    assert!(
        s.described.iter().all(|d| !d.contains("s3cr3t-value")),
        "a value is never shown: {:?}",
        s.described
    );
    let entries: std::collections::BTreeMap<String, String> =
        [("frobnicate".to_owned(), "1".to_owned())].into();
    assert!(option_doc("frobnicate", &entries).is_none());
    let refused = option_doc("column.exclude.list", &entries).unwrap();
    assert!(
        refused.treatment.starts_with("refused"),
        "{}",
        refused.treatment
    );
}

/// Debezium's CloudEvents recipe runs as documented; what the relay cannot do like Debezium
/// around it is refused at start, naming the option.
#[test]
fn the_cloudevents_recipe_is_accepted_and_its_impossible_variants_refused() {
    let recipe: &[(&str, &str)] = &[
        ("transforms", "meta,outbox"),
        (
            "transforms.meta.type",
            "org.apache.kafka.connect.transforms.HeaderFrom$Value",
        ),
        ("transforms.meta.fields", "source,op,transaction"),
        ("transforms.meta.headers", "source,op,transaction"),
        ("transforms.meta.operation", "copy"),
        (
            "value.converter",
            "io.debezium.converters.CloudEventsConverter",
        ),
        ("value.converter.metadata.source", "header"),
        (
            "header.converter",
            "org.apache.kafka.connect.json.JsonConverter",
        ),
        ("header.converter.schemas.enable", "true"),
    ];
    let setup = translate(&config(recipe), None).unwrap();
    assert!(setup.router.before.is_some());
    assert_eq!(setup.router.before.as_ref().unwrap().database, "app");

    let with = |changes: &[(&str, &str)]| {
        let mut all = recipe.to_vec();
        all.extend_from_slice(changes);
        translate(&config(&all), None)
    };
    // Moving the metadata out of the change event, copying the row image, or another
    // transform before the EventRouter: the change event carries them all.
    for changes in [
        &[("transforms.meta.operation", "move")][..],
        &[
            ("transforms.meta.fields", "after,op"),
            ("transforms.meta.headers", "row,op"),
        ][..],
        &[(
            "transforms.meta.type",
            "org.apache.kafka.connect.transforms.ReplaceField$Value",
        )][..],
    ] {
        if let Err(e) = with(changes) {
            panic!("{changes:?} refused: {e}");
        }
    }
    for (changes, named) in [
        (
            &[("message.key.columns", "public.outbox:id")][..],
            "message.key.columns",
        ),
        (
            &[("header.converter.schemas.enable", "false")][..],
            "header.converter",
        ),
        (
            &[("value.converter.serializer.type", "avro")][..],
            "value.converter.serializer.type",
        ),
        (
            &[("value.converter.metadata.source", "generate")][..],
            "value.converter.metadata.source",
        ),
        (
            &[(
                "key.converter",
                "io.debezium.converters.CloudEventsConverter",
            )][..],
            "key.converter",
        ),
    ] {
        let e = match with(changes) {
            Ok(_) => panic!("{changes:?} accepted"),
            Err(e) => e,
        };
        assert!(e.contains(named), "{changes:?}: {e}");
    }
}

#[test]
fn json_schema_converter_options_are_read_and_unsupported_ones_refused() {
    let json = |extra: &[(&str, &str)]| {
        let mut options = vec![
            (
                "value.converter",
                "io.confluent.connect.json.JsonSchemaConverter",
            ),
            (
                "value.converter.schema.registry.url",
                "http://registry:8081",
            ),
        ];
        options.extend_from_slice(extra);
        translate(&config(&options), None)
    };
    let s = json(&[
        ("value.converter.object.additional.properties", "false"),
        ("value.converter.auto.register.schemas", "false"),
        (
            "value.converter.value.subject.name.strategy",
            "io.confluent.kafka.serializers.subject.RecordNameStrategy",
        ),
        ("value.converter.json.fail.unknown.properties", "false"),
        ("value.converter.use.optional.for.nonrequired", "true"),
        ("value.converter.json.fail.invalid.schema", "false"),
    ])
    .unwrap();
    let Converter::JsonSchema(c) = &connect(&s).value else {
        panic!("{:?}", connect(&s).value);
    };
    assert!(!c.additional_properties);
    assert_eq!(c.serde.lookup, outbox_router::connect::Lookup::Find);
    assert_eq!(
        c.serde.strategy,
        outbox_router::connect::SubjectNameStrategy::Record
    );
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    for (key, value) in [
        ("value.converter.json.fail.invalid.schema", "true"),
        ("value.converter.json.indent.output", "true"),
        ("value.converter.ignore.default.for.nullables", "true"),
        ("value.converter.normalize.schemas", "true"),
        (
            "value.converter.json.default.property.inclusion",
            "NON_NULL",
        ),
        ("value.converter.use.schema.id", "3"),
        ("value.converter.decimal.format", "NUMERIC"),
        (
            "header.converter",
            "io.confluent.connect.json.JsonSchemaConverter",
        ),
    ] {
        let err = json(&[(key, value)]).unwrap_err();
        assert!(err.contains(key), "{key}={value}: {err}");
    }
    assert!(translate(
        &config(&[(
            "key.converter",
            "io.confluent.connect.json.JsonSchemaConverter"
        )]),
        None
    )
    .unwrap_err()
    .contains("key.converter.schema.registry.url is required"));
}

/// Confluent's ProtobufConverter: the registry options the Avro converter reads, its own
/// flags, and the options whose other values change what would be written, refused.
#[test]
fn confluent_protobuf_converter_options() {
    let class = "io.confluent.connect.protobuf.ProtobufConverter";
    let s = translate(
        &config(&[
            ("value.converter", class),
            (
                "value.converter.schema.registry.url",
                "http://registry:8081",
            ),
            ("value.converter.auto.register.schemas", "false"),
            (
                "value.converter.value.subject.name.strategy",
                "io.confluent.kafka.serializers.subject.RecordNameStrategy",
            ),
            ("value.converter.optional.for.nullables", "true"),
            ("value.converter.wrapper.for.nullables", "true"),
            ("value.converter.scrub.invalid.names", "true"),
            ("value.converter.enhanced.protobuf.schema.support", "true"),
            ("value.converter.skip.known.types", "true"),
            ("key.converter", class),
            ("key.converter.schema.registry.url", "http://registry:8081"),
        ]),
        None,
    )
    .unwrap();
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    let Converter::Protobuf(value) = &connect(&s).value else {
        panic!("{:?}", connect(&s).value)
    };
    assert!(!value.serde.is_key);
    assert_eq!(value.serde.lookup, outbox_router::connect::Lookup::Find);
    assert_eq!(
        value.serde.strategy,
        outbox_router::connect::SubjectNameStrategy::Record
    );
    assert_eq!(
        value.options,
        outbox_router::connect::ProtobufOptions {
            optional_for_nullables: true,
            wrapper_for_nullables: true,
            scrub_invalid_names: true,
        }
    );
    // use.latest.version: the latest version only when schemas are not registered
    // automatically (AbstractKafkaProtobufSerializer and ...AvroSerializer 7.0.x).
    for (auto_register, lookup) in [
        ("true", outbox_router::connect::Lookup::Register),
        ("false", outbox_router::connect::Lookup::Latest),
    ] {
        let s = translate(
            &config(&[
                ("value.converter", class),
                (
                    "value.converter.schema.registry.url",
                    "http://registry:8081",
                ),
                ("value.converter.use.latest.version", "true"),
                ("value.converter.auto.register.schemas", auto_register),
            ]),
            None,
        )
        .unwrap();
        let Converter::Protobuf(value) = &connect(&s).value else {
            panic!("{:?}", connect(&s).value)
        };
        assert_eq!(value.serde.lookup, lookup);
    }
    let Converter::Protobuf(key) = &connect(&s).key else {
        panic!("{:?}", connect(&s).key)
    };
    assert!(key.serde.is_key);
    assert_eq!(key.serde.lookup, outbox_router::connect::Lookup::Register);
    assert_eq!(
        key.options,
        outbox_router::connect::ProtobufOptions::default()
    );
    for (option, value, named) in [
        ("skip.known.types", "false", "skip.known.types"),
        ("normalize.schemas", "true", "normalize.schemas"),
        (
            "generate.struct.for.nulls",
            "true",
            "generate.struct.for.nulls",
        ),
        ("flatten.unions", "true", "flatten.unions"),
        ("use.schema.id", "3", "use.schema.id"),
        ("wrapper.for.nullables", "yes", "wrapper.for.nullables"),
    ] {
        let key = format!("value.converter.{option}");
        let e = translate(
            &config(&[
                ("value.converter", class),
                (
                    "value.converter.schema.registry.url",
                    "http://registry:8081",
                ),
                (&key, value),
            ]),
            None,
        )
        .unwrap_err();
        assert!(e.contains(named), "{option}={value}: {e}");
    }
    let e = translate(&config(&[("value.converter", class)]), None).unwrap_err();
    assert!(e.contains("value.converter.schema.registry.url"), "{e}");
    let e = translate(
        &config(&[
            ("header.converter", class),
            (
                "header.converter.schema.registry.url",
                "http://registry:8081",
            ),
        ]),
        None,
    )
    .unwrap_err();
    assert!(e.contains("not a HeaderConverter"), "{e}");
}

/// BinaryDataConverter's note names its delegate and its delegate's settings; a JsonConverter
/// option under the converter's own name, which Debezium does not hand to the delegate, is
/// said not to apply.
#[test]
fn binary_data_notes_name_the_delegate_and_options_that_do_not_apply() {
    let s = translate(
        &config(&[
            (
                "value.converter",
                "io.debezium.converters.BinaryDataConverter",
            ),
            (
                "value.converter.delegate.converter.type",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
            (
                "value.converter.delegate.converter.type.schemas.enable",
                "false",
            ),
            ("value.converter.schemas.enable", "true"),
        ]),
        None,
    )
    .unwrap();
    let note = |part: &str| s.notes.iter().find(|n| n.contains(part)).cloned();
    assert_eq!(
        note("value.converter = ").as_deref(),
        Some(
            "value.converter = io.debezium.converters.BinaryDataConverter: bytes as they are, anything else \
             through org.apache.kafka.connect.json.JsonConverter, schemas.enable=false (connector config)"
        ),
        "{:?}",
        s.notes
    );
    assert!(
        note("value.converter.schemas.enable=true does not apply")
            .is_some_and(|n| n.contains("value.converter.delegate.converter.type.schemas.enable")),
        "{:?}",
        s.notes
    );
    assert_eq!(
        connect(&s).value,
        Converter::BinaryData {
            delegate: Some(outbox_router::connect::Delegate::Json(JsonConverter {
                schemas_enable: false,
                replace_null_with_default: true,
            }))
        }
    );
}

/// Options public outbox configurations use that were once refused or ignored: Kafka
/// Connect's default `transaction.boundary`, Debezium 1.x's `ByteBufferConverter`, the schema
/// filter, and a predicate on the EventRouter itself (Debezium's documentation routes only the
/// outbox table's records so).
#[test]
fn options_of_public_outbox_configurations() {
    let ok = |extra: &[(&str, &str)]| translate(&config(extra), None);
    let refused = |extra: &[(&str, &str)]| ok(extra).unwrap_err();
    // transaction.boundary: poll, written out, is the default.
    ok(&[("transaction.boundary", "poll")]).unwrap();
    assert!(refused(&[("transaction.boundary", "interval")])
        .starts_with("transaction.boundary=interval is not supported"));
    // ByteBufferConverter: BinaryDataConverter's name before Debezium 2.0.
    let s = ok(&[(
        "value.converter",
        "io.debezium.converters.ByteBufferConverter",
    )])
    .unwrap();
    assert!(matches!(
        connect(&s).value,
        Converter::BinaryData { delegate: None }
    ));

    // Debezium's outbox documentation: BinaryDataConverter delegating to a schema-registry
    // converter, its options under `delegate.converter.type.`.
    let s = ok(&[
        (
            "value.converter",
            "io.debezium.converters.BinaryDataConverter",
        ),
        (
            "value.converter.delegate.converter.type",
            "io.apicurio.registry.utils.converter.AvroConverter",
        ),
        (
            "value.converter.delegate.converter.type.apicurio.registry.url",
            "http://registry:8080/apis/registry/v2",
        ),
        (
            "value.converter.delegate.converter.type.apicurio.registry.auto-register",
            "true",
        ),
    ])
    .unwrap();
    let Converter::BinaryData {
        delegate: Some(outbox_router::connect::Delegate::Registry(inner)),
    } = &connect(&s).value
    else {
        panic!("{:?}", connect(&s).value)
    };
    // Debezium calls the delegate without the record's headers: Apicurio's serializer then
    // frames the id in the value, whatever headers.enabled says.
    let Converter::Avro(avro) = &**inner else {
        panic!("{inner:?}")
    };
    assert_eq!(avro.framing, outbox_router::connect::Framing::Long);
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    let e = ok(&[
        (
            "header.converter",
            "io.debezium.converters.BinaryDataConverter",
        ),
        (
            "header.converter.delegate.converter.type",
            "io.confluent.connect.avro.AvroConverter",
        ),
        (
            "header.converter.delegate.converter.type.schema.registry.url",
            "http://registry:8081",
        ),
    ])
    .unwrap_err();
    assert!(
        e.contains("a header converter's BinaryDataConverter"),
        "{e}"
    );
    // Apicurio's explicit group is read (the registry test registers in it); an explicit
    // artifact id or version, one artifact for every topic, is refused by name.
    let apicurio = |extra: (&str, &str)| {
        ok(&[
            (
                "value.converter",
                "io.apicurio.registry.utils.converter.AvroConverter",
            ),
            (
                "value.converter.apicurio.registry.url",
                "http://registry:8080/apis/registry/v2",
            ),
            extra,
        ])
    };
    let s = apicurio((
        "value.converter.apicurio.registry.artifact.group-id",
        "shipment",
    ))
    .unwrap();
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    let e = apicurio((
        "value.converter.apicurio.registry.artifact.artifact-id",
        "all",
    ))
    .unwrap_err();
    assert!(
        e.starts_with(
            "value.converter.apicurio.registry.artifact.artifact-id=all is not supported"
        ),
        "{e}"
    );

    // The schema filter: an outbox table must be in it; patterns take only its schemas.
    ok(&[("schema.include.list", "PUBLIC,other")]).unwrap();
    ok(&[("schema.exclude.list", "audit")]).unwrap();
    // Blank: no filter, as in Debezium; `\,` is a comma inside a pattern.
    ok(&[("schema.include.list", " ")]).unwrap();
    ok(&[("schema.include.list", r"pub{1\,2}lic")]).unwrap();
    let e = refused(&[("schema.include.list", "inventory")]);
    assert!(e.contains("schema.include.list=\"inventory\" leaves out the schema of the outbox table public.outbox"), "{e}");
    let e = refused(&[("schema.blacklist", "pub.*")]);
    assert!(e.starts_with("schema.blacklist="), "{e}");
    let e = refused(&[
        ("schema.include.list", "public"),
        ("schema.exclude.list", "x"),
    ]);
    assert!(e.contains("cannot both be set"), "{e}");
    let s = ok(&[
        ("table.include.list", r"app\.outbox_\d+,other\.outbox_\d+"),
        ("schema.include.list", "app"),
    ])
    .unwrap();
    let [app, other] = s.table_patterns.as_slice() else {
        panic!("{:?}", s.table_patterns)
    };
    assert!(app.matches("app", "outbox_1"));
    assert!(
        !other.matches("other", "outbox_1"),
        "the schema filter leaves other out"
    );

    // The EventRouter's predicate: accepted where the outbox's change events (and the
    // tombstones after a DELETE) all meet it, as then nothing skips the EventRouter.
    let predicate = |kind: &str, extra: &[(&str, &str)]| {
        let mut options = vec![
            ("transforms.outbox.predicate", "isOutbox"),
            ("predicates", "isOutbox"),
        ];
        let class = format!("org.apache.kafka.connect.transforms.predicates.{kind}");
        options.push(("predicates.isOutbox.type", class.leak()));
        options.extend_from_slice(extra);
        ok(&options)
    };
    predicate(
        "TopicNameMatches",
        &[("predicates.isOutbox.pattern", r"app\.public\.outbox")],
    )
    .unwrap();
    predicate(
        "TopicNameMatches",
        &[("predicates.isOutbox.pattern", r"app\..*")],
    )
    .unwrap();
    let e = predicate(
        "TopicNameMatches",
        &[("predicates.isOutbox.pattern", "other")],
    )
    .unwrap_err();
    assert!(
        e.starts_with("transforms.outbox.predicate: isOutbox does not match app.public.outbox"),
        "{e}"
    );
    let e = predicate(
        "TopicNameMatches",
        &[
            ("predicates.isOutbox.pattern", r"app\..*"),
            ("transforms.outbox.negate", "true"),
        ],
    )
    .unwrap_err();
    assert!(e.contains("isOutbox (negate=true) does not match"), "{e}");
    // Change events are not tombstones: RecordIsTombstone sends them past the EventRouter.
    assert!(predicate("RecordIsTombstone", &[]).is_err());
    let e = predicate("RecordIsTombstone", &[("transforms.outbox.negate", "true")]).unwrap_err();
    assert!(e.contains("tombstones.on.delete=false"), "{e}");
    predicate(
        "RecordIsTombstone",
        &[
            ("transforms.outbox.negate", "true"),
            ("tombstones.on.delete", "false"),
        ],
    )
    .unwrap();
    let e = predicate("HasHeaderKey", &[("predicates.isOutbox.name", "h")]).unwrap_err();
    assert!(e.contains("HasHeaderKey"), "{e}");
    // Messages reach the EventRouter on <topic.prefix>.message.
    let e = predicate(
        "TopicNameMatches",
        &[
            ("predicates.isOutbox.pattern", r"app\.public\.outbox"),
            ("transforms", "decode,outbox"),
            (
                "transforms.decode.type",
                "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
            ),
        ],
    )
    .unwrap_err();
    assert!(e.contains("does not match app.message"), "{e}");
}

/// An option the catalog applies as a native option names an option `run` has, and its
/// default is a value that option takes.
#[test]
fn each_native_option_names_an_option_of_run() {
    use clap::Args;
    let run = crate::config::RunOptions::augment_args(clap::Command::new("run"));
    let mut seen = 0;
    for spec in CATALOG {
        if let option_catalog::Treatment::Native(flag)
        | option_catalog::Treatment::NativeOrDefault(flag) = spec.treatment
        {
            seen += 1;
            assert!(
                run.get_arguments().any(|a| a.get_long() == Some(flag)),
                "{}: --{flag} is not an option of run",
                spec.name
            );
            if let Some(default) = spec.default {
                crate::config::RunOptions::from_flag(flag, default)
                    .unwrap_or_else(|e| panic!("{}: its default {default:?}: {e}", spec.name));
            }
        }
    }
    assert!(seen >= 5, "{seen} native options");
}

/// What a connector configuration means in native options sits below the command line (and
/// the environment and the --config file), by the rule that merges those: the user's option
/// wins, the connector's fills what the user left unset, and a value the native option
/// refuses is refused under the connector's name.
#[test]
fn the_command_line_wins_over_the_connector_configuration() {
    let preset = translate(
        &config(&[
            ("slot.name", "from_connector"),
            ("publication.name", "pub_from_connector"),
            ("outbox.relay.cleanup", "TRUE"),
            ("outbox.relay.cleanup.batch", "100"),
            ("slot.failover", "true"),
        ]),
        None,
    )
    .unwrap();
    let user = crate::config::RunOptions {
        slot: Some("from_user".into()),
        cleanup_batch: Some(7),
        slot_failover: Some(false),
        bootstrap_servers: Some("kafka:9092".into()),
        ..Default::default()
    };
    let s = crate::config::Settings::resolve(user, Some(preset)).unwrap();
    let cdc = s.cdc().unwrap();
    assert_eq!(cdc.slot, "from_user");
    assert_eq!(cdc.publication, "pub_from_connector");
    assert!(
        !cdc.slot_failover,
        "the user's false wins over the connector's true"
    );
    let cleanup = s
        .cleanup
        .expect("the connector's outbox.relay.cleanup=TRUE applies");
    assert_eq!(cleanup.batch, 7);

    // A connector that sets none of them leaves run's own defaults.
    let plain = translate(&config(&[]), None).unwrap();
    let user = crate::config::RunOptions {
        bootstrap_servers: Some("kafka:9092".into()),
        ..Default::default()
    };
    let s = crate::config::Settings::resolve(user, Some(plain)).unwrap();
    assert!(s.cleanup.is_none());
    assert_eq!(s.cdc().unwrap().slot, "debezium");
    assert_eq!(
        s.cdc().unwrap().status_interval,
        std::time::Duration::from_millis(crate::config::defaults::STATUS_INTERVAL_MS)
    );

    let err = translate(&config(&[("outbox.relay.cleanup.batch", "-3")]), None).unwrap_err();
    assert!(err.starts_with("outbox.relay.cleanup.batch: "), "{err}");
    assert!(err.contains("'-3'"), "{err}");
}

/// The cost check (crates/cost) measures router configurations it makes without the relay,
/// so that it builds in seconds: each is exactly what this translation makes of its
/// connector configuration.
#[test]
fn the_cost_checks_cases_are_what_their_connector_configurations_make() {
    let mut compared = 0;
    for case in outbox_relay_cost::Case::ALL {
        let Some(json) = case.connector() else {
            continue;
        };
        let translated = translate(&parse(json).unwrap(), None).unwrap().router;
        assert_eq!(
            format!("{translated:#?}"),
            format!("{:#?}", case.config()),
            "{}",
            case.name()
        );
        compared += 1;
    }
    assert_eq!(compared, outbox_relay_cost::Case::ALL.len() - 1);
}

/// Polling with a connector configuration: how a slot starts (snapshot.mode and
/// publication.autocreate.mode, given or by Debezium's default) is no concern of polling, and
/// is not refused as the user's own --snapshot-mode would be.
#[test]
fn polling_takes_a_connector_configuration_whose_slot_options_it_leaves_out() {
    for extra in [
        &[][..],
        &[
            ("snapshot.mode", "initial"),
            ("publication.autocreate.mode", "filtered"),
        ][..],
    ] {
        let preset = translate(&config(extra), None).unwrap();
        let user = crate::config::RunOptions {
            mode: Some(crate::config::Mode::Polling),
            bootstrap_servers: Some("kafka:9092".into()),
            ..Default::default()
        };
        let s = crate::config::Settings::resolve(user, Some(preset))
            .unwrap_or_else(|e| panic!("{extra:?}: {e}"));
        assert!(s.cdc().is_none());
    }
    let preset = translate(&config(&[]), None).unwrap();
    let user = crate::config::RunOptions {
        mode: Some(crate::config::Mode::Polling),
        snapshot_mode: Some(crate::config::SnapshotMode::Initial),
        bootstrap_servers: Some("kafka:9092".into()),
        ..Default::default()
    };
    let err = crate::config::Settings::resolve(user, Some(preset)).unwrap_err();
    assert!(err.to_string().starts_with("snapshot-mode:"), "{err}");
}

/// The converter lists `GET /connector-plugins` shows are the classes the parser takes: each
/// is accepted (a registry converter may still want its registry's URL, never "not
/// supported"), and a class not listed is refused.
#[test]
fn the_listed_converters_are_the_ones_the_parser_takes() {
    let refused = |extra: &[(&str, &str)]| -> Option<String> {
        load_config(config(extra), None)
            .err()
            .filter(|e| e.contains("is not supported") || e.contains("is not a HeaderConverter"))
    };
    for class in CONVERTERS {
        assert_eq!(refused(&[("value.converter", class)]), None, "{class}");
    }
    for class in HEADER_CONVERTERS {
        assert_eq!(refused(&[("header.converter", class)]), None, "{class}");
    }
    assert!(refused(&[("value.converter", "com.example.Unknown")]).is_some());
    assert!(refused(&[(
        "header.converter",
        "io.confluent.connect.avro.AvroConverter"
    )])
    .is_some());
}

/// `snapshot.mode` as Debezium names its modes: `always`, `configuration_based` by its
/// options, `initial_only`, and `custom` refused with the reason.
#[test]
fn every_snapshot_mode_is_read_or_refused_with_its_reason() {
    let mode = |extra: &[(&str, &str)]| load_config(config(extra), None);
    let snapshot = |extra: &[(&str, &str)]| {
        let preset = mode(extra).unwrap();
        (preset.options.snapshot_mode, preset.options.on_missing_slot)
    };
    assert_eq!(
        snapshot(&[("snapshot.mode", "always")]).0,
        Some(SnapshotMode::Always)
    );
    let based = "snapshot.mode.configuration.based.";
    assert_eq!(
        snapshot(&[
            ("snapshot.mode", "configuration_based"),
            (&format!("{based}snapshot.data"), "true"),
            (&format!("{based}start.stream"), "true"),
        ]),
        (Some(SnapshotMode::Always), None)
    );
    assert_eq!(
        snapshot(&[
            ("snapshot.mode", "configuration_based"),
            (&format!("{based}start.stream"), "true"),
            (&format!("{based}snapshot.on.data.error"), "true"),
        ]),
        (
            Some(SnapshotMode::NoData),
            Some(crate::config::OnMissingSlot::Reread)
        )
    );
    let refused = |extra: &[(&str, &str)]| mode(extra).err().unwrap_or_default();
    assert!(refused(&[("snapshot.mode", "configuration_based")]).contains("start.stream"));
    assert_eq!(
        snapshot(&[("snapshot.mode", "initial_only")]).0,
        Some(SnapshotMode::InitialOnly)
    );
    let custom = refused(&[
        ("snapshot.mode", "custom"),
        ("snapshot.mode.custom.name", "mine"),
    ]);
    assert!(
        custom.contains("snapshot.mode.custom.name=mine"),
        "{custom}"
    );
}
