//! The parsers of a Debezium configuration's options: each reads one option (or a group
//! that only makes sense together: a transform chain, a converter and its settings) into
//! outbox-relay's settings, or says why it cannot. The option catalog (`option_catalog.rs`) names which
//! parser each option goes through; `connector.rs` assembles what they made.

use super::options::{choice, flag, schemas_enable, Options};
use crate::secret::Secret;
use outbox_router::connect::{Converter, HeaderConverter, JsonConverter, TypeModes};
use outbox_router::{ListPattern, MessageConfig, SchemaFilter, TableName};

const EVENT_ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";
const DECODE_MESSAGE: &str =
    "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";

/// Kafka Connect's `errors.*` options (see [`outbox_router::ErrorHandling`]): a record a
/// transform or converter fails on is never dropped; with `errors.tolerance=all` and a
/// dead-letter queue it goes there as Connect writes records there.
pub(super) fn error_handling(
    o: &Options,
    connector: &str,
) -> Result<outbox_router::ErrorHandling, String> {
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
pub(super) fn topic_creation(o: &Options) -> Result<crate::config::TopicCreation, String> {
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
pub(super) fn refuse_byte_changing_options(o: &Options, w: Option<&Options>) -> Result<(), String> {
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
    is("schema.name.adjustment.mode", &["none", "avro"])?;
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

/// The connector options that change how columns are typed and written.
pub(super) fn type_modes(o: &Options, w: Option<&Options>) -> Result<TypeModes, String> {
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

pub(super) fn postgres_url(o: &Options) -> Result<Secret, String> {
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
pub(super) fn outbox_tables(
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

/// Debezium's schema filter (`schema.include.list`, or `schema.exclude.list`; their 1.x
/// names `schema.whitelist`, `schema.blacklist`): a table is captured only where its schema
/// passes it too. An outbox table named in `table.include.list` whose schema it leaves out
/// would have Debezium capture none of its rows: refused, naming the option. The table
/// patterns come back taking only the tables of the schemas it passes.
pub(super) fn schema_filter(
    o: &Options,
    tables: &[TableName],
    patterns: Vec<ListPattern>,
) -> Result<Vec<ListPattern>, String> {
    // A blank list is no filter (Debezium's Selectors).
    let find = |keys: [&'static str; 2]| {
        keys.into_iter()
            .find_map(|k| o.get(k).filter(|v| !v.trim().is_empty()).map(|v| (k, v)))
    };
    let include = find(["schema.include.list", "schema.whitelist"]);
    let exclude = find(["schema.exclude.list", "schema.blacklist"]);
    let list = |key: &str, value: &str| -> Result<Vec<ListPattern>, String> {
        split_regex_list(value)
            .iter()
            .map(|p| ListPattern::new(p).map_err(|e| format!("{key}: {e}")))
            .collect()
    };
    let (key, value, filter) = match (include, exclude) {
        (None, None) => return Ok(patterns),
        (Some((a, _)), Some((b, _))) => {
            return Err(format!(
                "{a} and {b} cannot both be set (Debezium refuses them together too); keep one"
            ))
        }
        (Some((key, value)), None) => (key, value, SchemaFilter::Include(list(key, value)?)),
        (None, Some((key, value))) => (key, value, SchemaFilter::Exclude(list(key, value)?)),
    };
    if let Some(table) = tables.iter().find(|t| !filter.accepts(&t.schema)) {
        return Err(format!(
            "{key}={value:?} leaves out the schema of the outbox table {}.{}: Debezium would capture none of \
             its rows; add {} to it, or remove the option",
            table.schema, table.name, table.schema
        ));
    }
    let filter = std::sync::Arc::new(filter);
    Ok(patterns
        .into_iter()
        .map(|p| p.within(filter.clone()))
        .collect())
}

/// Logical decoding messages, relayed when the transform chain decodes them before the
/// EventRouter (`DecodeLogicalDecodingMessageContent`, as Debezium documents it), filtered
/// by `message.prefix.include.list` / `exclude.list` (Debezium's `LogicalDecodingMessageFilter`).
pub(super) fn messages(o: &Options, decode: Option<&str>) -> Result<Option<MessageConfig>, String> {
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

/// Every predicate class outbox-relay applies.
pub const PREDICATES: &[&str] = &[
    "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
    "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
];

/// The names `predicates` declares.
fn declared_predicates(o: &Options) -> Vec<String> {
    o.get("predicates")
        .map(outbox_router::transforms::connect_list)
        .unwrap_or_default()
}

/// The predicate of transform `alias` (`transforms.<alias>.predicate`, one of `declared`)
/// and its `negate`, if it has one.
fn step_predicate(
    o: &Options,
    alias: &str,
    declared: &[String],
) -> Result<Option<(outbox_router::transforms::Predicate, bool)>, String> {
    use outbox_router::transforms::Predicate;
    let key = |name: &str| format!("transforms.{alias}.{name}");
    Ok(match o.get(&key("predicate")) {
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
    })
}

/// What the EventRouter's own predicate (`transforms.<router>.predicate`, as Debezium's
/// documentation shows it, to route only the outbox table's records) lets through. A record
/// it does not match skips the EventRouter and reaches Kafka as the raw record: for an outbox
/// row Debezium's change event, which outbox-relay does not write. So the predicate is
/// accepted where it matches every change event of every outbox table (topic
/// `<topic.prefix>.<schema>.<table>`), the tombstones Debezium writes there after a DELETE
/// (`tombstones.on.delete`, unless deletes are skipped), and, with logical decoding messages,
/// the decoded messages (`<topic.prefix>.message`): then the EventRouter sees what it sees
/// without the predicate. The connector's other records (heartbeats, transaction metadata)
/// pass the EventRouter unchanged either way.
/// What the EventRouter's predicate is checked against: the connector's outbox tables (by
/// name, or patterns), its topic prefix, the operations it skips, whether it decodes messages.
pub(super) struct RoutedSources<'a> {
    pub tables: &'a [TableName],
    pub table_patterns: &'a [ListPattern],
    pub topic_prefix: &'a str,
    pub skipped: &'a [String],
    pub messages: bool,
}

pub(super) fn router_predicate(
    o: &Options,
    router: &str,
    d: &RoutedSources<'_>,
) -> Result<(), String> {
    use outbox_router::transforms::Predicate;
    let key = format!("transforms.{router}.predicate");
    o.get(&format!("transforms.{router}.negate"));
    let Some((predicate, negate)) = step_predicate(o, router, &declared_predicates(o))? else {
        return Ok(());
    };
    let name = o.get(&key).unwrap_or_default();
    let matches = |topic: &str, tombstone: bool| -> Result<bool, String> {
        let hit = match &predicate {
            Predicate::TopicNameMatches(regex) => regex.is_match(topic),
            Predicate::RecordIsTombstone => tombstone,
            Predicate::HasHeaderKey(_) => {
                return Err(format!(
                    "{key}: {name} (HasHeaderKey) on the EventRouter is not supported: which headers a change event \
                     carries is not known before it is made; route the outbox's records with TopicNameMatches on \
                     its topic, {topic}"
                ))
            }
        };
        Ok(hit != negate)
    };
    if !d.table_patterns.is_empty() {
        return Err(format!(
            "{key}: a predicate on the EventRouter needs the outbox tables named in table.include.list (their \
             topics are checked against it); patterns are not"
        ));
    }
    let tombstones = flag(o, "tombstones.on.delete", true)? && !d.skipped.iter().any(|s| s == "d");
    let shown = if negate {
        format!("{name} (negate=true)")
    } else {
        name.to_owned()
    };
    for table in d.tables {
        let topic = outbox_router::change_event_topic(d.topic_prefix, &table.schema, &table.name);
        if !matches(&topic, false)? {
            return Err(format!(
                "{key}: {shown} does not match {topic}, the change events of the outbox table {}.{}: Debezium \
                 would write them there unrouted, which outbox-relay does not do; make it match {topic}",
                table.schema, table.name
            ));
        }
        if tombstones && !matches(&topic, true)? {
            return Err(format!(
                "{key}: {shown} does not match the tombstones Debezium writes to {topic} after a DELETE of an \
                 outbox row, which would reach {topic} unrouted; set tombstones.on.delete=false, or make it match them"
            ));
        }
    }
    if d.messages {
        let topic = format!("{}.message", d.topic_prefix);
        if !matches(&topic, false)? {
            return Err(format!(
                "{key}: {shown} does not match {topic}, the logical decoding messages: Debezium would write them \
                 there unrouted, which outbox-relay does not do; make it match {topic}"
            ));
        }
    }
    Ok(())
}

/// The transforms before or after the EventRouter, in order, with their predicates (Kafka Connect's
/// `transforms.<alias>.predicate` naming one of `predicates`, and `negate`).
pub(super) fn transform_chain(
    o: &Options,
    aliases: &[String],
) -> Result<outbox_router::transforms::Chain, String> {
    use outbox_router::transforms::{Chain, Step};
    let mut steps = Vec::new();
    let declared = declared_predicates(o);
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
        let predicate = step_predicate(o, alias, &declared)?;
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

/// Whether `class` is one of Kafka Connect's transforms outbox-relay applies (before or
/// after the EventRouter).
fn kafka_transform(class: &str) -> bool {
    outbox_router::transforms::lookup(class).is_some()
}

/// The alias of the one EventRouter transform, of the `DecodeLogicalDecodingMessageContent`
/// transform before it, if any, and of the transforms after it (Kafka Connect's own, see
/// [`transform_chain`]).
pub(super) fn event_router(o: &Options) -> Result<RouterAliases, String> {
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
    let mut before = Vec::new();
    let mut after = Vec::new();
    for alias in aliases {
        let key = format!("transforms.{alias}.type");
        match o.get(&key) {
            Some(class) if router.is_some() && kafka_transform(class) => {
                after.push(alias.to_owned());
                continue;
            }
            Some(class) if kafka_transform(class) => {
                before.push(alias.to_owned());
                continue;
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
                     {DECODE_MESSAGE} before it), and before or after it {}",
                    outbox_router::transforms::supported_classes().join(", ")
                ))
            }
            None => return Err(format!("{key} is missing")),
        }
        // The EventRouter's predicate is read with the others (see `router_predicate`).
        if decode.as_deref() == Some(alias) {
            o.get(&format!("transforms.{alias}.negate"));
            if o.get(&format!("transforms.{alias}.predicate")).is_some() {
                return Err(format!(
                    "transforms.{alias}.predicate: a predicate on {DECODE_MESSAGE} is not supported (the messages it \
                     would not decode reach the EventRouter undecoded)"
                ));
            }
        }
    }
    let router = router.ok_or_else(|| format!("transforms: none of {list:?} is {EVENT_ROUTER}"))?;
    if let (Some(decode), Some(first)) = (&decode, before.first()) {
        return Err(format!(
            "transforms.{first}: transforms before the EventRouter are not supported together with {DECODE_MESSAGE} \
             (transforms.{decode})"
        ));
    }
    Ok(RouterAliases {
        router,
        decode,
        before,
        after,
    })
}

/// The aliases of `transforms`: the EventRouter's, `DecodeLogicalDecodingMessageContent`'s
/// before it, Kafka Connect's transforms before and after it.
pub(super) struct RouterAliases {
    pub router: String,
    pub decode: Option<String>,
    pub before: Vec<String>,
    pub after: Vec<String>,
}

/// Every converter class `converter_class` takes for keys and values.
pub const CONVERTERS: &[&str] = &[
    "org.apache.kafka.connect.json.JsonConverter",
    "org.apache.kafka.connect.storage.StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter",
    "io.debezium.converters.BinaryDataConverter",
    "io.debezium.converters.ByteBufferConverter",
    outbox_router::connect::cloudevents::CLASS,
    "io.confluent.connect.avro.AvroConverter",
    "io.apicurio.registry.utils.converter.AvroConverter",
    "io.confluent.connect.json.JsonSchemaConverter",
    "io.confluent.connect.protobuf.ProtobufConverter",
];

/// Every header converter class `header_converter` takes.
pub const HEADER_CONVERTERS: &[&str] = &[
    "org.apache.kafka.connect.storage.SimpleHeaderConverter",
    "org.apache.kafka.connect.json.JsonConverter",
    "org.apache.kafka.connect.storage.StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter",
    "io.debezium.converters.BinaryDataConverter",
    "io.debezium.converters.ByteBufferConverter",
];

/// The converter `class` configured under `key` (`value.converter`…), with the
/// JsonConverter settings read from the same configuration.
fn converter_class(class: &str, key: &str, options: &Options) -> Result<Converter, String> {
    match class {
        "org.apache.kafka.connect.json.JsonConverter" => Ok(Converter::Json(JsonConverter {
            schemas_enable: schemas_enable(options, key)?.unwrap_or(true),
            replace_null_with_default: flag(
                options,
                &format!("{key}.replace.null.with.default"),
                true,
            )?,
        })),
        "org.apache.kafka.connect.storage.StringConverter" => Ok(Converter::String),
        "org.apache.kafka.connect.converters.ByteArrayConverter" => Ok(Converter::ByteArray),
        // Debezium's: bytes as they are, anything else through its delegate, configured
        // under `<key>.delegate.converter.type` (the class) and `.delegate.converter.type.*`.
        // ByteBufferConverter: its name until Debezium 2.0 renamed it.
        "io.debezium.converters.BinaryDataConverter" | "io.debezium.converters.ByteBufferConverter" => {
            use outbox_router::connect::Delegate;
            let delegate_key = format!("{key}.delegate.converter.type");
            let delegate = match options.get(&delegate_key) {
                None => None,
                Some(class) => Some(match converter_class(class, &delegate_key, options)? {
                    Converter::Json(json) => Delegate::Json(json),
                    Converter::String => Delegate::String,
                    Converter::ByteArray => Delegate::ByteArray,
                    // Kafka Connect configures a header converter without its options
                    // (`configure(Map)`), so a BinaryDataConverter there never has a delegate
                    // in Debezium; a registry delegate, which needs a topic, is refused.
                    Converter::Avro(_) | Converter::JsonSchema(_) | Converter::Protobuf(_)
                        if key == "header.converter" =>
                    {
                        return Err(format!(
                            "{delegate_key}: a header converter's BinaryDataConverter is not given its delegate by Kafka \
                             Connect, and a schema-registry converter writes only record keys and values"
                        ))
                    }
                    registry @ (Converter::Avro(_)
                    | Converter::JsonSchema(_)
                    | Converter::Protobuf(_)) => Delegate::Registry(Box::new(registry)),
                    Converter::BinaryData { .. } | Converter::CloudEvents(_) => {
                        return Err(format!(
                            "{delegate_key}: a BinaryDataConverter delegates to JsonConverter, StringConverter, \
                             ByteArrayConverter or a schema-registry converter (Avro, JSON Schema, Protobuf)"
                        ))
                    }
                }),
            };
            Ok(Converter::BinaryData { delegate })
        }
        "io.confluent.connect.avro.AvroConverter"
        | "io.apicurio.registry.utils.converter.AvroConverter"
        | outbox_router::connect::cloudevents::CLASS
        | "io.confluent.connect.json.JsonSchemaConverter"
        | "io.confluent.connect.protobuf.ProtobufConverter"
            if key == "header.converter" =>
        {
            Err(format!(
                "{key}: {class} is not a HeaderConverter (Kafka Connect refuses it there too); it converts keys and values"
            ))
        }
        outbox_router::connect::cloudevents::CLASS => super::converters::cloudevents::converter(key, options)
            .map(|c| Converter::CloudEvents(Box::new(c))),
        "io.confluent.connect.avro.AvroConverter" => {
            super::converters::avro::confluent(key, options).map(|c| Converter::Avro(std::sync::Arc::new(c)))
        }
        "io.apicurio.registry.utils.converter.AvroConverter" => {
            super::converters::avro::apicurio(key, options).map(|c| Converter::Avro(std::sync::Arc::new(c)))
        }
        "io.confluent.connect.json.JsonSchemaConverter" => super::converters::json_schema::confluent(key, options)
            .map(|c| Converter::JsonSchema(std::sync::Arc::new(c))),
        "io.confluent.connect.protobuf.ProtobufConverter" => super::converters::protobuf::confluent(key, options)
            .map(|c| Converter::Protobuf(std::sync::Arc::new(c))),
        other => Err(format!(
            "{key}: {other} is not supported; outbox-relay writes what JsonConverter, StringConverter, \
             ByteArrayConverter, Debezium's BinaryDataConverter or CloudEventsConverter, a schema-registry \
             AvroConverter (Confluent's, Apicurio's) or Confluent's JsonSchemaConverter or ProtobufConverter would"
        )),
    }
}

/// `key.converter` / `value.converter`: the connector's, else the worker's, else
/// JsonConverter with schemas (Kafka Connect's stock worker configuration).
pub(super) fn converter(
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
        describe_converter(&converter)
    ));
    // BinaryDataConverter hands its delegate only `<key>.delegate.converter.type.*`: a
    // JsonConverter option under the converter's own name is not read, by Debezium either.
    if let Converter::BinaryData { .. } = converter {
        for option in ["schemas.enable", "replace.null.with.default"] {
            let name = format!("{key}.{option}");
            if let Some(value) = options.get(&name) {
                notes.push(format!(
                    "{name}={value} does not apply: BinaryDataConverter reads its delegate's options under \
                     {key}.delegate.converter.type.{option}, as Debezium does"
                ));
            }
        }
    }
    Ok(converter)
}

/// What a converter's note says of its settings, after its class.
fn describe_converter(converter: &Converter) -> String {
    match converter {
        Converter::Avro(avro) => super::converters::avro::describe(avro),
        Converter::JsonSchema(json) => super::converters::json_schema::describe(json),
        Converter::Protobuf(proto) => super::converters::protobuf::describe(proto),
        Converter::Json(JsonConverter {
            schemas_enable,
            replace_null_with_default,
        }) => format!(
            ", schemas.enable={schemas_enable}{}",
            if *replace_null_with_default {
                ""
            } else {
                ", replace.null.with.default=false"
            }
        ),
        Converter::BinaryData { delegate: None } => {
            ": bytes as they are, a value that is not bytes refused (no delegate.converter.type)"
                .into()
        }
        Converter::BinaryData {
            delegate: Some(delegate),
        } => {
            let delegate = delegate.converter();
            format!(
                ": bytes as they are, anything else through {}{}",
                delegate.class(),
                describe_converter(&delegate)
            )
        }
        _ => String::new(),
    }
}

pub(super) fn header_converter(
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
