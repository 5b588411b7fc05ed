//! Debezium itself as the oracle: the same database, the same WAL, the same connector JSON
//! through Kafka Connect + Debezium 3.6.1 (its PostgreSQL connector, EventRouter and Kafka's
//! converters; `scripts/install-debezium.sh`) and through `outbox-relay connect`, each to a
//! broker of its own. Every record is compared: topic, key bytes, value bytes, headers (names,
//! order, bytes). The one value that differs by design, `__debezium.context.runId` (a UUID per
//! process), is checked by its shape.
//!
//! Cases are generated from a seed: the outbox table's column types (id, key, payload, extra
//! columns placed as headers or in the envelope), the EventRouter's options, the converters,
//! the handling modes, snapshot or not, and rows with NULLs, Unicode, big and special numbers,
//! tombstones and JSON payloads of every shape. The seeds run by default are fixed;
//! `OUTBOX_RELAY_DIFF_SEEDS=a,b,c` runs others, `OUTBOX_RELAY_DIFF_CASES=n` sets the cases per
//! seed. A failure prints the seed and the case. In every family a fifth of the cases put a
//! predicate on the EventRouter itself (`TopicNameMatches` on the outbox's topics, the
//! connector's prefix, or Debezium's heartbeat pattern negated; see `router_predicate`).
//!
//! Four families of cases follow the plain ones in each seed (`OUTBOX_RELAY_DIFF_AVRO_CASES=n`,
//! `OUTBOX_RELAY_DIFF_FILTER_CASES=n`, `OUTBOX_RELAY_DIFF_PROTOBUF_CASES=n`,
//! `OUTBOX_RELAY_DIFF_BEFORE_CASES=n`, one each by default; numbered from 100, 200, 300 and
//! 400):
//! - Avro: the same generated cases with Confluent's `io.confluent.connect.avro.AvroConverter`
//!   7.0.16 as value (and for some key) converter, on Debezium's plugin path
//!   (`scripts/install-registry-converters.sh`), against one Apicurio Registry 2.6.13 both
//!   sides use, each through a recording front: the subject name strategies,
//!   `auto.register.schemas`, `connect.meta.data` drawn; half the bytea cases keep their
//!   `BinaryDataConverter` with the AvroConverter as its delegate (its jars then beside
//!   Debezium's, as a deployment puts them in Debezium's plugin directory). Both sides register the same schemas
//!   under the same subjects (the topics are the same), so the records, schema ids included,
//!   are compared byte for byte, and so are the (subject, schema text) pairs each side sent
//!   the registry. Apicurio's `io.apicurio.registry.utils.converter.AvroConverter` (installed
//!   beside it) writes a quarter of them (`OUTBOX_RELAY_DIFF_APICURIO=0` leaves it out; see
//!   `avro_family`; its id cache's `check-period-ms` is set to an hour, as when it expires
//!   depends on each process's clock). `OUTBOX_RELAY_DIFF_REGISTRY_LOG=dir` writes each
//!   side's registry requests there; `OUTBOX_RELAY_DIFF_SHOW=s7c101` prints a case's SQL and
//!   options; `OUTBOX_RELAY_DIFF_ONLY=s7c101,s8c103` runs only those of the cases drawn.
//! - Filter: Kafka's `Filter` after the EventRouter under a `TopicNameMatches`, `HasHeaderKey`
//!   or `RecordIsTombstone` predicate, negated or not; the records each case expects are
//!   decided row by row, so that a side that drops too much or too little fails.
//! - Before: Kafka Connect's transforms before the EventRouter, on each row's change event:
//!   its row image, key, `op` and blocks copied or moved into headers, blocks dropped, a field
//!   added, the key replaced (see `before_family`).
//! - Protobuf: Confluent's `io.confluent.connect.protobuf.ProtobufConverter` 7.0.16 as value
//!   (and for half key) converter, on the same plugin path and registry as the Avro family,
//!   compared the same way (schema ids, message indexes, registrations): the subject name
//!   strategies, `optional.for.nullables`, `wrapper.for.nullables`, `scrub.invalid.names`
//!   (with names left as generated for it to scrub), options that change only what is read
//!   back, a topic prefix no Protobuf package takes with `schema.name.adjustment.mode` drawn
//!   (see `protobuf_family`).
//!
//! In both registry families, `auto.register.schemas=false` (with `use.latest.version=true`
//! for half) is drawn for some Confluent converters. For most of them (a draw of its own,
//! `unregistered`), the schemas the case needs are registered beforehand, as a user would,
//! under the subjects its strategy names, straight to the registry (through neither front),
//! before either side starts: both sides find them, and their records, schema ids included,
//! are compared byte for byte. The schemas are Debezium's, not the relay's: a run with
//! `OUTBOX_RELAY_DIFF_LEARN=1` lets those converters register themselves and writes what
//! Debezium's converter sent (`POST /subjects/{s}/versions`, in order) to
//! `tests/debezium_differential_registered.json`, which the other runs replay (learned for the
//! seeds 20261125, 7, 424242, 1–6, 8, 10, 21 and 52 with four cases in each registry family:
//! the default run's cases draw no such converter; README gives the run that compares the
//! twelve such cases). So a schema
//! text the relay got wrong is not hidden: its look-up (`POST /subjects/{s}`) finds nothing
//! where Debezium's finds the schema, and the records differ. Confluent 7.0.16 (its
//! `AbstractKafkaAvroSerializer` and `AbstractKafkaProtobufSerializer`, read with `javap`):
//! with `auto.register.schemas=false` alone it looks its schema up under the subject and
//! writes that id; with `use.latest.version=true` it takes the subject's latest version (GET
//! `…/versions/latest`), checks (`latest.compatibility.strict`, true by default) that it is
//! backward compatible with the record's schema, asks that schema's id under the subject (a
//! look-up of the latest schema's text), and writes the record with the latest schema. The
//! relay takes the id the latest version's answer holds and writes with its own schema: the
//! same bytes while the latest version writes the record's own bytes: the record's schema, or
//! (in half the Avro cases where every look-up reads the latest version, `with_doc`) that
//! schema registered with a doc, another text and id with the same Parsing Canonical Form (the
//! look-up of the latest schema only Debezium sends is allowed for in the registrations
//! compared). A subject whose latest version writes other bytes is not drawn: there Confluent
//! fails where that schema is not backward compatible ("Incompatible schema …") and otherwise
//! writes the record converted to it, where the relay, which writes a record only with its own
//! schema, dead-letters it (README says so; `tests/schema_registry.rs` checks it). Cases the fixture does not hold (seeds never learned; a case where Debezium's task
//! dies on something else) keep the variant with nothing registered: the registry finds no
//! subject (40401), Debezium's task dies on the case's first record, and the relay must
//! dead-letter each record with the registry's message, as README documents. A case whose
//! schemas were registered beforehand and whose Debezium converter still meets a registry
//! refusal is a difference. So must the relay dead-letter where Apicurio's ccompat API refuses
//! a schema (42201 "Failed to discover artifact type from content" for a top-level union, the
//! Avro schema of an optional bytea or scalar payload, `["null","bytes"]`), and where
//! Confluent's `ProtobufData` fails with a NullPointerException (a null in an array, a
//! tombstone hoisted by HoistField).

mod common;

use common::RELAY;
use outbox_relay_testkit::apicurio::{RecordedRequest, RecordingProxy, Registry};
use outbox_relay_testkit::debezium::{registry_converters, ConnectStandalone};
use outbox_relay_testkit::{Broker, ConsumedRecord, PgCluster, RelayProcess, Storage};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const DEFAULT_SEEDS: &[u64] = &[20261125, 7, 424242];
const DEFAULT_CASES: usize = 8;
/// The cases per seed of each family beside the plain one (Avro, Filter, Protobuf).
const DEFAULT_FAMILY_CASES: usize = 1;
const DEAD_LETTER_TOPIC: &str = "outbox-relay.dlq";
const DECODE_MESSAGE: &str =
    "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";

/// The topics compared record by record: not the broker's own, not heartbeats (compared by
/// shape).
fn compared_topic(name: &str) -> bool {
    !name.starts_with("__")
}

/// The database of the cases with logical decoding messages. A slot receives every message
/// written in its database, whatever its publication: Debezium writes them raw to
/// `<topic.prefix>.message` where its chain does not decode them (outbox-relay ignores them
/// there, as README says), and counts them in its transaction metadata under a name it cannot
/// reproduce. The cases without messages stay out of their way in `postgres`.
const MESSAGES_DB: &str = "diff_messages";

/// splitmix64: the same cases from the same seed on every machine and every version of
/// every crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn text<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    /// A generator of its own for one family of choices (`salt`) of a case: seed and index
    /// multiplied apart (XORed into the state, neighbouring cases' draws come out related).
    fn stream(seed: u64, index: usize, salt: u64) -> Rng {
        Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
            ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ salt.rotate_left(40))
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// SQL text of a string literal.
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

const STRINGS: &[&str] = &[
    "plain",
    "Zürich – café",
    "日本語のテキスト",
    "emoji 🚀🎉",
    "quote \" and backslash \\ and tab \t",
    "",
    "line\nbreak",
    "  padded  ",
];

/// A JSON document of some shape (object, array, scalar, nested, big numbers, Unicode).
fn json_doc(rng: &mut Rng, depth: u32) -> Value {
    match rng.below(if depth > 1 { 5 } else { 8 }) {
        0 => json!(rng.pick(STRINGS)),
        1 => json!(*rng.pick(&[0i64, -1, 42, i64::MAX, i64::MIN, 9_007_199_254_740_993])),
        2 => json!(*rng.pick(&[1.5f64, -0.25, 1e21, 1_234.567_890_123_4, 1e-7])),
        3 => json!(*rng.pick(&[true, false])),
        4 => Value::Null,
        5 => {
            let n = rng.below(4);
            Value::Array((0..n).map(|_| json_doc(rng, depth + 1)).collect())
        }
        _ => {
            let mut m = Map::new();
            for i in 0..rng.below(5) {
                let key = rng.pick(&["k", "ключ", "a b", "n"]);
                // Avro names are ASCII letters, digits and `_` (AvroData refuses others):
                // the Avro cases' documents take the same draws under such names.
                let key = match (AVRO_NAMES.get(), *key) {
                    (true, "ключ") => "kljuch",
                    (true, "a b") => "a_b",
                    (_, key) => key,
                };
                let key = format!("{key}{i}");
                m.insert(key, json_doc(rng, depth + 1));
            }
            Value::Object(m)
        }
    }
}

thread_local! {
    /// Set while an Avro case is generated: its JSON documents' names are Avro names.
    static AVRO_NAMES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A JSON payload as PostgreSQL text: serde's compact text, or with spaces (jsonb
/// normalises it; json and text keep it as written).
fn json_text(rng: &mut Rng) -> String {
    let mut doc = json_doc(rng, 0);
    if rng.chance(60) {
        // Most outboxes hold objects.
        let mut m = Map::new();
        m.insert("id".into(), json!(rng.below(1000)));
        m.insert("data".into(), doc);
        doc = Value::Object(m);
    }
    if rng.chance(50) {
        serde_json::to_string_pretty(&doc).unwrap()
    } else {
        doc.to_string()
    }
}

/// An extra column: its SQL type, a value generator, and the handling-mode option that
/// changes how Debezium types it.
struct Extra {
    sql: &'static str,
    value: fn(&mut Rng) -> String,
    mode: Option<(&'static str, &'static [&'static str])>,
}

const DECIMAL: Option<(&str, &[&str])> =
    Some(("decimal.handling.mode", &["precise", "double", "string"]));
const TIME: Option<(&str, &[&str])> = Some((
    "time.precision.mode",
    &[
        "adaptive",
        "adaptive_time_microseconds",
        "connect",
        "isostring",
    ],
));

const EXTRAS: &[Extra] = &[
    Extra {
        sql: "integer",
        value: |r| {
            r.pick(&["0", "-2147483648", "2147483647", "17"])
                .to_string()
        },
        mode: None,
    },
    Extra {
        sql: "bigint",
        value: |r| {
            r.pick(&["9223372036854775807", "-9223372036854775808", "1"])
                .to_string()
        },
        mode: None,
    },
    Extra {
        sql: "smallint",
        value: |r| r.pick(&["-32768", "32767", "5"]).to_string(),
        mode: None,
    },
    Extra {
        sql: "numeric(10,2)",
        value: |r| lit(r.text(&["12345678.90", "-0.01", "0.00", "7.5"])),
        mode: DECIMAL,
    },
    Extra {
        sql: "numeric",
        value: |r| lit(r.text(&["1234567890.123456789", "0", "-100", "0.000001"])),
        mode: DECIMAL,
    },
    Extra {
        sql: "double precision",
        value: |r| lit(r.text(&["1.5", "-2.25", "1e300", "0.1"])),
        mode: None,
    },
    Extra {
        sql: "real",
        value: |r| lit(r.text(&["1.5", "-2.25", "3.4e38"])),
        mode: None,
    },
    Extra {
        sql: "boolean",
        value: |r| r.pick(&["true", "false"]).to_string(),
        mode: None,
    },
    Extra {
        sql: "varchar(255)",
        value: |r| lit(r.text(STRINGS)),
        mode: None,
    },
    Extra {
        sql: "text",
        value: |r| lit(r.text(STRINGS)),
        mode: None,
    },
    Extra {
        sql: "timestamptz",
        value: |r| {
            lit(r.text(&[
                "2026-03-04 05:06:07.123456+02",
                "1999-12-31 23:59:59+00",
                "2026-11-25 00:00:00Z",
            ]))
        },
        mode: TIME,
    },
    Extra {
        sql: "timestamptz(3)",
        value: |r| lit(r.text(&["2026-03-04 05:06:07.12+00", "2000-01-01 00:00:00+05:30"])),
        mode: TIME,
    },
    Extra {
        sql: "timestamp",
        value: |r| {
            lit(r.text(&[
                "2026-03-04 05:06:07.123456",
                "1970-01-01 00:00:00",
                "infinity",
            ]))
        },
        mode: TIME,
    },
    Extra {
        sql: "timetz",
        value: |r| lit(r.text(&["13:51:30.123789+02", "00:00:00+00", "23:59:59-05:30"])),
        mode: TIME,
    },
    Extra {
        sql: "bit(3)",
        value: |r| r.pick(&["B'101'", "B'000'", "B'111'"]).to_string(),
        mode: Some(("binary.handling.mode", &["bytes", "base64", "hex"])),
    },
    Extra {
        sql: "positive_amount",
        value: |r| lit(r.text(&["12.30", "0.01", "99999999.99"])),
        mode: DECIMAL,
    },
    Extra {
        sql: "timestamp(3)",
        value: |r| lit(r.text(&["2026-03-04 05:06:07.123", "2038-01-19 03:14:08"])),
        mode: TIME,
    },
    Extra {
        sql: "date",
        value: |r| lit(r.text(&["2026-03-04", "1970-01-01", "0044-03-15 BC", "9999-12-31"])),
        mode: TIME,
    },
    Extra {
        sql: "time",
        value: |r| lit(r.text(&["13:14:15.123456", "00:00:00", "23:59:59.999999"])),
        mode: TIME,
    },
    Extra {
        sql: "time(3)",
        value: |r| lit(r.text(&["13:14:15.123", "00:00:01"])),
        mode: TIME,
    },
    Extra {
        sql: "interval",
        value: |r| {
            lit(r.text(&[
                "1 year 2 mons 3 days 04:05:06.78",
                "-1 day",
                "00:00:00.000001",
            ]))
        },
        mode: Some(("interval.handling.mode", &["numeric", "string"])),
    },
    Extra {
        sql: "uuid",
        value: |r| {
            lit(r.text(&[
                "6b1c0e4e-0000-4000-8000-000000000001",
                "00000000-0000-0000-0000-000000000000",
            ]))
        },
        mode: None,
    },
    Extra {
        sql: "bytea",
        value: |r| {
            r.pick(&["'\\x00ff10'", "'\\x'", "'\\x68656c6c6f'"])
                .to_string()
        },
        mode: Some(("binary.handling.mode", &["bytes", "base64", "hex"])),
    },
    Extra {
        sql: "jsonb",
        value: |r| lit(&json_text(r)),
        mode: None,
    },
    Extra {
        sql: "money",
        value: |r| lit(r.text(&["12.34", "-0.01", "92233720368547758.07", "0"])),
        mode: DECIMAL,
    },
    Extra {
        sql: "integer[]",
        value: |r| lit(r.text(&["{1,2,3}", "{}", "{-2147483648,NULL,7}"])),
        mode: None,
    },
    Extra {
        sql: "text[]",
        value: |r| lit(r.text(&["{a,\"b c\",ключ}", "{}", "{\"\",NULL}"])),
        mode: None,
    },
    Extra {
        sql: "hstore",
        value: |r| lit(r.text(&["a=>1, b=>NULL", "", "\"k e y\"=>\"ключ\""])),
        mode: Some(("hstore.handling.mode", &["json", "map"])),
    },
    Extra {
        sql: "ltree",
        value: |r| lit(r.text(&["Top.Science.Astronomy", "a", ""])),
        mode: None,
    },
    Extra {
        sql: "citext",
        value: |r| lit(r.text(&["MiXeD Case", "ß", ""])),
        mode: None,
    },
    Extra {
        sql: "inet",
        value: |r| lit(r.text(&["192.168.0.1/24", "::1", "10.0.0.1"])),
        mode: None,
    },
    Extra {
        sql: "macaddr",
        value: |r| lit(r.text(&["08:00:2b:01:02:03", "00:00:00:00:00:00"])),
        mode: None,
    },
    Extra {
        sql: "diff_mood",
        value: |r| lit(r.text(&["happy", "sad", "so-so"])),
        mode: None,
    },
];

/// What the generated extra columns need in the database, made once.
const EXTRA_TYPES: &str = "CREATE EXTENSION IF NOT EXISTS citext; CREATE EXTENSION IF NOT EXISTS hstore; \
     CREATE EXTENSION IF NOT EXISTS ltree; CREATE TYPE diff_mood AS ENUM ('happy', 'sad', 'so-so'); \
     CREATE DOMAIN diff_amount AS numeric(10,2); \
     CREATE DOMAIN positive_amount AS diff_amount CHECK (VALUE > 0);";

struct Case {
    seed: u64,
    index: usize,
    table: String,
    ddl: String,
    before: Vec<String>,
    after: Vec<String>,
    config: Map<String, Value>,
    /// Records Debezium writes: one per row it reads, one per accepted message, a BEGIN and
    /// an END per transaction with metadata.
    expected: usize,
    /// Where heartbeat records go, when the case has them (compared by shape: their number
    /// and `ts_ms` depend on time).
    heartbeat_topic: Option<String>,
    /// Whether records carry the event's timestamp (`table.field.event.timestamp`); if not,
    /// the time each side read the event.
    timestamp: bool,
    /// What was chosen, for messages.
    describe: String,
    /// The events each side turns into records, in no particular order: the rows read
    /// (snapshot and streamed inserts) and the accepted messages.
    events: Vec<Event>,
    /// The transaction metadata records (a BEGIN and an END per streamed transaction).
    transaction_records: usize,
    /// Whether a NULL payload makes a tombstone (`route.tombstone.on.empty.payload`).
    tombstones: bool,
    /// Registry URLs in the configuration are the placeholders `{ccompat}` and `{apicurio}`.
    avro: bool,
    /// Converters under `auto.register.schemas=false` whose schemas are registered beforehand,
    /// as a user would, from what Debezium registered for the case (see `PREREGISTERED`).
    preregistered: bool,
    /// Its Avro schemas are registered beforehand with a doc added (see [`with_doc`]): every
    /// converter that does not register reads the latest version (`use.latest.version`).
    latest_documented: bool,
}

/// A row or message as the EventRouter sees it: what a Filter's predicate asks of its record.
#[derive(Clone, Copy, Debug)]
struct Event {
    /// Routed to the case's `…Customer` topic (else `…Order`).
    customer: bool,
    payload_null: bool,
    /// Its payload is one that `table.expand.json.payload` types and an Avro schema holds
    /// (see [`avro_expandable`]).
    expandable: bool,
}

/// A JSON payload that the EventRouter expands into a Struct that Avro takes: an object
/// whose arrays are non-empty and hold scalars of one type. Others fail Debezium's task
/// (a top-level scalar or array, mixed arrays: README), or meet a difference the relay has
/// with Avro alone (an empty array's null schema: the relay dead-letters the record).
fn avro_expandable(text: &str) -> bool {
    fn fits(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.values().all(fits),
            Value::Array(items) => {
                let kind = |v: &Value| match v {
                    Value::Bool(_) => 1,
                    Value::Number(n) if n.is_i64() || n.is_u64() => 2,
                    Value::Number(_) => 3,
                    Value::String(_) => 4,
                    _ => 0,
                };
                !items.is_empty()
                    && items
                        .iter()
                        .all(|i| kind(i) != 0 && kind(i) == kind(&items[0]))
            }
            _ => true,
        }
    }
    serde_json::from_str::<Value>(text).is_ok_and(|v| v.is_object() && fits(&v))
}

impl Case {
    fn name(&self) -> String {
        format!("s{}c{}", self.seed, self.index)
    }
    fn messages(&self) -> bool {
        self.config.get("database.dbname") == Some(&json!(MESSAGES_DB))
    }
}

fn generate(seed: u64, index: usize, pg_port: u16) -> Case {
    let mut rng = Rng(seed.wrapping_mul(1_000_003).wrapping_add(index as u64));
    let table = format!("diff_s{seed}_c{index}");
    let mut chosen: Vec<String> = Vec::new();
    let (id_type, id_value): (&str, fn(usize, usize) -> String) = *rng.pick(&[
        (
            "uuid",
            (|c, n| format!("'6b1c0e4e-{c:04x}-4000-8000-{n:012x}'")) as fn(usize, usize) -> String,
        ),
        ("varchar(64)", |c, n| format!("'evt-{c}-{n}'")),
        ("bigint", |c, n| format!("{}", c * 100_000 + n)),
    ]);
    let key_type = *rng.pick(&["varchar(255)", "text", "bigint", "uuid", "citext"]);
    let payload_type = *rng.pick(&["jsonb", "jsonb", "json", "text", "varchar(2000)", "bytea"]);
    chosen.push(format!(
        "id {id_type}, key {key_type}, payload {payload_type}"
    ));
    let mut config = Map::new();
    let set = |config: &mut Map<String, Value>, k: &str, v: &str| {
        config.insert(k.to_owned(), json!(v));
    };
    // The EventRouter's column options: Debezium's default names, or others named by them.
    let mut column = |default: &'static str, renamed: &'static str, option: &str| -> &'static str {
        if rng.chance(30) {
            set(&mut config, &format!("transforms.outbox.{option}"), renamed);
            chosen.push(format!("{option}={renamed}"));
            renamed
        } else {
            default
        }
    };
    let id_column = column("id", "event_id", "table.field.event.id");
    let route_column = column("aggregatetype", "aggregate_type", "route.by.field");
    let key_column = column("aggregateid", "aggregate_id", "table.field.event.key");
    let payload_column = column("payload", "body", "table.field.event.payload");
    let type_column = if rng.chance(30) { "event_type" } else { "type" };

    // Converters. Kafka Connect's StringConverter writes a byte[]'s toString (an address),
    // and a Struct's toString: not generated where it would meet them.
    let jsonish = payload_type != "bytea";
    let value_converter = if jsonish {
        *rng.pick(&["json", "json-schemaless", "string"])
    } else {
        *rng.pick(&["json", "json-schemaless", "bytearray"])
    };
    // Debezium's BinaryDataConverter for half of the bytea payloads (from a stream of its
    // own: the other choices stay as they were), with a
    // JsonConverter delegate for what is not bytes (heartbeats, envelopes, base64 text).
    let value_converter =
        if payload_type == "bytea" && Rng(seed ^ 0xb1da_7a00_0000_0000 ^ index as u64).chance(50) {
            "binarydata"
        } else {
            value_converter
        };
    // Debezium's CloudEvents recipe for the outbox (its cloudevents.adoc): a HeaderFrom
    // before the EventRouter copies the change event's source, op and transaction into
    // headers, which the CloudEventsConverter reads back (JsonConverter headers). From a
    // stream of its own; its data must be a struct: the payload expanded from a JSON object.
    // Not in the families (numbered from 100), which choose their own converters.
    let cloudevents = index < 100
        && value_converter == "json"
        && Rng::stream(seed, index, 0xc10d_e7e0).chance(30);
    let expand = (jsonish && value_converter != "string" && rng.chance(40)) || cloudevents;
    // Whether Kafka Connect's field transforms follow the EventRouter (see
    // `field_transforms`): they need the envelope, so one column goes there. From a stream
    // of its own, so that the other cases stay as they were.
    let envelope_possible = value_converter.starts_with("json") && !expand;
    let field_case =
        envelope_possible && Rng(seed ^ 0xf1e1_d000_0000_0000 ^ index as u64).chance(40);
    let extras_count = rng.below(3).max(usize::from(field_case));
    let mut extras: Vec<(String, &Extra, &str)> = Vec::new();
    for i in 0..extras_count {
        let extra = rng.pick(EXTRAS);
        // An expanded payload in an envelope fails Debezium's task (the envelope keeps the
        // column's string schema, the value is a Struct): not generated.
        let placement = if envelope_possible && (rng.chance(40) || (field_case && i == 0)) {
            "envelope"
        } else {
            "header"
        };
        extras.push((format!("extra_{i}"), extra, placement));
    }
    for (key, converter) in [
        (
            "key.converter",
            *rng.pick(&["json", "json-schemaless", "string"]),
        ),
        ("value.converter", value_converter),
    ] {
        let (class, schemas) = match converter {
            "json" => ("org.apache.kafka.connect.json.JsonConverter", Some("true")),
            "json-schemaless" => ("org.apache.kafka.connect.json.JsonConverter", Some("false")),
            "string" => ("org.apache.kafka.connect.storage.StringConverter", None),
            "binarydata" => {
                set(
                    &mut config,
                    &format!("{key}.delegate.converter.type"),
                    "org.apache.kafka.connect.json.JsonConverter",
                );
                set(
                    &mut config,
                    &format!("{key}.delegate.converter.type.schemas.enable"),
                    "false",
                );
                ("io.debezium.converters.BinaryDataConverter", None)
            }
            _ => (
                "org.apache.kafka.connect.converters.ByteArrayConverter",
                None,
            ),
        };
        set(&mut config, key, class);
        if let Some(schemas) = schemas {
            set(&mut config, &format!("{key}.schemas.enable"), schemas);
        }
        chosen.push(format!("{key}={converter}"));
    }

    // The EventRouter.
    let replacement = *rng.pick(&[
        "outbox.event.${routedByValue}",
        "${routedByValue}.events",
        "${routedByValue}",
    ]);
    set(
        &mut config,
        "transforms.outbox.route.topic.replacement",
        replacement,
    );
    let tombstones = rng.chance(50);
    set(
        &mut config,
        "transforms.outbox.route.tombstone.on.empty.payload",
        if tombstones { "true" } else { "false" },
    );
    if expand {
        set(
            &mut config,
            "transforms.outbox.table.expand.json.payload",
            "true",
        );
    }
    let mut placement = vec![format!("{type_column}:header:eventType")];
    // The envelope's fields after `payload`, by the names the EventRouter gives them.
    let mut envelope_fields: Vec<String> = Vec::new();
    // Those of a timestamp type (TimestampConverter's).
    let mut envelope_timestamps: Vec<String> = Vec::new();
    for (name, extra, place) in &extras {
        let alias = if rng.chance(50) {
            format!(":{name}_alias")
        } else {
            String::new()
        };
        if *place == "envelope" {
            let field = match alias.strip_prefix(':') {
                Some(alias) => alias.to_owned(),
                None => name.clone(),
            };
            if extra.sql.starts_with("timestamp") {
                envelope_timestamps.push(field.clone());
            }
            envelope_fields.push(field);
        }
        placement.push(format!("{name}:{place}{alias}"));
        if let Some((option, modes)) = extra.mode {
            let mode = *rng.pick(modes);
            set(&mut config, option, mode);
        }
        chosen.push(format!("{name} {} as {place}", extra.sql));
    }
    set(
        &mut config,
        "transforms.outbox.table.fields.additional.placement",
        &placement.join(","),
    );
    chosen.push(format!(
        "replacement {replacement}, tombstones {tombstones}, expand {expand}"
    ));

    // A snapshot's source block holds the time it read the row: not a byte to compare.
    let snapshot = rng.chance(40) && !cloudevents;
    chosen.push(format!("snapshot {snapshot}"));
    // Several outbox tables: the rows of both reach the same topics, in WAL order.
    let tables: Vec<String> = if rng.chance(25) {
        vec![table.clone(), format!("{table}_b")]
    } else {
        vec![table.clone()]
    };
    if tables.len() > 1 {
        chosen.push("two outbox tables".into());
    }
    // TransactionMonitor's BEGIN and END records for every streamed transaction.
    let transactions = rng.chance(20);
    if transactions {
        set(&mut config, "provide.transaction.metadata", "true");
        chosen.push("provide.transaction.metadata".into());
    }
    for (k, v) in [
        (
            "connector.class",
            "io.debezium.connector.postgresql.PostgresConnector",
        ),
        ("tasks.max", "1"),
        ("database.hostname", "127.0.0.1"),
        ("database.user", "postgres"),
        ("database.password", "postgres"),
        ("database.dbname", "postgres"),
        ("plugin.name", "pgoutput"),
        ("publication.autocreate.mode", "filtered"),
        (
            "snapshot.mode",
            if snapshot { "initial" } else { "no_data" },
        ),
        ("topic.creation.default.replication.factor", "1"),
        ("topic.creation.default.partitions", "1"),
        ("transforms", "outbox"),
        (
            "transforms.outbox.type",
            "io.debezium.transforms.outbox.EventRouter",
        ),
    ] {
        set(&mut config, k, v);
    }
    set(&mut config, "database.port", &pg_port.to_string());
    // Unique per connector: Debezium registers its metrics under it (a clash stalls one).
    // It names the transaction topic, which carries the case's marker like the others.
    set(&mut config, "topic.prefix", &format!("dbz_S{seed}C{index}"));
    let included: Vec<String> = tables.iter().map(|t| format!("public.{t}")).collect();
    set(&mut config, "table.include.list", &included.join(","));

    let mut columns = format!(
        "{id_column} {id_type} PRIMARY KEY, {route_column} varchar(255) NOT NULL, \
         {key_column} {key_type} NOT NULL, {type_column} varchar(255) NOT NULL, {payload_column} {payload_type}"
    );
    for (name, extra, _) in &extras {
        columns.push_str(&format!(", {name} {}", extra.sql));
    }
    let ddl: String = tables
        .iter()
        .map(|t| format!("CREATE TABLE public.{t} ({columns});"))
        .collect();

    let types = [
        format!("S{seed}C{index}Order"),
        format!("S{seed}C{index}Customer"),
    ];
    let row = |n: usize, rng: &mut Rng| -> (String, Event) {
        let key = match key_type {
            "bigint" => format!("{}", rng.below(5)),
            "uuid" => format!("'00000000-0000-4000-8000-{:012x}'", rng.below(5)),
            _ => lit(&format!(
                "{}-{}",
                rng.pick(&["a", "ключ", "b c"]),
                rng.below(5)
            )),
        };
        let mut expandable = true;
        let payload = if rng.chance(15) {
            "NULL".to_owned()
        } else if payload_type == "bytea" {
            format!("convert_to({}, 'UTF8')", lit(&json_text(rng)))
        } else if cloudevents {
            lit(&format!("{{\"event\": {}}}", json_text(rng)))
        } else {
            let text = json_text(rng);
            expandable = avro_expandable(&text);
            lit(&text)
        };
        let event = Event {
            customer: false,
            payload_null: payload == "NULL",
            expandable,
        };
        // As rng.pick, its draw.
        let routed = rng.below(types.len());
        let event = Event {
            customer: routed == 1,
            ..event
        };
        let mut values = vec![
            id_value(index, n),
            lit(types[routed].as_str()),
            key,
            lit(rng.text(&["Created", "Updated", "Ünïcode"])),
            payload,
        ];
        for (_, extra, _) in &extras {
            let value = if rng.chance(15) {
                "NULL".into()
            } else {
                (extra.value)(rng)
            };
            // Debezium's snapshot reads a BC date as the same date AD (its streaming does
            // not): the relay keeps the date, as README says. Not a byte to compare.
            let value = if snapshot && n < 3 && value.contains(" BC") {
                lit("0044-03-15")
            } else {
                value
            };
            values.push(value);
        }
        let target = &tables[rng.below(tables.len())];
        (
            format!(
                "INSERT INTO public.{target} VALUES ({});",
                values.join(", ")
            ),
            event,
        )
    };
    let (before, before_events): (Vec<String>, Vec<Event>) =
        (0..3).map(|n| row(n, &mut rng)).unzip();
    let (after, mut events): (Vec<String>, Vec<Event>) = (3..9).map(|n| row(n, &mut rng)).unzip();
    if snapshot {
        events.extend(before_events);
    }
    let mut ddl = ddl;

    // What follows is drawn from a second generator, so that what is drawn above stays the
    // same for each seed.
    let mut more = Rng(seed
        .wrapping_mul(7_919)
        .wrapping_add(index as u64)
        .wrapping_add(0xd1ff));
    // Columns added at the end of the table, filled by their defaults.
    let add_column = |ddl: &mut String, column: &str| {
        *ddl = ddl.replace(");", &format!(", {column});"));
    };
    // Column defaults, which Debezium writes into the envelope's schema.
    for (name, extra, place) in &extras {
        if *place == "envelope" && more.chance(35) {
            let default = if extra.sql.starts_with("timestamp") && more.chance(50) {
                "now()".to_owned()
            } else {
                (extra.value)(&mut more)
            };
            for end in [",", ")"] {
                ddl = ddl.replace(
                    &format!(", {name} {}{end}", extra.sql),
                    &format!(", {name} {} DEFAULT {default}{end}", extra.sql),
                );
            }
            chosen.push(format!("{name} DEFAULT {default}"));
        }
    }
    // The EventRouter's schema version and event timestamp columns.
    if more.chance(25) {
        let version = more.below(9) + 1;
        add_column(&mut ddl, &format!("evt_version integer DEFAULT {version}"));
        set(
            &mut config,
            "transforms.outbox.table.field.event.schema.version",
            "evt_version",
        );
        chosen.push(format!("schema version {version}"));
    }
    let timestamp = more.chance(25);
    if timestamp {
        // Debezium takes a timestamp type only; a bigint of milliseconds fails its task.
        let column = if more.chance(20) {
            "bigint DEFAULT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        } else {
            "timestamp DEFAULT (clock_timestamp() AT TIME ZONE 'UTC')"
        };
        add_column(&mut ddl, &format!("evt_ts {column}"));
        set(
            &mut config,
            "transforms.outbox.table.field.event.timestamp",
            "evt_ts",
        );
        chosen.push(format!("timestamp evt_ts {column}"));
    }
    // An enum as the routing column (io.debezium.data.Enum; routed by its label). Its
    // CREATE TYPE goes first, after the columns added above.
    if more.chance(15) {
        let kind = format!("{table}_kind");
        ddl = format!(
            "CREATE TYPE {kind} AS ENUM ('{}', '{}', 'S{seed}C{index}Unused'); {}",
            types[0],
            types[1],
            ddl.replace(
                &format!("{route_column} varchar(255) NOT NULL"),
                &format!("{route_column} {kind} NOT NULL")
            )
        );
        chosen.push("enum routing column".into());
    }
    // A topic regex: the replacement takes its groups; a routed value it does not match
    // whole is the topic.
    if more.chance(25) {
        set(
            &mut config,
            "transforms.outbox.route.topic.regex",
            "(?<case>S\\d+C\\d+)(?<kind>Order)",
        );
        set(
            &mut config,
            "transforms.outbox.route.topic.replacement",
            "${case}.${kind}.regex",
        );
        chosen.push("route.topic.regex".into());
    }
    if more.chance(20) {
        set(
            &mut config,
            "header.converter",
            "org.apache.kafka.connect.json.JsonConverter",
        );
        let schemas = more.chance(50);
        set(
            &mut config,
            "header.converter.schemas.enable",
            &schemas.to_string(),
        );
        chosen.push(format!("header.converter=json schemas {schemas}"));
    }
    // Several rows in one transaction.
    let mut after: Vec<String> = if more.chance(30) {
        chosen.push("two rows per transaction".into());
        after
            .chunks(2)
            .map(|pair| format!("BEGIN; {} COMMIT;", pair.concat()))
            .collect()
    } else {
        after
    };
    // Each streamed statement is a transaction: with metadata, a BEGIN and an END each.
    let mut transactions_streamed = after.len();
    // An UPDATE and a DELETE of relayed rows: the EventRouter writes nothing for them, the
    // transaction metadata counts them unless skipped.operations skips them.
    if more.chance(30) {
        let skipped = *more.pick(&["t", "u", "d", "u,d"]);
        set(&mut config, "skipped.operations", skipped);
        for (n, statement, op) in [
            (
                3,
                format!("UPDATE {{t}} SET {type_column} = 'Shipped'"),
                'u',
            ),
            (4, "DELETE FROM {t}".to_owned(), 'd'),
        ] {
            let id = id_value(index, n);
            let statement = tables
                .iter()
                .map(|t| {
                    format!(
                        "{} WHERE {id_column} = {id};",
                        statement.replace("{t}", &format!("public.{t}"))
                    )
                })
                .collect::<String>();
            after.push(format!("BEGIN; {statement} COMMIT;"));
            if !skipped.contains(op) {
                transactions_streamed += 1;
            }
        }
        chosen.push(format!("update and delete, skipped.operations={skipped}"));
    }
    let inserts = 6;
    let mut expected = inserts
        + if transactions {
            2 * transactions_streamed
        } else {
            0
        }
        + if snapshot { before.len() } else { 0 };
    // Debezium counts a message in a transaction's END under a name it cannot reproduce
    // (README): messages are not generated with transaction metadata. Nor with a column in
    // the envelope: Debezium's EventRouter reuses the envelope schema of the table's rows for
    // the message's differently typed field and its task fails (the relay types each).
    // Nor with an event timestamp: a message's number has no timestamp type, and Debezium's
    // EventRouter fails on it (the relay takes it as milliseconds, as for a bigint column).
    let messages = !transactions
        && !cloudevents
        && !timestamp
        && extras.iter().all(|(_, _, place)| *place == "header")
        && more.chance(40);
    if messages {
        set(&mut config, "database.dbname", MESSAGES_DB);
        set(&mut config, "transforms", "decode,outbox");
        set(&mut config, "transforms.decode.type", DECODE_MESSAGE);
        let nulls = more.chance(50);
        if nulls {
            set(&mut config, "transforms.decode.fields.null.include", "true");
        }
        // Every slot receives every message of the database: each case accepts its own
        // prefix only, named or as a pattern.
        let prefix = format!("{table}_msg");
        let include = if more.chance(50) {
            prefix.clone()
        } else {
            format!("{table}_m.g")
        };
        set(&mut config, "message.prefix.include.list", &include);
        for n in 0..4 {
            let mut content = Map::new();
            let id = match id_type {
                "bigint" => json!(index * 100_000 + 50 + n),
                "uuid" => json!(format!("6b1c0e4e-{index:04x}-4000-8000-{:012x}", 50 + n)),
                _ => json!(format!("evt-{index}-{}", 50 + n)),
            };
            content.insert(id_column.into(), id);
            let routed = more.below(types.len());
            content.insert(route_column.into(), json!(types[routed]));
            let key = match key_type {
                "bigint" => json!(more.below(5)),
                _ => json!(format!("{}-{}", more.pick(&["a", "ключ"]), more.below(5))),
            };
            content.insert(key_column.into(), key);
            content.insert(
                type_column.into(),
                json!(more.text(&["Created", "Ünïcode"])),
            );
            let payload = match more.below(10) {
                0 if nulls => Value::Null,
                0..=2 => json!(json_text(&mut more)),
                _ => {
                    let mut m = Map::new();
                    m.insert("id".into(), json!(more.below(1000)));
                    m.insert("data".into(), json_doc(&mut more, 1));
                    Value::Object(m)
                }
            };
            let payload_null = payload.is_null();
            let expandable = match &payload {
                Value::String(text) => avro_expandable(text),
                other => avro_expandable(&other.to_string()),
            };
            content.insert(payload_column.into(), payload);
            for (name, _, _) in &extras {
                let value = match more.below(3) {
                    0 => json!(more.below(100)),
                    _ => json!(more.text(STRINGS)),
                };
                content.insert(name.clone(), value);
            }
            // The last message's prefix is not accepted: neither side writes it.
            let (prefix, accepted) = if n == 3 {
                (format!("{table}_other"), false)
            } else {
                (prefix.clone(), true)
            };
            let transactional = more.chance(80);
            after.insert(
                more.below(after.len() + 1),
                format!(
                    "SELECT pg_logical_emit_message({transactional}, {}, {});",
                    lit(&prefix),
                    lit(&Value::Object(content).to_string())
                ),
            );
            expected += usize::from(accepted);
            if accepted {
                events.push(Event {
                    customer: routed == 1,
                    payload_null,
                    expandable,
                });
            }
        }
        chosen.push(format!("messages (include {include}, nulls {nulls})"));
    }
    // A heartbeat has no metadata headers: CloudEvents writes it as null, which the
    // heartbeats' comparison by shape does not take.
    let heartbeat_topic = (more.chance(30) && !cloudevents).then(|| {
        let prefix = if more.chance(50) {
            set(&mut config, "topic.heartbeat.prefix", "__hb");
            "__hb"
        } else {
            "__debezium-heartbeat"
        };
        set(&mut config, "heartbeat.interval.ms", "700");
        chosen.push(format!("heartbeats to {prefix}"));
        format!("{prefix}.dbz_S{seed}C{index}")
    });
    // Kafka Connect's transforms after the EventRouter, from a random stream of
    // their own (the cases above stay as they were): a RegexRouter on the routed topics
    // (not on the heartbeat and transaction topics: a negated TopicNameMatches), an
    // InsertHeader under a HasHeaderKey predicate, a DropHeaders. Header order and bytes
    // are compared like the rest.
    let mut chain_rng = Rng(seed ^ 0x5eed_c4a1_0000_0000 ^ index as u64);
    if chain_rng.chance(40) {
        let mut aliases = vec![config["transforms"].as_str().unwrap().to_owned()];
        let mut predicates = Vec::new();
        let mut uses_internal = false;
        if chain_rng.chance(70) {
            aliases.push("route".into());
            set(
                &mut config,
                "transforms.route.type",
                "org.apache.kafka.connect.transforms.RegexRouter",
            );
            set(&mut config, "transforms.route.regex", "(.*S\\d+C\\d+)(.*)");
            set(&mut config, "transforms.route.replacement", "$1.chained$2");
            set(&mut config, "transforms.route.predicate", "internal");
            set(&mut config, "transforms.route.negate", "true");
            uses_internal = true;
        }
        if chain_rng.chance(35) {
            // The month of the record's timestamp (a case straddling a month's end in UTC
            // would differ: not a day's end).
            aliases.push("stamp".into());
            set(
                &mut config,
                "transforms.stamp.type",
                "org.apache.kafka.connect.transforms.TimestampRouter",
            );
            set(
                &mut config,
                "transforms.stamp.topic.format",
                "${topic}.at-${timestamp}",
            );
            set(
                &mut config,
                "transforms.stamp.timestamp.format",
                "yyyy'm'MM",
            );
            set(&mut config, "transforms.stamp.predicate", "internal");
            set(&mut config, "transforms.stamp.negate", "true");
            uses_internal = true;
        }
        // The heartbeat and transaction topics, which the routers leave alone.
        if uses_internal {
            predicates.push("internal");
            set(
                &mut config,
                "predicates.internal.type",
                "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            );
            set(
                &mut config,
                "predicates.internal.pattern",
                "__.*|.*\\.transaction",
            );
        }
        if chain_rng.chance(70) {
            aliases.push("tag".into());
            set(
                &mut config,
                "transforms.tag.type",
                "org.apache.kafka.connect.transforms.InsertHeader",
            );
            set(&mut config, "transforms.tag.header", "chain-source");
            // Whole numbers are typed INT8 to INT64 by size (a schema'd JsonConverter header
            // converter shows which).
            let literal = *chain_rng.pick(&[
                "orders-service",
                "007",
                "TRUE",
                "-12",
                "a b",
                "300",
                "70000",
                "5000000000",
                "true",
            ]);
            set(&mut config, "transforms.tag.value.literal", literal);
            if chain_rng.chance(50) {
                set(&mut config, "transforms.tag.predicate", "hasId");
                predicates.push("hasId");
                set(
                    &mut config,
                    "predicates.hasId.type",
                    "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
                );
                set(&mut config, "predicates.hasId.name", "id");
            }
        }
        if chain_rng.chance(50) {
            aliases.push("drop".into());
            set(
                &mut config,
                "transforms.drop.type",
                "org.apache.kafka.connect.transforms.DropHeaders",
            );
            set(
                &mut config,
                "transforms.drop.headers",
                chain_rng.text(&["id", "id,chain-source", "nothing-here"]),
            );
        }
        if !predicates.is_empty() {
            set(&mut config, "predicates", &predicates.join(","));
        }
        chosen.push(format!("transforms {}", aliases.join(",")));
        set(&mut config, "transforms", &aliases.join(","));
    }
    field_transforms(
        seed,
        index,
        &mut config,
        (&envelope_fields, &envelope_timestamps),
        tombstones,
        &mut chosen,
    );
    // A topic prefix that is not a valid Avro name (a hyphen), and
    // `schema.name.adjustment.mode=avro` for half of those: the envelope's schema name, the
    // change events' names before the EventRouter. From a stream of its own.
    let mut names = Rng::stream(seed, index, 0xa7d0);
    if heartbeat_topic.is_none() && names.chance(25) {
        set(&mut config, "topic.prefix", &format!("dbz-S{seed}C{index}"));
        let avro = names.chance(50);
        if avro {
            set(&mut config, "schema.name.adjustment.mode", "avro");
        }
        chosen.push(format!(
            "topic.prefix with a hyphen, schema names adjusted {avro}"
        ));
    }
    if cloudevents {
        cloudevents_recipe(
            seed,
            index,
            &mut config,
            (transactions, type_column, id_type != "bigint"),
            &mut chosen,
        );
    }
    Case {
        seed,
        index,
        table,
        ddl,
        before,
        after,
        config,
        expected,
        heartbeat_topic,
        timestamp,
        describe: chosen.join("; "),
        events,
        transaction_records: if transactions {
            2 * transactions_streamed
        } else {
            0
        },
        tombstones,
        avro: false,
        preregistered: false,
        latest_documented: false,
    }
}

/// Debezium's CloudEvents recipe around the EventRouter, as its documentation gives it: a
/// `HeaderFrom$Value` before the router copying `source`, `op` and `transaction` into
/// headers (not on heartbeats, nor here on transaction records), JsonConverter headers with
/// schemas, `CloudEventsConverter` values with `metadata.source=header`; varied: the id and
/// type generated or read from headers (the EventRouter's `id`; a `type` column placed as a
/// header), extension attributes, the data's JSON schema. DELETEs write no tombstones (a
/// tombstone fails HeaderFrom, and Debezium's task with it).
fn cloudevents_recipe(
    seed: u64,
    index: usize,
    config: &mut Map<String, Value>,
    (transactions, type_column, text_id): (bool, &str, bool),
    chosen: &mut Vec<String>,
) {
    let mut rng = Rng::stream(seed, index, 0xc10d_e7e1);
    let mut set = |k: &str, v: &str| {
        config.insert(k.to_owned(), json!(v));
    };
    set("tombstones.on.delete", "false");
    set(
        "transforms.addMetadataHeaders.type",
        "org.apache.kafka.connect.transforms.HeaderFrom$Value",
    );
    set(
        "transforms.addMetadataHeaders.fields",
        "source,op,transaction",
    );
    set(
        "transforms.addMetadataHeaders.headers",
        "source,op,transaction",
    );
    set("transforms.addMetadataHeaders.operation", "copy");
    set("transforms.addMetadataHeaders.predicate", "isHeartbeat");
    set("transforms.addMetadataHeaders.negate", "true");
    set(
        "predicates.isHeartbeat.type",
        "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    );
    set(
        "predicates.isHeartbeat.pattern",
        if transactions {
            "__debezium-heartbeat.*|.*\\.transaction"
        } else {
            "__debezium-heartbeat.*"
        },
    );
    set(
        "value.converter",
        "io.debezium.converters.CloudEventsConverter",
    );
    config.remove("value.converter.schemas.enable");
    let mut set = |k: &str, v: &str| {
        config.insert(k.to_owned(), json!(v));
    };
    // The id from a header is the EventRouter's `id` (a text one: a number fails the cast to
    // String); the type from a header is a column placed as header `type`.
    let metadata = if text_id {
        *rng.pick(&[
            "header",
            "header,id:generate,type:generate",
            "header,id:header,type:generate",
            "header,type:generate",
            "header,id:generate",
        ])
    } else {
        *rng.pick(&["header,id:generate,type:generate", "header,id:generate"])
    };
    set("value.converter.metadata.source", metadata);
    if !metadata.contains("type:generate") {
        let key = "transforms.outbox.table.fields.additional.placement";
        let placement = format!(
            "{},{type_column}:header:type",
            config[key].as_str().unwrap()
        );
        config.insert(key.into(), json!(placement));
    }
    let mut set = |k: &str, v: &str| {
        config.insert(k.to_owned(), json!(v));
    };
    if rng.chance(30) {
        set("value.converter.extension.attributes.enable", "false");
    }
    if rng.chance(30) {
        set("value.converter.json.schemas.enable", "false");
    }
    set(
        "header.converter",
        "org.apache.kafka.connect.json.JsonConverter",
    );
    set("header.converter.schemas.enable", "true");
    let transforms = config["transforms"].as_str().unwrap().to_owned();
    config.insert(
        "transforms".into(),
        json!(format!("addMetadataHeaders,{transforms}")),
    );
    let predicates = match config.get("predicates").and_then(Value::as_str) {
        Some(list) => format!("{list},isHeartbeat"),
        None => "isHeartbeat".into(),
    };
    config.insert("predicates".into(), json!(predicates));
    chosen.push(format!("CloudEvents recipe, metadata.source={metadata}"));
}

/// Kafka Connect's field transforms after the EventRouter, from a random stream
/// of their own, on cases whose records' values are structs: the EventRouter's envelope (a
/// column placed in it). Heartbeat and transaction records (other structs) are left alone
/// by a negated TopicNameMatches; the transforms Kafka Connect fails on for a tombstone run
/// under a negated RecordIsTombstone (or not at all when both are needed: one predicate per
/// transform). Names and schemas of the results (the envelope's, the key's, the headers')
/// are compared like the rest.
fn field_transforms(
    seed: u64,
    index: usize,
    config: &mut Map<String, Value>,
    (envelope_fields, timestamps): (&[String], &[String]),
    tombstones: bool,
    chosen: &mut Vec<String>,
) {
    let mut rng = Rng(seed ^ 0xf1e1_d5e7_0000_0000 ^ index as u64);
    let internal = config.contains_key("heartbeat.interval.ms")
        || config.contains_key("provide.transaction.metadata");
    let Some(first) = envelope_fields.first().cloned() else {
        return;
    };
    const T: &str = "org.apache.kafka.connect.transforms.";
    // Alias, class, options.
    type Step = (String, String, Vec<(String, String)>);
    let mut steps: Vec<Step> = Vec::new();
    let mut predicates: Vec<&str> = Vec::new();
    // `guard`: Kafka Connect fails on a tombstone with this transform.
    let mut step = |alias: &str, class: String, options: &[(&str, &str)], guard: bool| {
        let mut options: Vec<(String, String)> = options
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let predicate = match (guard && tombstones, internal) {
            (true, true) => return,
            (true, false) => Some("notTombstone"),
            (false, true) => Some("notInternal"),
            (false, false) => None,
        };
        if let Some(p) = predicate {
            options.push(("predicate".into(), p.into()));
            options.push(("negate".into(), "true".into()));
            if !predicates.contains(&p) {
                predicates.push(p);
            }
        }
        steps.push((alias.to_owned(), class, options));
    };
    if rng.chance(35) {
        let version = rng.text(&["3", "12"]);
        step(
            "meta",
            format!("{T}SetSchemaMetadata$Value"),
            &[
                ("schema.name", "shop.OutboxEnvelope"),
                ("schema.version", version),
            ],
            false,
        );
    }
    // From a stream of its own: the other draws stay as they were.
    let mut ts_rng = Rng(seed ^ 0x7153_7a00_0000_0000 ^ index as u64);
    if let (Some(field), true) = (timestamps.first(), ts_rng.chance(60)) {
        let target = ts_rng.text(&["unix", "string", "Timestamp", "Date", "Time"]);
        let mut options = vec![("field", field.as_str()), ("target.type", target)];
        if target == "string" || ts_rng.chance(30) {
            options.push((
                "format",
                ts_rng.text(&["yyyy-MM-dd'T'HH:mm:ss.SSS", "yyyyMMdd HH:mm"]),
            ));
        }
        if ts_rng.chance(30) {
            options.push(("unix.precision", ts_rng.text(&["seconds", "microseconds"])));
        }
        step(
            "tsconv",
            format!("{T}TimestampConverter$Value"),
            &options,
            false,
        );
    }
    if rng.chance(40) {
        let topic = rng.text(&["routed_topic", "routed_topic!"]);
        step(
            "insert",
            format!("{T}InsertField$Value"),
            &[
                ("topic.field", topic),
                ("static.field", "origin?"),
                ("static.value", "orders-service"),
            ],
            false,
        );
    }
    if rng.chance(40) {
        let operation = rng.text(&["copy", "move"]);
        let fields = format!("{first},payload");
        step(
            "hfrom",
            format!("{T}HeaderFrom$Value"),
            &[
                ("fields", if operation == "move" { &first } else { &fields }),
                (
                    "headers",
                    if operation == "move" {
                        "moved"
                    } else {
                        "copied,payload-copy"
                    },
                ),
                ("operation", operation),
            ],
            true,
        );
    }
    if rng.chance(35) {
        let last = envelope_fields.last().unwrap_or(&first).clone();
        let renames = format!("{last}:renamed_{last}");
        if envelope_fields.len() > 1 && rng.chance(50) {
            step(
                "replace",
                format!("{T}ReplaceField$Value"),
                &[("exclude", &last)],
                false,
            );
        } else {
            step(
                "replace",
                format!("{T}ReplaceField$Value"),
                &[("renames", &renames)],
                false,
            );
        }
    }
    if rng.chance(30) {
        step(
            "mask",
            format!("{T}MaskField$Value"),
            &[("fields", "payload")],
            true,
        );
    }
    if rng.chance(35) {
        let operation = rng.text(&["copy", "move"]);
        step(
            "h2v",
            "io.debezium.transforms.HeaderToValue".into(),
            &[
                ("headers", "eventType"),
                ("fields", "event_type"),
                ("operation", operation),
            ],
            false,
        );
    }
    if rng.chance(30) {
        step(
            "tokey",
            format!("{T}ValueToKey"),
            &[("fields", "payload")],
            true,
        );
    }
    if rng.chance(30) {
        // A fresh string schema for the payload (its io.debezium.data.Json name dropped).
        step(
            "cast",
            format!("{T}Cast$Value"),
            &[("spec", "payload:string")],
            false,
        );
    }
    match rng.below(4) {
        0 => step(
            "extract",
            format!("{T}ExtractField$Value"),
            &[("field", "payload")],
            false,
        ),
        1 => {
            step(
                "hoist",
                format!("{T}HoistField$Value"),
                &[("field", "wrapped")],
                false,
            );
            if rng.chance(60) {
                let delimiter = rng.text(&["_", "."]);
                step(
                    "flat",
                    format!("{T}Flatten$Value"),
                    &[("delimiter", delimiter)],
                    false,
                );
            }
        }
        _ => {}
    }
    if steps.is_empty() {
        return;
    }
    for (alias, class, options) in &steps {
        config.insert(format!("transforms.{alias}.type"), json!(class));
        for (k, v) in options {
            config.insert(format!("transforms.{alias}.{k}"), json!(v));
        }
    }
    if !predicates.is_empty() {
        let mut declared: Vec<String> = config
            .get("predicates")
            .and_then(Value::as_str)
            .map(|p| p.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        declared.extend(predicates.iter().map(|p| (*p).to_owned()));
        config.insert("predicates".into(), json!(declared.join(",")));
        config.insert(
            "predicates.notTombstone.type".into(),
            json!("org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"),
        );
        config.insert(
            "predicates.notInternal.type".into(),
            json!("org.apache.kafka.connect.transforms.predicates.TopicNameMatches"),
        );
        config.insert(
            "predicates.notInternal.pattern".into(),
            json!("__.*|.*\\.transaction"),
        );
    }
    let aliases: Vec<&str> = steps.iter().map(|(a, _, _)| a.as_str()).collect();
    let transforms = format!(
        "{},{}",
        config["transforms"].as_str().unwrap_or("outbox"),
        aliases.join(",")
    );
    chosen.push(format!("field transforms {}", aliases.join(",")));
    config.insert("transforms".into(), json!(transforms));
}

/// The case families: the generated cases as they are (JSON, string and byte converters),
/// the same with schema-registry Avro converters, with a Filter, and with Confluent's
/// Protobuf converter.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    Plain,
    Avro,
    Filter,
    Protobuf,
    Before,
}

/// Where a family's case numbers start (`S<seed>C<index>` names the case in every topic).
fn first_index(family: Family) -> usize {
    match family {
        Family::Plain => 0,
        Family::Avro => 100,
        Family::Filter => 200,
        Family::Protobuf => 300,
        Family::Before => 400,
    }
}

fn generate_case(seed: u64, index: usize, pg_port: u16, family: Family) -> Case {
    // Protobuf's names are Avro's (ASCII letters, digits, `_`), but where
    // `scrub.invalid.names` is drawn: the others are then the converter's to scrub.
    let protobuf = (family == Family::Protobuf).then(|| ProtobufDraw::new(seed, index));
    AVRO_NAMES.set(family == Family::Avro || protobuf.is_some_and(|p| !p.scrub));
    let mut case = generate(seed, index, pg_port);
    AVRO_NAMES.set(false);
    match family {
        Family::Plain => {}
        Family::Avro => avro_family(&mut case),
        Family::Filter => filter_family(&mut case),
        Family::Protobuf => protobuf_family(&mut case, protobuf.unwrap()),
        Family::Before => before_family(&mut case),
    }
    router_predicate(&mut case);
    case
}

/// A predicate on the EventRouter itself, as Debezium's documentation routes only the
/// outbox's records (drawn for a fifth of the cases, from a stream of its own): one that
/// matches every outbox table's topic (and the decoded messages'), or Debezium's heartbeat
/// pattern negated. Either way every outbox record meets the EventRouter, and the connector's
/// other records pass it unchanged: both sides must write what they write without it.
fn router_predicate(case: &mut Case) {
    let mut rng = Rng::stream(case.seed, case.index, 0x9ed1);
    if !rng.chance(20) {
        return;
    }
    let config = &mut case.config;
    let prefix = config["topic.prefix"].as_str().unwrap().to_owned();
    let mut topics: Vec<String> = config
        .get("table.include.list")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .split(',')
        .filter(|t| !t.is_empty())
        .map(|t| format!("{prefix}.{t}"))
        .collect();
    if config["transforms"]
        .as_str()
        .unwrap()
        .starts_with("decode,")
    {
        topics.push(format!("{prefix}.message"));
    }
    let escape = |t: &str| t.replace('.', "\\.");
    let (pattern, negate, what) = match rng.below(3) {
        0 => (
            topics
                .iter()
                .map(|t| escape(t))
                .collect::<Vec<_>>()
                .join("|"),
            false,
            "its topics",
        ),
        1 => (format!("{}\\..*", escape(&prefix)), false, "the prefix"),
        _ => ("__debezium-heartbeat.*".to_owned(), true, "not a heartbeat"),
    };
    let predicates = match config.get("predicates").and_then(Value::as_str) {
        Some(list) => format!("{list},isOutbox"),
        None => "isOutbox".into(),
    };
    config.insert("predicates".into(), json!(predicates));
    config.insert(
        "predicates.isOutbox.type".into(),
        json!("org.apache.kafka.connect.transforms.predicates.TopicNameMatches"),
    );
    config.insert("predicates.isOutbox.pattern".into(), json!(pattern));
    config.insert("transforms.outbox.predicate".into(), json!("isOutbox"));
    if negate {
        config.insert("transforms.outbox.negate".into(), json!("true"));
    }
    case.describe = format!("{}; EventRouter predicate ({what})", case.describe);
}

/// A family's own random stream for a case: the seed multiplied before the case's number is
/// added (`seed ^ index` alone makes the same stream for seed 1 case 200 and seed 2 case 203).
fn family_rng(case: &Case, family: u64) -> Rng {
    Rng((case.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ family).wrapping_add(case.index as u64))
}

/// A subject name strategy drawn for `part` (`key` or `value`) in 60 % of cases: the record
/// name strategies only for values that are always records (`records_only`), the topic's
/// otherwise.
fn subject_strategy(rng: &mut Rng, part: &str, records_only: bool) -> Option<&'static str> {
    if !rng.chance(60) {
        return None;
    }
    let strategy = *rng.pick(&[
        "TopicNameStrategy",
        "RecordNameStrategy",
        "TopicRecordNameStrategy",
    ]);
    Some(if part == "value" && records_only {
        strategy
    } else {
        "TopicNameStrategy"
    })
}

/// What the registry families (Avro, Protobuf) change in a generated case: payloads expanded
/// only where every one is a Struct the converters take, no heartbeats (compared by the digits
/// of their JSON's time), and (`valid_names`) the field transforms' names and Flatten's
/// delimiter made ones Avro and Protobuf take (their refusal is a test of its own). Whether
/// every value is a record, as RecordNameStrategy and TopicRecordNameStrategy require (a
/// SerializationException for others, which fails Debezium's task): the EventRouter's
/// envelope, not ExtractField's payload.
fn registry_family(case: &mut Case, chosen: &mut Vec<String>, valid_names: bool) -> bool {
    let config = &mut case.config;
    if config.contains_key("transforms.outbox.table.expand.json.payload")
        && !case.events.iter().all(|e| e.expandable)
    {
        config.remove("transforms.outbox.table.expand.json.payload");
        chosen.push("not expanded (a payload Avro cannot hold)".to_owned());
    }
    if config.remove("heartbeat.interval.ms").is_some() {
        chosen.push("no heartbeats".to_owned());
    }
    config.remove("topic.heartbeat.prefix");
    case.heartbeat_topic = None;
    let records_only = config
        .get("transforms.outbox.table.fields.additional.placement")
        .and_then(Value::as_str)
        .is_some_and(|p| p.contains(":envelope"))
        && !config.contains_key("transforms.extract.type");
    if valid_names {
        for (_, v) in config.iter_mut() {
            if let Some(text) = v.as_str() {
                let fixed = match text {
                    "origin?" => Some("origin"),
                    "routed_topic!" => Some("routed_topic"),
                    _ => None,
                };
                if let Some(fixed) = fixed {
                    *v = json!(fixed);
                }
            }
        }
        if config.get("transforms.flat.delimiter") == Some(&json!(".")) {
            config.insert("transforms.flat.delimiter".into(), json!("_"));
        }
    }
    records_only
}

/// The Avro family: the value converter (and for some the key converter) is Confluent's or
/// Apicurio's AvroConverter, against the one registry both sides use (through a recording
/// front of its own each: `{ccompat}` and `{apicurio}` in the configuration), with Confluent's
/// options drawn: `auto.register.schemas`, the subject name strategies, `connect.meta.data`;
/// Apicurio's framing and id options. Both sides register under the same subjects (the same
/// topics), so an identical schema gets the identical id: the records are compared byte for
/// byte, and each side's registrations (subject, schema text) are compared after.
fn avro_family(case: &mut Case) {
    let mut rng = family_rng(case, 0xa7b0_0000_0000_0000);
    let mut chosen = Vec::new();
    let records_only = registry_family(case, &mut chosen, true);
    // auto.register.schemas=false (with use.latest.version or not), from a stream of its own.
    let mut lookup = Rng::stream(case.seed, case.index, 0xa7b1);
    let mut preregister = Rng::stream(case.seed, case.index, 0x9e9e_a7b2);
    let mut preregistered = false;
    let config = &mut case.config;
    // Apicurio's converter 2.6.13 (this test found two ways it differs from Confluent's, which
    // the relay now follows: ids cached by schema content across topics, an optional
    // top-level struct written as the bare record). OUTBOX_RELAY_DIFF_APICURIO=0 leaves it out.
    let apicurio = rng.chance(25);
    let value_class =
        if apicurio && std::env::var("OUTBOX_RELAY_DIFF_APICURIO").as_deref() != Ok("0") {
            "apicurio"
        } else {
            "confluent"
        };
    let key_avro = rng.chance(50);
    // A bytea payload's BinaryDataConverter keeps its place for half of them, the Avro
    // converter as its delegate (Debezium's outbox documentation shows it so): it writes what
    // is not bytes (the envelope, with additional fields placed there), its options under
    // `delegate.converter.type.` (from a stream of its own).
    let delegated = config.get("value.converter")
        == Some(&json!("io.debezium.converters.BinaryDataConverter"))
        && Rng::stream(case.seed, case.index, 0xb1da).chance(50);
    for (key, avro) in [("value.converter", true), ("key.converter", key_avro)] {
        if !avro {
            continue;
        }
        let key = if delegated && key == "value.converter" {
            let delegate = "value.converter.delegate.converter.type";
            config.retain(|k, _| k != delegate && !k.starts_with(&format!("{delegate}.")));
            chosen.push("value.converter=binarydata delegating to".to_owned());
            delegate
        } else {
            config.retain(|k, _| k != key && !k.starts_with(&format!("{key}.")));
            key
        };
        let set = |config: &mut Map<String, Value>, k: &str, v: &str| {
            config.insert(format!("{key}{k}"), json!(v));
        };
        let part = if key == "key.converter" {
            "key"
        } else {
            "value"
        };
        // A delegate is Confluent's: only its jars are beside Debezium's (Apicurio's hold
        // another Avro).
        if value_class == "apicurio" && !key.contains(".delegate.") {
            set(
                config,
                "",
                "io.apicurio.registry.utils.converter.AvroConverter",
            );
            set(config, ".apicurio.registry.url", "{apicurio}");
            set(config, ".apicurio.registry.auto-register", "true");
            // Its ids are cached by schema content for `check-period-ms` (30 s by default;
            // Apicurio's ERCache): once that passed, a topic with a schema another topic
            // registered registers it under its own artifact, a new global id (found by seed
            // 3 case 103 in a run of 88 cases, where Debezium's converter wrote 204 and the
            // relay, which then kept its ids for good, 10; it now expires them after the same
            // period). When that happens is a matter of each process's clock: an hour keeps
            // it out of the run.
            set(config, ".apicurio.registry.check-period-ms", "3600000");
            let mut options = vec![];
            if rng.chance(30) {
                set(config, ".apicurio.registry.headers.enabled", "false");
                options.push("headers.enabled=false");
                if rng.chance(50) {
                    set(config, ".apicurio.registry.as-confluent", "true");
                    options.push("as-confluent");
                }
            }
            if rng.chance(25) {
                set(config, ".apicurio.registry.use-id", "contentId");
                options.push("use-id=contentId");
            }
            chosen.push(format!("{key}=avro apicurio {}", options.join(" ")));
        } else {
            set(config, "", "io.confluent.connect.avro.AvroConverter");
            set(config, ".schema.registry.url", "{ccompat}");
            let mut options = vec![];
            if rng.chance(25) {
                set(config, ".auto.register.schemas", "true");
                options.push("auto.register.schemas=true".to_owned());
            }
            if let Some(strategy) = subject_strategy(&mut rng, part, records_only) {
                set(
                    config,
                    &format!(".{part}.subject.name.strategy"),
                    &format!("io.confluent.kafka.serializers.subject.{strategy}"),
                );
                options.push(strategy.to_owned());
            }
            if rng.chance(35) {
                let meta = rng.chance(50);
                set(config, ".connect.meta.data", &meta.to_string());
                options.push(format!("connect.meta.data={meta}"));
            }
            preregistered |= unregistered(&mut lookup, &mut preregister, config, key, &mut options);
            chosen.push(format!("{key}=avro confluent {}", options.join(" ")));
        }
    }
    // Where every look-up reads the latest version, half the cases register it with a doc:
    // another text and id, the same Avro Parsing Canonical Form, so both converters write the
    // record's own bytes under that id.
    let every_lookup_latest = config
        .iter()
        .filter(|(k, v)| k.ends_with(".auto.register.schemas") && v.as_str() == Some("false"))
        .all(|(k, _)| {
            config
                .get(&k.replace(".auto.register.schemas", ".use.latest.version"))
                .and_then(Value::as_str)
                == Some("true")
        });
    if preregistered && every_lookup_latest && Rng::stream(case.seed, case.index, 0xd0c5).chance(50)
    {
        case.latest_documented = true;
        chosen.push("the latest versions with a doc".to_owned());
    }
    case.avro = true;
    case.preregistered = preregistered;
    case.describe = format!("{}; avro: {}", case.describe, chosen.join("; "));
}

/// Confluent's `auto.register.schemas=false` (with `use.latest.version=true` for half, which
/// 7.0.16 reads only then) for some of a registry family's converters. For most of them
/// (`preregister`, a stream of its own) the schemas the case needs are registered beforehand
/// (see `PREREGISTERED`), and both sides find them: records and look-ups are compared. For the
/// others nothing is, so the subject is not found (Apicurio's 40401 or 40403): Debezium's
/// task dies on the case's first record, the relay dead-letters each record with the
/// registry's answer (README); checked as a documented behaviour. Returns whether the
/// converter's schemas are to be registered beforehand.
fn unregistered(
    lookup: &mut Rng,
    preregister: &mut Rng,
    config: &mut Map<String, Value>,
    key: &str,
    options: &mut Vec<String>,
) -> bool {
    if !lookup.chance(15) {
        return false;
    }
    let latest = lookup.chance(50);
    let preregistered = preregister.chance(70);
    options.retain(|o| o != "auto.register.schemas=true");
    // OUTBOX_RELAY_DIFF_LEARN: the run that learns what Debezium registers for them.
    let learning = preregistered && std::env::var_os("OUTBOX_RELAY_DIFF_LEARN").is_some();
    config.insert(
        format!("{key}.auto.register.schemas"),
        json!(if learning { "true" } else { "false" }),
    );
    if latest {
        if !learning {
            config.insert(format!("{key}.use.latest.version"), json!("true"));
        }
        options.push("auto.register.schemas=false use.latest.version=true".to_owned());
    } else {
        options.push("auto.register.schemas=false".to_owned());
    }
    if preregistered {
        options.push("registered beforehand".to_owned());
    }
    preregistered
}

/// The options of a Protobuf case drawn before it is generated: whether its names are left
/// as they are for `scrub.invalid.names` to scrub.
#[derive(Clone, Copy)]
struct ProtobufDraw {
    scrub: bool,
}

impl ProtobufDraw {
    fn new(seed: u64, index: usize) -> Self {
        let mut rng = Rng::stream(seed, index, 0x9b0f_5c2b);
        ProtobufDraw {
            scrub: rng.chance(35),
        }
    }
}

/// The Protobuf family: Confluent's `io.confluent.connect.protobuf.ProtobufConverter` 7.0.16
/// as value (and for half the cases key) converter on Debezium's side, the relay's on the
/// other, against the one registry (`{ccompat}`), as in the Avro family: records byte for
/// byte (schema id and message indexes included), registrations by subject. Drawn: the subject
/// name strategies, `auto.register.schemas`, `optional.for.nullables`,
/// `wrapper.for.nullables`, `scrub.invalid.names` (with the names left as generated: JSON
/// keys with spaces and Cyrillic letters, field transforms' `origin?`, Flatten's `.`), options
/// that change only what is read back, and a topic prefix that is not a Protobuf package name
/// with `schema.name.adjustment.mode` none or `avro`.
fn protobuf_family(case: &mut Case, draw: ProtobufDraw) {
    let mut rng = Rng::stream(case.seed, case.index, 0x9b0f_0000);
    let mut chosen = Vec::new();
    let records_only = registry_family(case, &mut chosen, !draw.scrub);
    let (seed, index) = (case.seed, case.index);
    let mut preregister = Rng::stream(seed, index, 0x9e9e_9b0f);
    let mut preregistered = false;
    let config = &mut case.config;
    // Schema names: the envelope's and the change events' come from topic.prefix, which a
    // Protobuf package name cannot hold with a hyphen.
    if !config.contains_key("schema.name.adjustment.mode") && rng.chance(40) {
        config.insert("topic.prefix".into(), json!(format!("dbz-S{seed}C{index}")));
        // (avro_unicode the relay refuses at start.)
        let mode = *rng.pick(&["none", "avro"]);
        config.insert("schema.name.adjustment.mode".into(), json!(mode));
        chosen.push(format!(
            "topic.prefix with a hyphen, schema.name.adjustment.mode={mode}"
        ));
    }
    let key_protobuf = rng.chance(50);
    for (key, protobuf) in [("value.converter", true), ("key.converter", key_protobuf)] {
        if !protobuf {
            continue;
        }
        config.retain(|k, _| k != key && !k.starts_with(&format!("{key}.")));
        let part = key.trim_end_matches(".converter");
        let mut options = vec![];
        let mut set = |config: &mut Map<String, Value>, k: &str, v: &str| {
            config.insert(format!("{key}.{k}"), json!(v));
            options.push(format!("{k}={v}"));
        };
        config.insert(
            key.into(),
            json!("io.confluent.connect.protobuf.ProtobufConverter"),
        );
        config.insert(format!("{key}.schema.registry.url"), json!("{ccompat}"));
        if rng.chance(25) {
            set(config, "auto.register.schemas", "true");
        }
        if let Some(strategy) = subject_strategy(&mut rng, part, records_only) {
            set(
                config,
                &format!("{part}.subject.name.strategy"),
                &format!("io.confluent.kafka.serializers.subject.{strategy}"),
            );
        }
        for option in [
            "optional.for.nullables",
            "wrapper.for.nullables",
            "scrub.invalid.names",
        ] {
            let drawn = match option {
                "scrub.invalid.names" => draw.scrub,
                _ => rng.chance(30),
            };
            if drawn {
                set(config, option, "true");
            }
        }
        // Options that change only what the converter reads back: nothing written differs.
        if rng.chance(20) {
            let (option, value) = *rng.pick(&[
                ("enhanced.protobuf.schema.support", "true"),
                ("int.for.enums", "true"),
                ("generate.index.for.unions", "false"),
                ("optional.for.proto2", "true"),
                ("wrapper.for.raw.primitives", "false"),
            ]);
            set(config, option, value);
        }
        preregistered |= unregistered(&mut rng, &mut preregister, config, key, &mut options);
        chosen.push(format!("{key}=protobuf {}", options.join(" ")));
    }
    case.avro = true;
    case.preregistered = preregistered;
    case.describe = format!("{}; protobuf: {}", case.describe, chosen.join("; "));
}

/// What a Filter's predicate asks, and of which records it is true.
#[derive(Clone, Copy, Debug)]
enum FilterBy {
    /// TopicNameMatches `.*Customer.*`.
    CustomerTopic,
    /// TopicNameMatches `.*Order.*|.*\.transaction`.
    OrderOrTransactionTopic,
    /// HasHeaderKey `eventType` (every outbox record; no transaction record).
    EventTypeHeader,
    /// RecordIsTombstone.
    Tombstone,
}

/// The Filter family: Kafka Connect's Filter with a predicate (negated or not) in the chain
/// after the EventRouter, right after it or last. The records expected are those of the
/// case's events and transaction records that the Filter keeps, decided record by record, so
/// that a relay that drops too much or too little fails.
fn filter_family(case: &mut Case) {
    let mut rng = family_rng(case, 0xf117_e400_0000_0000);
    let messages = case.messages();
    let config = &mut case.config;
    let transforms: Vec<String> = config["transforms"]
        .as_str()
        .unwrap_or("outbox")
        .split(',')
        .map(str::to_owned)
        .collect();
    // Transforms after which a record's headers or nullness are not the EventRouter's: the
    // Filter goes right after the EventRouter where they are.
    let reshaping = ["h2v", "hoist", "extract", "hfrom"]
        .iter()
        .any(|a| transforms.iter().any(|t| t == a));
    let last = !reshaping && rng.chance(50);
    let by = *rng.pick(&[
        FilterBy::CustomerTopic,
        FilterBy::OrderOrTransactionTopic,
        FilterBy::EventTypeHeader,
        FilterBy::Tombstone,
    ]);
    // Which records are null where a payload is expanded or a message decoded is not
    // decided here: RecordIsTombstone goes where it is (HasHeaderKey instead).
    let expand = config.contains_key("transforms.outbox.table.expand.json.payload");
    let by = match by {
        FilterBy::Tombstone if expand || messages => FilterBy::EventTypeHeader,
        by => by,
    };
    let negate = rng.chance(50);
    let predicate_options: Vec<(&str, &str)> = match by {
        FilterBy::CustomerTopic => vec![
            (
                "type",
                "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            ),
            ("pattern", ".*Customer.*"),
        ],
        FilterBy::OrderOrTransactionTopic => vec![
            (
                "type",
                "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            ),
            ("pattern", ".*Order.*|.*\\.transaction"),
        ],
        FilterBy::EventTypeHeader => vec![
            (
                "type",
                "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
            ),
            ("name", "eventType"),
        ],
        FilterBy::Tombstone => vec![(
            "type",
            "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
        )],
    };
    for (k, v) in predicate_options {
        config.insert(format!("predicates.filterBy.{k}"), json!(v));
    }
    let mut declared: Vec<String> = config
        .get("predicates")
        .and_then(Value::as_str)
        .map(|p| p.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    declared.push("filterBy".into());
    config.insert("predicates".into(), json!(declared.join(",")));
    config.insert(
        "transforms.filter.type".into(),
        json!("org.apache.kafka.connect.transforms.Filter"),
    );
    config.insert("transforms.filter.predicate".into(), json!("filterBy"));
    if negate || rng.chance(30) {
        config.insert("transforms.filter.negate".into(), json!(negate.to_string()));
    }
    let mut chain = transforms.clone();
    let at = if last {
        chain.len()
    } else {
        chain.iter().position(|t| t == "outbox").unwrap() + 1
    };
    chain.insert(at, "filter".into());
    config.insert("transforms".into(), json!(chain.join(",")));
    // Kafka's Filter drops a record where its predicate (negated or not) holds. A record's
    // value is null where the EventRouter makes a tombstone, and where the value is the
    // payload itself (no envelope) and that is NULL.
    let envelope = config
        .get("transforms.outbox.table.fields.additional.placement")
        .and_then(Value::as_str)
        .is_some_and(|p| p.contains(":envelope"));
    let null_value = |e: &Event| e.payload_null && (case.tombstones || !envelope);
    let holds = |event: Option<&Event>| -> bool {
        match (by, event) {
            (FilterBy::CustomerTopic, Some(e)) => e.customer,
            (FilterBy::OrderOrTransactionTopic, Some(e)) => !e.customer,
            (FilterBy::OrderOrTransactionTopic, None) => true,
            (FilterBy::EventTypeHeader, Some(_)) => true,
            (FilterBy::Tombstone, Some(e)) => null_value(e),
            (_, None) => false,
        }
    };
    let kept = case
        .events
        .iter()
        .filter(|e| holds(Some(e)) == negate)
        .count()
        + if holds(None) == negate {
            case.transaction_records
        } else {
            0
        };
    // A heartbeat is neither: dropped where a transaction record is, save by its topic.
    let heartbeat_holds = false;
    if heartbeat_holds != negate {
        case.heartbeat_topic = None;
    }
    case.expected = kept;
    case.describe = format!(
        "{}; filter {by:?} negate {negate} {}, {kept} of {} records kept",
        case.describe,
        if last {
            "last"
        } else {
            "after the EventRouter"
        },
        case.events.len() + case.transaction_records
    );
}

/// Kafka Connect's transforms before the EventRouter, on the change event Debezium makes of
/// each outbox row (not on heartbeats and transaction records: a negated `TopicNameMatches`):
/// a `HeaderFrom$Value` copying the row image `after` (and some of `before`, `op`, `source`,
/// or moving `before`, `source` or `transaction` out of it) into headers, a `HeaderFrom$Key`
/// copying the change event's key (the primary key's struct), a `ReplaceField$Value`
/// dropping a block the EventRouter does not read, an `InsertField$Value`, a `ValueToKey`
/// the EventRouter then replaces. The EventRouter routes what they leave; the headers they
/// add come before its own, in the header converter drawn (Kafka's SimpleHeaderConverter, or
/// a JsonConverter with or without schemas). DELETEs write no tombstones (a tombstone fails
/// HeaderFrom, and Debezium's task with it). Cases that decode logical decoding messages
/// keep their chain: transforms before the EventRouter are refused there.
fn before_family(case: &mut Case) {
    let mut rng = family_rng(case, 0xbef0_4e00_0000_0000);
    let config = &mut case.config;
    let transforms = config["transforms"].as_str().unwrap_or("outbox").to_owned();
    if transforms.starts_with("decode,") {
        case.describe = format!(
            "{}; messages: no transforms before the EventRouter",
            case.describe
        );
        return;
    }
    let id_column = config
        .get("transforms.outbox.table.field.event.id")
        .and_then(Value::as_str)
        .unwrap_or("id")
        .to_owned();
    // A snapshot row's source block holds when and where each side's own snapshot read it
    // (README): copied only from streamed rows.
    let snapshot = config.get("snapshot.mode").and_then(Value::as_str) == Some("initial");
    let mut set = |k: &str, v: &str| {
        config.insert(k.to_owned(), json!(v));
    };
    set("tombstones.on.delete", "false");
    const T: &str = "org.apache.kafka.connect.transforms.";
    let mut aliases: Vec<&str> = Vec::new();
    let mut chosen: Vec<String> = Vec::new();
    let streamed: &[&[&str]] = &[
        &["before"],
        &["source"],
        &["transaction"],
        &["before", "source"],
    ];
    let snapshotted: &[&[&str]] = &[&["before"], &["transaction"], &["before", "transaction"]];
    let choices = if snapshot { snapshotted } else { streamed };
    let blocks = choices[rng.below(choices.len())];
    let (fields, headers, operation) = if rng.chance(30) {
        let headers: Vec<String> = blocks.iter().map(|b| format!("moved_{b}")).collect();
        (blocks.join(","), headers.join(","), "move")
    } else {
        let mut fields = vec!["after"];
        for extra in ["before", "op", "source"] {
            if rng.chance(40) && !(snapshot && extra == "source") {
                fields.push(extra);
            }
        }
        let headers: Vec<String> = fields.iter().map(|f| format!("cdc_{f}")).collect();
        (fields.join(","), headers.join(","), "copy")
    };
    set("transforms.row.type", &format!("{T}HeaderFrom$Value"));
    set("transforms.row.fields", &fields);
    set("transforms.row.headers", &headers);
    set("transforms.row.operation", operation);
    aliases.push("row");
    chosen.push(format!("HeaderFrom {operation} {fields}"));
    if rng.chance(50) {
        set("transforms.pk.type", &format!("{T}HeaderFrom$Key"));
        set("transforms.pk.fields", &id_column);
        set("transforms.pk.headers", "cdc_key");
        set("transforms.pk.operation", "copy");
        aliases.push("pk");
        chosen.push("HeaderFrom$Key".into());
    }
    if rng.chance(40) {
        let block = rng.text(&["before", "transaction"]);
        set("transforms.trim.type", &format!("{T}ReplaceField$Value"));
        set("transforms.trim.exclude", block);
        aliases.push("trim");
        chosen.push(format!("ReplaceField exclude {block}"));
    }
    if rng.chance(30) {
        set("transforms.stage.type", &format!("{T}InsertField$Value"));
        set("transforms.stage.static.field", "stage");
        set("transforms.stage.static.value", "before-router");
        aliases.push("stage");
        chosen.push("InsertField".into());
    }
    if rng.chance(30) {
        set("transforms.rekey.type", &format!("{T}ValueToKey"));
        set("transforms.rekey.fields", "op");
        aliases.push("rekey");
        chosen.push("ValueToKey".into());
    }
    for alias in &aliases {
        set(&format!("transforms.{alias}.predicate"), "isInternal");
        set(&format!("transforms.{alias}.negate"), "true");
    }
    set(
        "predicates.isInternal.type",
        "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    );
    set("predicates.isInternal.pattern", "__.*|.*\\.transaction");
    if !config.contains_key("header.converter") && rng.chance(60) {
        let schemas = rng.chance(50);
        config.insert(
            "header.converter".into(),
            json!("org.apache.kafka.connect.json.JsonConverter"),
        );
        config.insert(
            "header.converter.schemas.enable".into(),
            json!(schemas.to_string()),
        );
        chosen.push(format!("header.converter=json schemas {schemas}"));
    }
    let predicates = match config.get("predicates").and_then(Value::as_str) {
        Some(list) => format!("{list},isInternal"),
        None => "isInternal".into(),
    };
    config.insert("predicates".into(), json!(predicates));
    config.insert(
        "transforms".into(),
        json!(format!("{},{transforms}", aliases.join(","))),
    );
    case.describe = format!(
        "{}; before the EventRouter: {}",
        case.describe,
        chosen.join(", ")
    );
}

/// Whether `topic` is one of `case`'s (its marker `S<seed>C<index>`, not followed by a digit).
fn of_case(topic: &str, case: &Case) -> bool {
    let marker = format!("S{}C{}", case.seed, case.index);
    topic.match_indices(&marker).any(|(i, _)| {
        !topic[i + marker.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// The connector JSON for one side: its own slot and publication, and registry, all else the
/// same.
fn connector(case: &Case, side: &str, registry: &RegistryUrls) -> Value {
    let mut config = case.config.clone();
    for (_, v) in config.iter_mut() {
        if let Some(text) = v.as_str() {
            if text == "{ccompat}" {
                *v = json!(registry.ccompat);
            } else if text == "{apicurio}" {
                *v = json!(registry.apicurio);
            }
        }
    }
    config.insert("slot.name".into(), json!(format!("{}_{side}", case.table)));
    config.insert(
        "publication.name".into(),
        json!(format!("{}_{side}", case.table)),
    );
    json!({ "name": format!("{}-{side}", case.name()), "config": config })
}

/// The registry URLs of one side (its recording front's).
#[derive(Default)]
struct RegistryUrls {
    ccompat: String,
    apicurio: String,
}

fn topics_of(bootstrap: &str) -> Vec<String> {
    let mut topics: Vec<String> = outbox_relay_testkit::kafka::list_topics(bootstrap)
        .unwrap()
        .into_iter()
        .filter(|t| compared_topic(t))
        .collect();
    topics.sort();
    topics
}

fn read_all(bootstrap: &str) -> BTreeMap<String, Vec<ConsumedRecord>> {
    topics_of(bootstrap)
        .into_iter()
        .map(|t| {
            let records = outbox_relay_testkit::read_topic(bootstrap, &t).unwrap();
            (t, records)
        })
        .collect()
}

/// How many records the broker holds outside its own topics (watermarks: one client, no reads).
fn held(bootstrap: &str) -> usize {
    held_by_topic(bootstrap).values().sum()
}

fn held_by_topic(bootstrap: &str) -> BTreeMap<String, usize> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("log_level", "3")
        .create()
        .unwrap();
    let metadata = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .unwrap();
    let mut out = BTreeMap::new();
    for topic in metadata
        .topics()
        .iter()
        .filter(|t| compared_topic(t.name()))
    {
        for partition in topic.partitions() {
            if let Ok((low, high)) =
                consumer.fetch_watermarks(topic.name(), partition.id(), Duration::from_secs(10))
            {
                *out.entry(topic.name().to_owned()).or_default() += (high - low) as usize;
            }
        }
    }
    out
}

/// The lines of `log` worth reading in a failure: errors and warnings, and the last lines.
fn log_excerpt(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let notable: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains("ERROR") || l.contains(" WARN") || l.contains("Exception"))
        .take(40)
        .copied()
        .collect();
    let tail = &lines[lines.len().saturating_sub(30)..];
    format!("{}\n...\n{}", notable.join("\n"), tail.join("\n"))
}

/// The header's text with the one UUID in it taken out, or `None` if it holds none.
fn without_uuid(bytes: Option<&[u8]>) -> Option<String> {
    let text = std::str::from_utf8(bytes?).ok()?;
    let is_uuid = |s: &str| {
        s.len() == 36
            && s.char_indices().all(|(i, c)| {
                if [8, 13, 18, 23].contains(&i) {
                    c == '-'
                } else {
                    c.is_ascii_hexdigit()
                }
            })
    };
    (0..text.len().saturating_sub(35))
        .filter(|i| text.is_char_boundary(*i) && text.is_char_boundary(i + 36))
        .find(|i| is_uuid(&text[*i..i + 36]))
        .map(|i| format!("{}<uuid>{}", &text[..i], &text[i + 36..]))
}

fn show(bytes: &Option<Vec<u8>>) -> String {
    match bytes {
        None => "null".into(),
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => format!("{s:?}"),
            Err(_) => format!("{b:02x?}"),
        },
    }
}

/// The differences between Debezium's record and the relay's.
/// The records' timestamps are compared when `exact_time` (the event's own timestamp);
/// otherwise each is the time its side read the event.
fn differences(dbz: &ConsumedRecord, relay: &ConsumedRecord, exact_time: bool) -> Vec<String> {
    let mut out = Vec::new();
    if exact_time && dbz.timestamp_millis != relay.timestamp_millis {
        out.push(format!(
            "timestamp: debezium {:?} relay {:?}",
            dbz.timestamp_millis, relay.timestamp_millis
        ));
    }
    if dbz.key != relay.key {
        out.push(format!(
            "key: debezium {} relay {}",
            show(&dbz.key),
            show(&relay.key)
        ));
    }
    if dbz.value != relay.value {
        out.push(format!(
            "value:\n  debezium {}\n  relay    {}",
            show(&dbz.value),
            show(&relay.value)
        ));
    }
    let names = |r: &ConsumedRecord| r.headers.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    if names(dbz) != names(relay) {
        out.push(format!(
            "header names: debezium {:?} relay {:?}",
            names(dbz),
            names(relay)
        ));
    } else {
        for ((name, d), (_, r)) in dbz.headers.iter().zip(&relay.headers) {
            if name == "__debezium.context.runId" {
                // The UUID (in whatever the header converter writes around it) differs.
                let (dd, rd) = (without_uuid(d.as_deref()), without_uuid(r.as_deref()));
                if dd.is_none() || rd.is_none() || dd != rd {
                    out.push(format!(
                        "{name}: not UUIDs alike: {} / {}",
                        show(d),
                        show(r)
                    ));
                }
            } else if d != r {
                out.push(format!(
                    "header {name}: debezium {} relay {}",
                    show(d),
                    show(r)
                ));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_writes_what_debezium_writes_for_generated_cases() {
    let seeds: Vec<u64> = match std::env::var("OUTBOX_RELAY_DIFF_SEEDS") {
        Ok(list) => list
            .split(',')
            .map(|s| s.trim().parse().expect("OUTBOX_RELAY_DIFF_SEEDS: numbers"))
            .collect(),
        Err(_) => DEFAULT_SEEDS.to_vec(),
    };
    let started = Instant::now();
    let phase = |what: &str| {
        eprintln!(
            "differential: {what} after {:.1} s",
            started.elapsed().as_secs_f64()
        )
    };
    let per_seed: usize = std::env::var("OUTBOX_RELAY_DIFF_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let per_family = |var: &str| -> usize {
        std::env::var(var)
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(DEFAULT_FAMILY_CASES)
    };
    let families = [
        (Family::Plain, per_seed),
        (Family::Avro, per_family("OUTBOX_RELAY_DIFF_AVRO_CASES")),
        (Family::Filter, per_family("OUTBOX_RELAY_DIFF_FILTER_CASES")),
        (
            Family::Protobuf,
            per_family("OUTBOX_RELAY_DIFF_PROTOBUF_CASES"),
        ),
        (Family::Before, per_family("OUTBOX_RELAY_DIFF_BEFORE_CASES")),
    ];
    let per_seed: usize = families.iter().map(|(_, n)| n).sum();
    // The Avro and Protobuf cases' converters for Debezium (before anything starts: the
    // message says how to install them), and their registry, started while PostgreSQL is.
    let registry_cases = families[1].1 + families[3].1 > 0;
    let plugins = registry_cases.then(|| registry_converters().unwrap_or_else(|e| panic!("{e:#}")));
    let registry = registry_cases.then(|| std::thread::spawn(Registry::start));
    // Two slots per case (Debezium's and the relay's), both streaming at once.
    let cases_wanted = seeds.len() * per_seed;
    assert!(
        cases_wanted <= 100,
        "{cases_wanted} cases: at most 100 run at once (two slots each, max_replication_slots 200); \
         give OUTBOX_RELAY_DIFF_SEEDS in groups of at most {} seeds",
        100 / per_seed.max(1)
    );
    let pg = PgCluster::start_with_config(
        "max_replication_slots = 200\nmax_wal_senders = 200\nmax_connections = 400\n",
    )
    .unwrap_or_else(|e| panic!("PostgreSQL for this test: {e:#}"));
    let db = pg.connect().await.unwrap();
    db.batch_execute(EXTRA_TYPES).await.unwrap();
    db.batch_execute(&format!("CREATE DATABASE {MESSAGES_DB}"))
        .await
        .unwrap();
    let messages_db =
        outbox_relay_testkit::postgres::connect(&pg.url_for("postgres", "postgres", MESSAGES_DB))
            .await
            .unwrap();
    messages_db.batch_execute(EXTRA_TYPES).await.unwrap();
    let cases: Vec<Case> = seeds
        .iter()
        .flat_map(|seed| {
            families.iter().flat_map(move |(family, n)| {
                (0..*n).map(move |i| (*seed, first_index(*family) + i, *family))
            })
        })
        .map(|(seed, i, family)| generate_case(seed, i, pg.port(), family))
        // OUTBOX_RELAY_DIFF_ONLY=s8c103,s34c102: those cases of the seeds and families drawn.
        .filter(|case| {
            std::env::var("OUTBOX_RELAY_DIFF_ONLY").map_or(true, |only| {
                only.split(',').any(|n| n.trim() == case.name())
            })
        })
        .collect();
    // The schemas registered beforehand, where the fixture holds the case (else it stays the
    // variant that finds nothing).
    let learning = std::env::var_os("OUTBOX_RELAY_DIFF_LEARN").is_some();
    let mut preregistered = load_preregistered();
    for case in cases.iter().filter(|c| c.latest_documented) {
        for registration in preregistered.get_mut(&case.name()).into_iter().flatten() {
            registration.document();
        }
    }
    let mut cases = cases;
    for case in cases.iter_mut().filter(|c| c.preregistered) {
        if !learning && !preregistered.contains_key(&case.name()) {
            case.preregistered = false;
            case.describe = case.describe.replace(
                "registered beforehand",
                "registered beforehand, not in the fixture: nothing registered",
            );
        }
    }
    let cases = cases;
    for case in &cases {
        eprintln!("differential: {}: {}", case.name(), case.describe);
        // OUTBOX_RELAY_DIFF_SHOW=s7c101: that case's SQL and connector options too.
        if std::env::var("OUTBOX_RELAY_DIFF_SHOW").is_ok_and(|n| n == case.name()) {
            eprintln!(
                "differential: {}: {}\n{}\n{}\n{}",
                case.name(),
                case.ddl,
                case.before.join("\n"),
                case.after.join("\n"),
                serde_json::to_string_pretty(&case.config).unwrap()
            );
        }
    }
    let db_of = |case: &Case| if case.messages() { &messages_db } else { &db };
    for case in &cases {
        let db = db_of(case);
        db.batch_execute(&case.ddl).await.unwrap();
        for insert in &case.before {
            db.batch_execute(insert)
                .await
                .unwrap_or_else(|e| panic!("{}: {insert}: {e}", case.name()));
        }
    }

    let dbz_broker = Broker::start(Storage::Sqlite).unwrap();
    let relay_broker = Broker::start(Storage::Sqlite).unwrap();
    let worker = |bootstrap: String| {
        format!(
            "bootstrap.servers={bootstrap}\n\
             key.converter=org.apache.kafka.connect.json.JsonConverter\n\
             value.converter=org.apache.kafka.connect.json.JsonConverter\n"
        )
    };
    // One registry, a recording front for each side.
    let registry = registry.map(|r| {
        r.join()
            .unwrap()
            .unwrap_or_else(|e| panic!("the Avro cases' registry: {e:#}"))
    });
    if let Some(registry) = registry.as_ref().filter(|_| !learning) {
        for case in cases.iter().filter(|c| c.preregistered) {
            for request in &preregistered[&case.name()] {
                let (status, body) = outbox_relay_testkit::http::post(
                    &format!("127.0.0.1:{}", registry.port()),
                    &request.path,
                    "application/vnd.schemaregistry.v1+json",
                    &request.body,
                );
                assert_eq!(
                    status,
                    200,
                    "{}: registering beforehand {}: {body}",
                    case.name(),
                    request.path
                );
            }
        }
    }
    let fronts = registry.as_ref().map(|r| {
        let front = || RecordingProxy::start(r.port()).unwrap();
        (front(), front())
    });
    let urls = |front: Option<&RecordingProxy>| match front {
        Some(front) => RegistryUrls {
            ccompat: format!("http://127.0.0.1:{}/apis/ccompat/v7", front.port()),
            apicurio: format!("http://127.0.0.1:{}/apis/registry/v2", front.port()),
        },
        None => RegistryUrls::default(),
    };
    let (dbz_urls, relay_urls) = (
        urls(fronts.as_ref().map(|f| &f.0)),
        urls(fronts.as_ref().map(|f| &f.1)),
    );
    let mut dbz_worker = worker(dbz_broker.bootstrap_servers());
    if let Some(plugins) = &plugins {
        dbz_worker.push_str(&format!("plugin.path={}\n", plugins.display()));
    }
    let dbz_connectors: Vec<Value> = cases
        .iter()
        .map(|c| connector(c, "dbz", &dbz_urls))
        .collect();
    // Confluent's AvroConverter beside Debezium's jars too, where a BinaryDataConverter
    // delegates to it.
    let beside: Vec<std::path::PathBuf> = match &plugins {
        Some(plugins)
            if cases
                .iter()
                .any(|c| c.describe.contains("binarydata delegating to")) =>
        {
            vec![plugins.join("confluent-avro")]
        }
        _ => Vec::new(),
    };
    let mut debezium = ConnectStandalone::start_beside(&dbz_worker, &dbz_connectors, &beside)
        .unwrap_or_else(|e| panic!("Debezium: {e:#}"));

    let dir = tempfile::tempdir().unwrap();
    let worker_file = dir.path().join("worker.properties");
    std::fs::write(&worker_file, worker(relay_broker.bootstrap_servers())).unwrap();
    let mut args = vec![
        "connect".to_owned(),
        "--worker-config".into(),
        worker_file.display().to_string(),
        "--listen".into(),
        format!("127.0.0.1:{}", outbox_relay_testkit::net::free_port()),
        "--metrics-address".into(),
        "127.0.0.1:0".into(),
    ];
    for case in &cases {
        let path = dir.path().join(format!("{}.json", case.name()));
        std::fs::write(&path, connector(case, "relay", &relay_urls).to_string()).unwrap();
        args.push(path.display().to_string());
    }
    // No canary: Debezium, on the same database, would capture its messages too.
    let relay = RelayProcess::spawn(
        Path::new(RELAY),
        &args,
        &[("OUTBOX_RELAY_CANARY_INTERVAL", "0")],
    )
    .unwrap();
    phase("both started");

    // Both sides hold their slots before the streamed rows are written.
    let names: Vec<String> = cases.iter().map(|c| format!("{}-dbz", c.name())).collect();
    let failed =
        tokio::task::block_in_place(|| debezium.wait_running(&names, Duration::from_secs(180)))
            .unwrap_or_else(|e| panic!("{e:#}"));
    // A task that fails on its snapshot is judged below with the other failures.
    for (name, trace) in &failed {
        eprintln!(
            "differential: Debezium's {name} failed early: {}",
            cause(trace)
        );
    }
    phase("Debezium's connectors running");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let active: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'diff_%' AND active",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        // A Debezium task that failed on its snapshot never streams: its slot stays
        // inactive, and the case is judged with the failures below.
        let inactive: Vec<String> = db
            .query(
                "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'diff_%_dbz' AND NOT active",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let failed_early = cases
            .iter()
            .filter(|c| inactive.contains(&format!("{}_dbz", c.table)))
            .filter(|c| {
                debezium
                    .task_state(&format!("{}-dbz", c.name()))
                    .is_some_and(|(state, _)| state == "FAILED")
            })
            .count();
        if active as usize + failed_early == 2 * cases.len() {
            break;
        }
        if started.elapsed().as_secs().is_multiple_of(10) {
            let waiting: Vec<String> = db
                .query(
                    "SELECT slot_name || ' ' || CASE WHEN active THEN 'active' ELSE 'inactive' END \
                     FROM pg_replication_slots WHERE slot_name LIKE 'diff_%' AND NOT active",
                    &[],
                )
                .await
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            let missing: Vec<String> = cases
                .iter()
                .flat_map(|c| [format!("{}_dbz", c.table), format!("{}_relay", c.table)])
                .collect();
            eprintln!(
                "differential: waiting for slots: {waiting:?} (of {})",
                missing.len()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{active} of {} slots active\nrelay:\n{}\ndebezium:\n{}",
            2 * cases.len(),
            relay.log(),
            debezium.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    phase("every slot active");
    for case in &cases {
        let db = db_of(case);
        for insert in &case.after {
            db.batch_execute(insert)
                .await
                .unwrap_or_else(|e| panic!("{}: {insert}: {e}", case.name()));
        }
    }

    // Until each side has written what Debezium writes for these rows.
    let expected: usize = cases.iter().map(|c| c.expected).sum();
    // Cases whose Debezium task failed (its trace's cause), which it writes nothing more for.
    let mut debezium_failed: BTreeMap<String, String> = BTreeMap::new();
    let (dbz, ours) = tokio::task::block_in_place(|| {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            for case in &cases {
                if let Some((state, trace)) = debezium.task_state(&format!("{}-dbz", case.name())) {
                    if state == "FAILED" {
                        debezium_failed.insert(case.name(), cause(&trace.unwrap_or_default()));
                    }
                }
            }
            // Debezium's side case by case: a case whose task is about to fail (FAILED not
            // shown yet) must not be made up for by another's records.
            let by_dbz = held_by_topic(&dbz_broker.bootstrap_servers());
            let by_relay = held_by_topic(&relay_broker.bootstrap_servers());
            let held_of = |m: &BTreeMap<String, usize>, c: &Case| -> usize {
                m.iter()
                    .filter(|(t, _)| of_case(t, c))
                    .map(|(_, n)| n)
                    .sum()
            };
            // The relay's dead letters name no case in their topic: its side is counted whole.
            let ours: usize = by_relay.values().sum();
            let complete = ours >= expected
                && cases.iter().all(|c| {
                    debezium_failed.contains_key(&c.name()) || held_of(&by_dbz, c) >= c.expected
                });
            if complete {
                // Anything more would arrive now: read once more after a pause.
                std::thread::sleep(Duration::from_secs(2));
                return (
                    read_all(&dbz_broker.bootstrap_servers()),
                    read_all(&relay_broker.bootstrap_servers()),
                );
            }
            if Instant::now() > deadline {
                let by_dbz = held_by_topic(&dbz_broker.bootstrap_servers());
                let by_relay = held_by_topic(&relay_broker.bootstrap_servers());
                let short: Vec<String> = cases
                    .iter()
                    .flat_map(|c| {
                        let sum = |m: &BTreeMap<String, usize>| -> usize {
                            m.iter()
                                .filter(|(t, _)| of_case(t, c))
                                .map(|(_, n)| n)
                                .sum()
                        };
                        let (d, r) = (sum(&by_dbz), sum(&by_relay));
                        (d != c.expected || r != c.expected).then(|| {
                            format!(
                                "{} (expected {}, debezium {d}, relay {r}, debezium task {:?}): {}",
                                c.name(),
                                c.expected,
                                debezium.task_state(&format!("{}-dbz", c.name())),
                                c.describe
                            )
                        })
                    })
                    .collect();
                panic!(
                    "debezium wrote {} and the relay {} of {expected} records; short cases:\n{}\nrelay log:\n{}\ndebezium log:\n{}",
                    held(&dbz_broker.bootstrap_servers()),
                    held(&relay_broker.bootstrap_servers()),
                    short.join("\n"),
                    log_excerpt(&relay.log()),
                    log_excerpt(&debezium.log())
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    });

    phase("both wrote everything");
    let mut report = Vec::new();
    let failed_case = |topic: &String| {
        debezium_failed.keys().any(|name| {
            let case = cases.iter().find(|c| &c.name() == name).unwrap();
            of_case(topic, case)
        })
    };
    // The relay's dead letters, checked case by case with Debezium's failures below.
    let dead_letters: Vec<&ConsumedRecord> = ours
        .get(DEAD_LETTER_TOPIC)
        .map(|r| r.iter().collect())
        .unwrap_or_default();
    let dbz_topics: Vec<&String> = dbz.keys().filter(|t| !failed_case(t)).collect();
    let our_topics: Vec<&String> = ours
        .keys()
        .filter(|t| !failed_case(t) && *t != DEAD_LETTER_TOPIC)
        .collect();
    if dbz_topics != our_topics {
        report.push(format!(
            "topics: debezium {dbz_topics:?}\n        relay    {our_topics:?}"
        ));
    }
    // Where Debezium's task dies, the relay does what README documents, checked here.
    let mut relay_on_its_own = 0;
    let mut dead_lettered = 0;
    for (name, why) in &debezium_failed {
        let case = cases.iter().find(|c| &c.name() == name).unwrap();
        let written: usize = ours
            .iter()
            .filter(|(t, _)| of_case(t, case))
            .map(|(_, r)| r.len())
            .sum();
        // A message names its source `message <prefix>`, the case's table and `_msg`.
        // A record a transform or converter failed on names its table (or, a transaction
        // record, its topic) and the transform or converter.
        let of_this_case = |r: &&&ConsumedRecord| {
            let table = r.header_str("outbox-relay.source.table");
            table.starts_with(&format!("message {}_", case.table))
                || ((table
                    .strip_prefix(&format!("public.{}", case.table))
                    .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
                    || r.header("outbox-relay.original.topic")
                        .and_then(|t| std::str::from_utf8(t).ok())
                        .is_some_and(|t| of_case(t, case)))
                    && a_transform_or_converter(r.header_str("outbox-relay.error.reason")))
        };
        let dead: usize = dead_letters.iter().filter(of_this_case).count();
        // The relay's reason carries Kafka Connect's own message for the failure.
        if documented_behaviour(why) == Some(Behaviour::DeadLettersTheRecord) {
            let message = why
                .split_once("Exception: ")
                .map_or(why.as_str(), |(_, m)| m);
            // SimpleDateFormat's message names the value Kafka's own message names too.
            let unparseable = message
                .strip_prefix("Unparseable date: \"")
                .and_then(|v| v.strip_suffix('"'))
                .map(|v| format!("Could not parse timestamp: value ({v})"));
            let message = unparseable.as_deref().unwrap_or(message);
            let reasons: Vec<&str> = dead_letters
                .iter()
                .map(|r| r.header_str("outbox-relay.error.reason"))
                .filter(|reason| a_transform_or_converter(reason))
                .collect();
            if !reasons.iter().any(|reason| reason.contains(message)) {
                let values: Vec<String> = dead_letters
                    .iter()
                    .filter(|r| a_transform_or_converter(r.header_str("outbox-relay.error.reason")))
                    .map(|r| show(&r.value))
                    .collect();
                report.push(format!(
                    "{name}: Debezium's transform failed with {message:?}; no dead letter says so: {reasons:?} (values {values:?})"
                ));
            }
        }
        // The schemas registered beforehand are Debezium's own: its converter finds them.
        if let Some(case) = cases.iter().find(|c| c.name() == *name && c.preregistered) {
            if registry_refusal(why).is_some() || why.contains("Incompatible schema") {
                report.push(format!(
                    "{name}: its schemas were registered beforehand, yet Debezium's converter failed: {why} ({})",
                    case.describe
                ));
            }
        }
        // The relay's reason carries the registry's answer Debezium's converter died on.
        if let Some(message) = registry_refusal(why) {
            let reasons: Vec<&str> = dead_letters
                .iter()
                .filter(of_this_case)
                .map(|r| r.header_str("outbox-relay.error.reason"))
                .collect();
            if !reasons.iter().any(|reason| reason.contains(message)) {
                report.push(format!(
                    "{name}: Debezium's converter met the registry's {message:?}; no dead letter of the case says so: {reasons:?}"
                ));
            }
        }
        if documented_behaviour(why) == Some(Behaviour::DeadLettersWhatProtobufRefuses)
            && !dead_letters.iter().filter(of_this_case).any(|r| {
                r.header_str("outbox-relay.error.reason")
                    .contains("converter io.confluent.connect.protobuf.ProtobufConverter failed")
            })
        {
            report.push(format!(
                "{name}: Confluent's ProtobufConverter failed ({why}); no dead letter of the case names it"
            ));
        }
        dead_lettered += dead;
        let written = written + dead;
        match documented_behaviour(why) {
            Some(behaviour) => {
                if written != case.expected {
                    report.push(format!(
                        "{name}: Debezium fails ({why}); the relay should write every event ({behaviour:?}), wrote {written} of {}",
                        case.expected
                    ));
                }
                relay_on_its_own += written;
            }
            None => report.push(format!(
                "{name}: Debezium's task failed in a way no documented relay behaviour covers: {why} ({})",
                case.describe
            )),
        }
    }
    if dead_lettered != dead_letters.len() {
        report.push(format!(
            "{} dead letters, {dead_lettered} of them where Debezium's task fails as documented: {:?}",
            dead_letters.len(),
            dead_letters
                .iter()
                .map(|r| r.header_str("outbox-relay.error.reason"))
                .collect::<Vec<_>>()
        ));
    }
    let mut compared = 0;
    for (topic, records) in &dbz {
        if failed_case(topic) {
            continue;
        }
        let case = cases.iter().find(|c| of_case(topic, c));
        let theirs = ours.get(topic).cloned().unwrap_or_default();
        if records.len() != theirs.len() {
            report.push(format!(
                "{topic}: debezium {} records, relay {}",
                records.len(),
                theirs.len()
            ));
        }
        for (i, (d, r)) in records.iter().zip(&theirs).enumerate() {
            compared += 1;
            let exact_time = case.is_some_and(|c| c.timestamp) && !topic.ends_with(".transaction");
            let diffs = differences(d, r, exact_time);
            if !diffs.is_empty() {
                report.push(format!(
                    "{topic} record {i} ({}):\n  {}",
                    case.map(|c| format!("seed {} case {}: {}", c.seed, c.index, c.describe))
                        .unwrap_or_default(),
                    diffs.join("\n  ")
                ));
            }
        }
    }
    // Each case's records, as many as its rows, messages and transactions make (and its
    // Filter keeps): a relay that writes as Debezium does, both wrong, is caught here.
    for case in cases
        .iter()
        .filter(|c| !debezium_failed.contains_key(&c.name()))
    {
        let written: usize = dbz
            .iter()
            .filter(|(t, _)| of_case(t, case))
            .map(|(_, r)| r.len())
            .sum();
        if written != case.expected {
            report.push(format!(
                "{}: Debezium wrote {written} records, the case expects {} ({})",
                case.name(),
                case.expected,
                case.describe
            ));
        }
    }
    // Heartbeats, by shape: both sides write them to the same topic, with the same key
    // bytes and no headers; the values differ only in `ts_ms`, a time of this run.
    let mut heartbeats = 0;
    let run_began = chrono_now_ms() - started.elapsed().as_millis() as i64;
    for case in &cases {
        let Some(topic) = &case.heartbeat_topic else {
            continue;
        };
        if debezium_failed.contains_key(&case.name()) {
            continue;
        }
        let dbz = outbox_relay_testkit::read_topic(&dbz_broker.bootstrap_servers(), topic).unwrap();
        let relay =
            outbox_relay_testkit::read_topic(&relay_broker.bootstrap_servers(), topic).unwrap();
        let (Some(d), Some(r)) = (dbz.first(), relay.first()) else {
            report.push(format!(
                "{topic}: debezium wrote {} heartbeats, the relay {} ({})",
                dbz.len(),
                relay.len(),
                case.describe
            ));
            continue;
        };
        heartbeats += 1;
        for (side, record) in [("debezium", d), ("relay", r)] {
            let (shape, ts) = without_time(record.value.as_deref().unwrap_or_default());
            let now = chrono_now_ms();
            if !(run_began - 1_000..=now).contains(&ts) {
                report.push(format!(
                    "{topic}: {side}'s heartbeat says ts_ms {ts}, not a time of this run: {shape}"
                ));
            }
        }
        let shape = |r: &ConsumedRecord| without_time(r.value.as_deref().unwrap_or_default()).0;
        if d.key != r.key || d.headers != r.headers || shape(d) != shape(r) {
            report.push(format!(
                "{topic}: heartbeats differ:\n  debezium key {} value {} headers {:?}\n  relay    key {} value {} headers {:?}",
                show(&d.key),
                shape(d),
                d.headers,
                show(&r.key),
                shape(r),
                r.headers
            ));
        }
    }

    // The schemas each side registered (or looked up): the same subjects, the same texts.
    let mut registrations_compared = 0;
    let mut subjects = 0;
    if let (Some(registry), Some((dbz_front, relay_front))) = (&registry, &fronts) {
        let (d, r) = (
            registrations(&dbz_front.requests()),
            registrations(&relay_front.requests()),
        );
        registrations_compared = d.len();
        // OUTBOX_RELAY_DIFF_REGISTRY_LOG=dir: every request each side sent, for a look.
        if let Some(dir) = std::env::var_os("OUTBOX_RELAY_DIFF_REGISTRY_LOG") {
            for (side, front) in [("debezium", dbz_front), ("relay", relay_front)] {
                let text: String = front
                    .requests()
                    .iter()
                    .map(|r| {
                        format!(
                            "{} {} {:?}\n{}\n\n",
                            r.method,
                            r.path,
                            r.headers,
                            String::from_utf8_lossy(&r.body)
                        )
                    })
                    .collect();
                std::fs::write(Path::new(&dir).join(format!("{side}.log")), text).unwrap();
            }
        }
        for (side, only, other) in [
            ("Debezium", d.difference(&r), &r),
            ("the relay", r.difference(&d), &d),
        ] {
            for (subject, schema) in only {
                let theirs: Vec<&String> = other
                    .iter()
                    .filter(|(s, _)| s == subject)
                    .map(|(_, schema)| schema)
                    .collect();
                let case = cases.iter().find(|c| of_case(subject, c));
                // Where Debezium's task died, it registered what it wrote before. A record
                // name's subject names no case: what only the relay registered there is
                // let be where a case naming subjects so died.
                if case.is_some_and(|c| debezium_failed.contains_key(&c.name())) {
                    continue;
                }
                // Under use.latest.version, Confluent's serializer asks the subject's latest
                // version (GET …/versions/latest) and then the id of that schema under the
                // subject (a look-up, POST /subjects/{s}); the relay takes the id the first
                // answer holds. Debezium's look-up of the latest schema registered beforehand
                // is no registration of its own.
                if side == "Debezium"
                    && case.is_some_and(|c| {
                        c.preregistered
                            && latest_registered(&preregistered, c, subject) == Some(schema)
                    })
                {
                    continue;
                }
                if case.is_none()
                    && side == "the relay"
                    && cases.iter().any(|c| {
                        debezium_failed.contains_key(&c.name())
                            && c.describe.contains("RecordNameStrategy")
                    })
                {
                    continue;
                }
                let case = case
                    .map(|c| format!("seed {} case {}: {}", c.seed, c.index, c.describe))
                    .unwrap_or_default();
                report.push(format!(
                    "registry: only {side} registered under {subject}: {schema} (the other side: \
                     {theirs:?}) ({case})"
                ));
            }
        }
        let (status, body) = outbox_relay_testkit::http::get(
            &format!("127.0.0.1:{}", registry.port()),
            "/apis/ccompat/v7/subjects",
        );
        assert_eq!(status, 200, "GET /subjects: {body}");
        subjects = serde_json::from_str::<Vec<String>>(&body).unwrap().len();
    }

    // OUTBOX_RELAY_DIFF_LEARN: what Debezium registered for the cases whose schemas are to
    // be registered beforehand, into the fixture.
    if let (true, Some((dbz_front, _))) = (learning, &fronts) {
        let mut fixture = load_preregistered();
        let requests = dbz_front.requests();
        for case in cases.iter().filter(|c| c.preregistered) {
            if debezium_failed.contains_key(&case.name()) {
                fixture.remove(&case.name());
                continue;
            }
            let learned: Vec<Preregistration> = requests
                .iter()
                .filter(|r| r.method == "POST")
                .filter_map(|r| {
                    let path = r.path.split('?').next().unwrap_or_default();
                    let subject = path.strip_prefix("/apis/ccompat/v7/subjects/")?;
                    let subject = subject.strip_suffix("/versions")?;
                    (of_case(subject, case) || subject.ends_with(".proto")).then(|| {
                        Preregistration {
                            path: r.path.clone(),
                            body: String::from_utf8_lossy(&r.body).into_owned(),
                            schema: serde_json::from_slice::<Value>(&r.body)
                                .ok()
                                .and_then(|b| b["schema"].as_str().map(str::to_owned))
                                .unwrap_or_default(),
                        }
                    })
                })
                .collect();
            fixture.insert(case.name(), learned);
        }
        std::fs::write(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(PREREGISTERED),
            serde_json::to_string_pretty(&fixture).unwrap() + "\n",
        )
        .unwrap();
    }

    // What the option sets covered, so that a total in README says what it stands for.
    let covering = |token: &str| cases.iter().filter(|c| c.describe.contains(token)).count();
    let mut covered: Vec<String> = [
        "two outbox tables",
        "provide.transaction.metadata",
        "snapshot true",
    ]
    .iter()
    .map(|t| format!("{t}: {}", covering(t)))
    .collect();
    for token in [
        "messages (",
        "heartbeats to",
        "avro: ",
        "avro confluent",
        "avro apicurio",
        "key.converter=avro",
        "RecordNameStrategy",
        "TopicRecordNameStrategy",
        "connect.meta.data=false",
        "protobuf: ",
        "key.converter=protobuf",
        "auto.register.schemas=false",
        "use.latest.version=true",
        "registered beforehand",
        "not in the fixture",
        "the latest versions with a doc",
        "EventRouter predicate",
        "binarydata delegating to",
        "optional.for.nullables",
        "wrapper.for.nullables",
        "scrub.invalid.names",
        "schema.name.adjustment.mode=",
        "filter ",
        "negate true",
        "DEFAULT",
        "schema version",
        "timestamp evt_ts",
        "route.topic.regex",
        "enum routing column",
        "header.converter",
        "two rows per transaction",
        "update and delete",
        "before the EventRouter: ",
        "HeaderFrom$Key",
        "HeaderFrom move",
    ] {
        covered.push(format!(
            "{}: {}",
            token.trim_end_matches(" ("),
            covering(token)
        ));
    }
    covered.extend(
        EXTRAS
            .iter()
            .map(|e| format!("{}: {}", e.sql, covering(&format!(" {} as ", e.sql)))),
    );
    println!("differential: option sets with {}", covered.join(", "));
    println!(
        "differential: seeds {seeds:?}, {} option sets, {compared} records compared, {} differing, \
         {heartbeats} heartbeat topics compared by shape, {registrations_compared} schema \
         registrations compared ({subjects} subjects); \
         {} option sets where Debezium's task fails ({relay_on_its_own} records the relay wrote as documented): {:?}",
        cases.len(),
        report.len(),
        debezium_failed.len(),
        debezium_failed.values().collect::<std::collections::BTreeSet<_>>()
    );
    assert!(
        report.is_empty(),
        "{} differences (seeds {seeds:?}; rerun one with OUTBOX_RELAY_DIFF_SEEDS):\n{}",
        report.len(),
        report
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(compared + relay_on_its_own, expected);
}

/// The fixture of schemas registered beforehand: for each case (`s7c101`) drawn so, the
/// requests Debezium's converter sent to register them (`POST /subjects/{s}/versions`, the
/// case's subjects and the `.proto` files they import), in order, as learned by a run with
/// `OUTBOX_RELAY_DIFF_LEARN=1` (where those converters register themselves).
const PREREGISTERED: &str = "tests/debezium_differential_registered.json";

#[derive(serde::Serialize, serde::Deserialize)]
struct Preregistration {
    path: String,
    body: String,
    /// The body's schema text (as the registrations compared hold it).
    schema: String,
}

impl Preregistration {
    /// An Avro record schema registered with a doc (see [`with_doc`]); others as they are.
    fn document(&mut self) {
        let Ok(mut body) = serde_json::from_str::<Value>(&self.body) else {
            return;
        };
        if body.get("schemaType").is_some() {
            return;
        }
        if let Some(documented) = with_doc(&self.schema) {
            body["schema"] = json!(documented);
            self.body = body.to_string();
            self.schema = documented;
        }
    }
}

/// A record schema as Avro prints it (`Schema.toString`: type, name, namespace, doc, fields,
/// properties) with a doc: put before the first `"fields"`, where Avro prints a record's doc,
/// so that Confluent's client, printing the version it reads, sends this very text. `None`
/// for a schema that is not a record or has a doc.
fn with_doc(schema: &str) -> Option<String> {
    let fields = schema.find("\"fields\":")?;
    let head = &schema[..fields];
    if !schema.starts_with("{\"type\":\"record\"") || head.contains("\"doc\":") {
        return None;
    }
    Some(format!(
        "{head}\"doc\":\"registered beforehand, with a doc\",{}",
        &schema[fields..]
    ))
}

fn load_preregistered() -> BTreeMap<String, Vec<Preregistration>> {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(PREREGISTERED))
        .map(|text| {
            serde_json::from_str(&text).expect("the fixture of schemas registered beforehand")
        })
        .unwrap_or_default()
}

/// The schema registered last beforehand under `subject` for `case`: what a
/// `use.latest.version` converter writes with.
fn latest_registered<'a>(
    fixture: &'a BTreeMap<String, Vec<Preregistration>>,
    case: &Case,
    subject: &str,
) -> Option<&'a String> {
    fixture
        .get(&case.name())?
        .iter()
        .rfind(|r| {
            let path = r.path.split('?').next().unwrap_or_default();
            path.strip_prefix("/apis/ccompat/v7/subjects/")
                .and_then(|s| s.strip_suffix("/versions"))
                .is_some_and(|s| s.replace("%2F", "/") == subject)
        })
        .map(|r| &r.schema)
}

/// Milliseconds since the epoch, now.
fn chrono_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A heartbeat's value with its `ts_ms` (its longest run of digits) taken out, and that time.
fn without_time(value: &[u8]) -> (String, i64) {
    let text = String::from_utf8_lossy(value).into_owned();
    let bytes = text.as_bytes();
    let (mut best, mut i) = ((0, 0), 0);
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i - start > best.1 - best.0 {
            best = (start, i);
        }
        i = i.max(start + 1);
    }
    let ts = text[best.0..best.1].parse().unwrap_or(-1);
    (format!("{}<ts_ms>{}", &text[..best.0], &text[best.1..]), ts)
}

/// The exception at the bottom of a Java stack trace: `Class: message`. Confluent's
/// `ProtobufData` fails on what it cannot write with a NullPointerException (a null in an
/// array, a value without a schema): where the trace passes through it, that is said.
fn cause(trace: &str) -> String {
    let cause = trace
        .lines()
        .rfind(|l| l.starts_with("Caused by: "))
        .or_else(|| trace.lines().next())
        .unwrap_or_default()
        .trim_start_matches("Caused by: ")
        .to_owned();
    if cause.starts_with("java.lang.NullPointerException")
        && trace.contains(&format!("at {PROTOBUF_DATA}."))
    {
        format!("{cause} (in {PROTOBUF_DATA})")
    } else {
        cause
    }
}

const PROTOBUF_DATA: &str = "io.confluent.connect.protobuf.ProtobufData";

/// Whether a dead letter's reason is a transform's or a converter's failure.
fn a_transform_or_converter(reason: &str) -> bool {
    reason.starts_with("transform \"")
        || reason.starts_with("value converter ")
        || reason.starts_with("key converter ")
}

/// What the relay does where Debezium's task fails, as README documents it: it writes every
/// event, as follows.
#[derive(Debug, PartialEq, Eq)]
enum Behaviour {
    /// ByteArrayConverter on a value that is not bytes (a bytea column under
    /// binary.handling.mode=base64/hex, a text column): the relay writes its text.
    WritesTheText,
    /// `table.expand.json.payload` on a payload whose JSON is not an object (a string, a
    /// number, an array) or holds an array mixing element types: Debezium's converter meets a
    /// value that is not the Struct or array its schema says; the relay keeps the payload as
    /// the string it is.
    KeepsTheJsonString,
    /// A logical decoding message whose content holds an array mixing element types or only
    /// nulls: `DecodeLogicalDecodingMessageContent` cannot type it ("not a homogenous array",
    /// "unrecognized member schema"); the
    /// relay sends that message to its dead-letter topic, with the reason, and goes on.
    DeadLettersTheMessage,
    /// A logical decoding message under `binary.handling.mode=base64` or `hex`: Debezium
    /// hands the transform the content as text, which it refuses ("non-binary"); the relay
    /// decodes the content's bytes as under `bytes`.
    DecodesTheMessage,
    /// `table.field.event.timestamp` naming a bigint column: Debezium's EventRouter takes
    /// only a timestamp type ("Unsupported field type INT64"); the relay takes the number as
    /// milliseconds since the epoch.
    TakesMilliseconds,
    /// `table.field.event.timestamp` naming a timestamp column under
    /// `time.precision.mode=isostring` or `connect`: Debezium's EventRouter finds a string
    /// ("is not of type INT64") or a java.util.Date (a ClassCastException) where it reads a
    /// long; the relay takes the time the column holds.
    TakesTheTime,
    /// A Kafka Connect transform after the EventRouter fails on a record (MaskField on bytes,
    /// a struct transform on a value that is not one): Debezium's task dies (errors.tolerance
    /// none); the relay dead-letters that record, its reason Kafka Connect's message, and
    /// goes on.
    DeadLettersTheRecord,
    /// `DecodeLogicalDecodingMessageContent` in the chain and a DELETE of an outbox row:
    /// Debezium's transform dies on the delete's tombstone (a NullPointerException on its
    /// null value schema); the relay ignores deletes, as always.
    IgnoresTheDelete,
    /// A schema-registry converter whose registry refuses the record's schema or has no
    /// subject for it (a 4xx answer): Apicurio 2.6.13's ccompat API refuses a top-level union
    /// (an optional bytea or scalar payload's Avro schema, `["null","bytes"]`) with 42201
    /// "Failed to discover artifact type from content"; under `auto.register.schemas=false`
    /// with nothing registered beforehand it finds no subject (40401, or 40403 for a schema
    /// not under it). Debezium's task dies (errors.tolerance none, Confluent's
    /// `RestClientException`); the relay dead-letters each such record, its reason the
    /// registry's message, and goes on.
    DeadLettersWhatTheRegistryRefuses,
    /// A record Confluent's ProtobufConverter fails on, which its `ProtobufData` meets as a
    /// NullPointerException (README: a null in an array; a value without a schema, a
    /// tombstone after HoistField): Debezium's task dies; the relay dead-letters the record,
    /// its reason naming the converter, and goes on.
    DeadLettersWhatProtobufRefuses,
}

/// The registry's message in Confluent's `RestClientException` (`<message>; error code:
/// <code>`), where a 4xx answer killed Debezium's task.
fn registry_refusal(cause: &str) -> Option<&str> {
    let (_, rest) = cause.split_once("RestClientException: ")?;
    let (message, code) = rest.split_once("; error code: ")?;
    code.starts_with('4').then_some(message)
}

fn documented_behaviour(cause: &str) -> Option<Behaviour> {
    if cause.contains("Invalid schema type for ByteArrayConverter") {
        Some(Behaviour::WritesTheText)
    } else if cause.contains("Invalid type for STRUCT: class java.lang.")
        || cause.contains("Invalid type for ARRAY: class java.lang.")
    {
        Some(Behaviour::KeepsTheJsonString)
    } else if cause.contains("Field is not a homogenous array")
        || cause.contains("has unrecognized member schema")
    {
        Some(Behaviour::DeadLettersTheMessage)
    } else if cause.contains("The content of a logical decoding message is non-binary") {
        Some(Behaviour::DecodesTheMessage)
    } else if cause
        .contains("Unsupported field type INT64 (without logical schema name) for event timestamp")
    {
        Some(Behaviour::TakesMilliseconds)
    } else if cause.contains("DataException: Field 'evt_ts' is not of type INT64")
        || cause.contains("java.util.Date cannot be cast to class java.lang.Long")
    {
        Some(Behaviour::TakesTheTime)
    } else if [
        "Cannot mask value of type",
        "Only Struct objects supported for [",
        // CloudEventsConverter on a value that is not a struct, or without a metadata header
        // (a DropHeaders after the EventRouter took it).
        "DataException: Mismatching schema",
        "was not provided",
        "Only Map objects supported in absence of schema for [",
        "Field does not exist: ",
        "Unknown field: ",
        "Cannot list fields on non-struct type",
        "A null value requires an optional schema",
        "Invalid value: null used for required field",
        "does not correspond to a known timestamp type format",
        "Could not parse timestamp",
        // TimestampConverter's DataException ("Could not parse timestamp: value (…) does not
        // match pattern (…)") is not the trace's last cause where SimpleDateFormat's is.
        "java.text.ParseException: Unparseable date: \"",
        "TimestampConverter",
        // A string timestamp without a `format`: Kafka's transform dereferences it.
        "because \"config.format\" is null",
    ]
    .iter()
    .any(|m| cause.contains(m))
    {
        Some(Behaviour::DeadLettersTheRecord)
    } else if cause.contains("NullPointerException")
        && cause.contains("ConnectRecord.valueSchema()\" is null")
    {
        Some(Behaviour::IgnoresTheDelete)
    } else if registry_refusal(cause).is_some() {
        Some(Behaviour::DeadLettersWhatTheRegistryRefuses)
    } else if cause.starts_with("java.lang.NullPointerException")
        && cause.ends_with(&format!("(in {PROTOBUF_DATA})"))
    {
        Some(Behaviour::DeadLettersWhatProtobufRefuses)
    } else {
        None
    }
}

/// The schemas a side sent its registry, as (subject, schema text): Confluent's register and
/// look-up requests (`POST /subjects/{s}/versions`, `POST /subjects/{s}`, the schema in the
/// JSON body) and Apicurio's artifact creations (`POST /groups/{g}/artifacts`, the artifact
/// id in `X-Registry-ArtifactId`, the schema the body), its group in the subject.
fn registrations(requests: &[RecordedRequest]) -> std::collections::BTreeSet<(String, String)> {
    let decode = |s: &str| -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    out.push(b);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    requests
        .iter()
        .filter(|r| r.method == "POST")
        .filter_map(|r| {
            let path = r.path.split('?').next().unwrap_or_default();
            if let Some(rest) = path.strip_prefix("/apis/ccompat/v7/subjects/") {
                let subject = rest.strip_suffix("/versions").unwrap_or(rest);
                let body: Value = serde_json::from_slice(&r.body).ok()?;
                Some((decode(subject), body["schema"].as_str()?.to_owned()))
            } else if let Some(rest) = path.strip_prefix("/apis/registry/v2/groups/") {
                let (group, rest) = rest.split_once('/')?;
                let artifact = match rest.strip_prefix("artifacts/") {
                    Some(id) => id.split('/').next()?.to_owned(),
                    None => r.header("X-Registry-ArtifactId")?.to_owned(),
                };
                Some((
                    format!("{}/{}", decode(group), decode(&artifact)),
                    String::from_utf8_lossy(&r.body).into_owned(),
                ))
            } else {
                None
            }
        })
        .collect()
}
