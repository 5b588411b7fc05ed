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
    let s = resolve(base()).unwrap();
    assert_eq!(s.cdc().unwrap().slot, "outbox_relay");
    assert_eq!(s.cdc().unwrap().publication, "outbox_relay");
    assert_eq!(s.table().to_string(), "public.outbox");
    assert_eq!(s.router.topic_template.render("Order"), "Order.events");
    assert_eq!(s.kafka.dead_letter_topic, "outbox-relay.dlq");
}

#[test]
fn errors_name_the_setting() {
    let err = resolve(RunOptions {
        slot: Some("Bad-Slot".into()),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("slot:"), "{err}");
    let err = resolve(RunOptions {
        postgres_url: None,
        ..base()
    })
    .unwrap_err();
    assert!(
        err.to_string().contains("--postgres-url")
            && err.to_string().contains("OUTBOX_RELAY_POSTGRES_URL")
    );
    let err = resolve(RunOptions {
        producer_property: vec!["acks=1".into()],
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().contains("acks=1"), "{err}");
    let err = resolve(RunOptions {
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
    let c =
        crate::config::ConnectionInfo::parse(&with_password("postgres://u@h/db", "p:w@d").unwrap())
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
    let s = resolve(RunOptions {
        config: Some(path.clone()),
        ..base()
    })
    .unwrap();
    assert_eq!(s.cdc().unwrap().slot, "from_file");
    assert_eq!(
        s.kafka.bootstrap_servers, "localhost:9092",
        "the command line wins"
    );
    assert_eq!(s.kafka.topic_partitions, 3);
    std::fs::write(&path, "slots = \"typo\"\n").unwrap();
    let err = resolve(RunOptions {
        config: Some(path),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().contains("unknown field `slots`"), "{err}");
}

fn resolve(options: RunOptions) -> Result<Settings, ConfigError> {
    Settings::resolve(options.merge_file()?, None)
}

#[test]
fn the_mode_is_a_value_and_polling_options_need_it() {
    let s = resolve(RunOptions {
        mode: Some(Mode::Polling),
        ..base()
    })
    .unwrap();
    match s.source {
        SourceSettings::Polling(p) => {
            assert_eq!(p.batch_size, defaults::POLL_BATCH_SIZE);
            assert_eq!(p.order_by, None, "the table's identity column");
        }
        other => panic!("{other:?}"),
    }
    let err = resolve(RunOptions {
        poll_batch_size: Some(5),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("poll-batch-size:"), "{err}");
}

#[test]
fn in_flight_bytes_default_and_refusal_name_the_option() {
    let s = resolve(base()).unwrap();
    assert_eq!(s.kafka.max_in_flight_bytes, 4 << 20);
    let err = resolve(RunOptions {
        max_in_flight_bytes: Some(10),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("max-in-flight-bytes:"), "{err}");
}

#[test]
fn every_option_can_come_from_the_file() {
    // Each key of RunOptions is accepted by the file: the merge keeps no list of its own.
    let dir = tempdir();
    let path = dir.join("all.toml");
    std::fs::write(
        &path,
        "mode = \"polling\"\npoll-interval-ms = 7\npoll-batch-size = 3\npoll-order-by = \"id\"\n\
         processed-column = \"published_at\"\ntable = \"app.box\"\nid-column = \"i\"\nkey-column = \"k\"\n\
         payload-column = \"p\"\nroute-by-column = \"r\"\ntopic-template = \"t.${routedByValue}\"\n\
         additional-placement = \"\"\ndead-letter-topic = \"d\"\ntopic-partitions = 2\n\
         topic-replication-factor = 1\nmax-in-flight = 9\nmax-in-flight-bytes = 4096\nmetrics-address = \"127.0.0.1:1\"\n\
         metrics-topic-limit = 20\nproducer-property = [\"linger.ms=1\"]\nexpand-json-payload = true\n",
    )
    .unwrap();
    let s = resolve(RunOptions {
        config: Some(path),
        ..base()
    })
    .unwrap();
    let SourceSettings::Polling(p) = &s.source else {
        panic!("mode from the file")
    };
    assert_eq!(
        (p.interval.as_millis(), p.batch_size, p.order_by.as_deref()),
        (7, 3, Some("id"))
    );
    assert_eq!(p.retire, Retire::MarkProcessed("published_at".into()));
    assert_eq!(s.table().to_string(), "app.box");
    assert_eq!(
        (
            s.router.id_column.as_str(),
            s.router.key_column.as_str(),
            s.router.payload_column.as_str(),
            s.router.route_by_column.as_str()
        ),
        ("i", "k", "p", "r")
    );
    assert!(s.router.additional.is_empty() && s.router.expand_json_payload);
    assert_eq!(s.router.topic_template.render("x"), "t.x");
    assert_eq!(
        (
            s.kafka.dead_letter_topic.as_str(),
            s.kafka.topic_partitions,
            s.kafka.topic_replication_factor,
            s.kafka.max_in_flight,
            s.kafka.max_in_flight_bytes
        ),
        ("d", 2, 1, 9, 4096)
    );
    assert_eq!(
        s.kafka.properties,
        vec![("linger.ms".to_string(), "1".to_string())]
    );
    assert_eq!(s.metrics_address, "127.0.0.1:1");
    assert_eq!(s.metrics_topic_limit, 20);
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "relay-config-test-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn exactly_once_is_for_cdc_mode_only() {
    let s = resolve(RunOptions {
        exactly_once: Some(true),
        ..base()
    })
    .unwrap();
    assert!(s.cdc().unwrap().exactly_once);
    let err = resolve(RunOptions {
        exactly_once: Some(true),
        mode: Some(Mode::Polling),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("exactly-once:"), "{err}");
    let err = resolve(RunOptions {
        exactly_once: Some(true),
        producer_property: vec!["enable.gapless.guarantee=false".into()],
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("producer-property:"), "{err}");
}

#[test]
fn table_takes_a_list_in_cdc_mode_and_one_table_in_polling_mode() {
    let s = resolve(RunOptions {
        table: Some("public.orders_outbox, billing.outbox".into()),
        ..base()
    })
    .unwrap();
    let names: Vec<String> = s.router.tables.iter().map(ToString::to_string).collect();
    assert_eq!(names, ["public.orders_outbox", "billing.outbox"]);
    let err = resolve(RunOptions {
        table: Some("public.a,public.b".into()),
        mode: Some(Mode::Polling),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("table:"), "{err}");
    assert!(err.to_string().contains("one outbox table"), "{err}");
    let err = resolve(RunOptions {
        table: Some(" , ".into()),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("table:"), "{err}");
}

#[test]
fn message_prefix_relays_messages_in_cdc_mode_with_or_without_a_table() {
    let s = resolve(RunOptions {
        message_prefix: Some(r"app\..*, billing".into()),
        table: Some(String::new()),
        ..base()
    })
    .unwrap();
    assert!(s.router.tables.is_empty());
    let messages = s.router.messages.as_ref().unwrap();
    assert!(messages.accepts("app.orders") && messages.accepts("BILLING"));
    assert!(!messages.accepts("billing2"));
    let err = resolve(RunOptions {
        table: Some(String::new()),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("table:"), "{err}");
    let err = resolve(RunOptions {
        message_prefix: Some("app".into()),
        mode: Some(Mode::Polling),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("message-prefix:"), "{err}");
    let err = resolve(RunOptions {
        message_prefix: Some("(".into()),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("message-prefix:"), "{err}");
}

#[test]
fn gssapi_is_sasl_with_the_gssapi_mechanism_or_none_named() {
    let uses_gssapi = |properties: &[&str]| {
        let options = RunOptions {
            producer_property: properties.iter().map(|p| p.to_string()).collect(),
            ..base()
        };
        resolve(options).unwrap().kafka.uses_gssapi()
    };
    assert!(!uses_gssapi(&[]));
    assert!(!uses_gssapi(&["security.protocol=SSL"]));
    assert!(!uses_gssapi(&["sasl.mechanism=GSSAPI"]), "not SASL");
    // librdkafka's default mechanism is GSSAPI.
    assert!(uses_gssapi(&["security.protocol=SASL_PLAINTEXT"]));
    assert!(uses_gssapi(&[
        "security.protocol=sasl_ssl",
        "sasl.mechanisms=gssapi"
    ]));
    for other in ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"] {
        assert!(!uses_gssapi(&[
            "security.protocol=SASL_SSL",
            &format!("sasl.mechanism={other}")
        ]));
    }
    // The last one set wins, as in librdkafka.
    assert!(uses_gssapi(&[
        "security.protocol=SASL_SSL",
        "sasl.mechanism=PLAIN",
        "sasl.mechanisms=GSSAPI"
    ]));
    assert!(!uses_gssapi(&[
        "security.protocol=SASL_SSL",
        "security.protocol=PLAINTEXT"
    ]));
}

/// A value with commas survives the list's splitting: `debug=msg,topic`, a cipher list and a
/// password with `,x=y` in it stay whole, beside other properties; `\,` keeps a comma
/// whatever follows it.
#[test]
fn producer_property_values_may_hold_commas() {
    let properties = |given: &[&str]| {
        let options = RunOptions {
            // One element per --producer-property flag, or the environment variable's value.
            producer_property: given.iter().map(|p| p.to_string()).collect(),
            ..base()
        };
        resolve(options).unwrap().kafka.properties
    };
    let got = properties(&[
        "debug=msg,topic",
        "linger.ms=1,ssl.cipher.suites=A,B",
        "sasl.password=abc,def=ghi,batch.size=100",
        r"sasl.username=u\,acks=all,client.id=c\\d",
    ]);
    let get = |k: &str| {
        got.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("debug"), Some("msg,topic"));
    assert_eq!(get("linger.ms"), Some("1"));
    assert_eq!(get("ssl.cipher.suites"), Some("A,B"));
    assert_eq!(get("sasl.password"), Some("abc,def=ghi"));
    assert_eq!(get("batch.size"), Some("100"));
    assert_eq!(get("sasl.username"), Some("u,acks=all"));
    assert_eq!(get("client.id"), Some(r"c\d"));
    assert_eq!(get("acks"), None);
    // A trailing or doubled comma is nothing.
    let got = properties(&["linger.ms=2,", "batch.size=100,,acks=all"]);
    assert!(got.contains(&("linger.ms".into(), "2".into())), "{got:?}");
    assert!(
        got.contains(&("batch.size".into(), "100".into())),
        "{got:?}"
    );
    assert!(got.contains(&("acks".into(), "all".into())), "{got:?}");
}

/// The environment variable reaches the relay whole (clap does not cut it at commas), and a
/// property librdkafka refuses is named without a secret's value.
#[test]
fn producer_properties_from_the_environment_keep_a_password_whole_and_errors_hide_it() {
    use clap::Parser as _;
    let cli = crate::cli::Cli::try_parse_from([
        "outbox-relay",
        "run",
        "--producer-property",
        "sasl.password=p4ss,w0rd=x,linger.ms=5",
    ])
    .unwrap();
    let crate::cli::Command::Run(options) = cli.command else {
        panic!("run");
    };
    assert_eq!(options.producer_property.len(), 1);
    let settings = resolve(RunOptions {
        postgres_url: base().postgres_url,
        bootstrap_servers: base().bootstrap_servers,
        ..options
    })
    .unwrap();
    assert!(settings
        .kafka
        .properties
        .contains(&("sasl.password".into(), "p4ss,w0rd=x".into())));
    // An unknown key (perhaps a misspelt secret one) and a refused secret value.
    for given in [
        "sasl.pasword=hunter22",
        "security.protocol=SASL_SSL,ssl.key.pem=hunter22",
    ] {
        let err = resolve(RunOptions {
            producer_property: vec![given.into()],
            ..base()
        });
        if let Err(err) = err {
            let text = err.to_string();
            assert!(text.starts_with("producer-property:"), "{text}");
            assert!(!text.contains("hunter22"), "{text}");
        }
    }
    let error = rdkafka::error::KafkaError::ClientConfig(
        rdkafka::types::RDKafkaConfRes::RD_KAFKA_CONF_INVALID,
        "Invalid value \"hunter22\" for configuration property \"sasl.password\"".into(),
        "sasl.password".into(),
        "hunter22".into(),
    );
    let shown = client_config_error(&error);
    assert!(
        shown.contains("sasl.password") && !shown.contains("hunter22"),
        "{shown}"
    );
}

#[test]
fn on_server_rewind_defaults_to_refuse_comes_from_the_file_and_needs_cdc() {
    assert_eq!(
        resolve(base()).unwrap().cdc().unwrap().on_server_rewind,
        OnServerRewind::Refuse
    );
    let dir = tempdir();
    let path = dir.join("rewind.toml");
    std::fs::write(&path, "on-server-rewind = \"reread\"\n").unwrap();
    let s = resolve(RunOptions {
        config: Some(path),
        ..base()
    })
    .unwrap();
    assert_eq!(s.cdc().unwrap().on_server_rewind, OnServerRewind::Reread);
    let err = resolve(RunOptions {
        mode: Some(Mode::Polling),
        on_server_rewind: Some(OnServerRewind::AcceptGap),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("on-server-rewind:"), "{err}");
}

#[test]
fn the_canary_is_a_table_row_unless_a_message_is_asked_for_by_name() {
    let canary = |o: RunOptions| resolve(o).map(|s| s.cdc().unwrap().canary.clone());
    assert_eq!(canary(base()).unwrap().unwrap().method, CanaryMethod::Table);
    let message = canary(RunOptions {
        canary_method: Some(CanaryMethod::Message),
        ..base()
    });
    assert_eq!(message.unwrap().unwrap().method, CanaryMethod::Message);
    let err = resolve(RunOptions {
        canary_method: Some(CanaryMethod::Message),
        mode: Some(Mode::Polling),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("canary-method:"), "{err}");
    let err = resolve(RunOptions {
        canary_method: Some(CanaryMethod::Table),
        canary_interval: Some(0),
        ..base()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("canary-method:"), "{err}");
}

/// The snapshot and publication options are the slot's: polling refuses them by name, and
/// a fetch size of 0 rows is refused wherever it comes from.
#[test]
fn snapshot_and_publication_options_are_cdc_only() {
    for (key, options) in [
        (
            "snapshot-mode",
            RunOptions {
                snapshot_mode: Some(SnapshotMode::Initial),
                ..base()
            },
        ),
        (
            "snapshot-fetch-size",
            RunOptions {
                snapshot_fetch_size: std::num::NonZeroUsize::new(5),
                ..base()
            },
        ),
        (
            "publication-mode",
            RunOptions {
                publication_mode: Some(PublicationMode::Filtered),
                ..base()
            },
        ),
    ] {
        let err = resolve(RunOptions {
            mode: Some(Mode::Polling),
            ..options
        })
        .unwrap_err();
        assert!(err.to_string().starts_with(&format!("{key}:")), "{err}");
    }
    let err = RunOptions::from_flag("snapshot-fetch-size", "0").unwrap_err();
    assert!(err.contains("'0'"), "{err}");
    let err = toml::from_str::<RunOptions>("snapshot-fetch-size = 0").unwrap_err();
    assert!(
        err.to_string().contains("nonzero") || err.to_string().contains("zero"),
        "{err}"
    );
}
