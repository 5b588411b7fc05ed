//! How Debezium's PostgreSQL connector (3.x, pgoutput streaming) types a column and
//! converts its text, under each of the modes that change the bytes
//! (`decimal.handling.mode`, `time.precision.mode`, `interval.handling.mode`,
//! `hstore.handling.mode`, `binary.handling.mode`, `money.fraction.digits`,
//! `include.unknown.datatypes`). References are to Debezium's `PostgresValueConverter`
//! (PVC), `JdbcValueConverters` (JVC) and `AbstractRecordsProducerTest` (ARPT, the
//! expectations its integration tests check).

use super::data::{Schema, SchemaType, Value};
use super::pg_text::{self, Interval, Numeric};
use base64::Engine;
use bytes::Bytes;
use std::sync::Arc;

/// PostgreSQL's built-in type OIDs (`pg_type.oid`, fixed in `pg_type.dat`) that Debezium maps
/// by OID. Types from extensions (citext, ltree, hstore) have none fixed: they go by name.
pub mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const CHAR: u32 = 18;
    pub const NAME: u32 = 19;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const OID: u32 = 26;
    pub const JSON: u32 = 114;
    pub const XML: u32 = 142;
    pub const CIDR: u32 = 650;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const MACADDR8: u32 = 774;
    pub const MONEY: u32 = 790;
    pub const MACADDR: u32 = 829;
    pub const INET: u32 = 869;
    pub const BPCHAR: u32 = 1042;
    pub const VARCHAR: u32 = 1043;
    pub const DATE: u32 = 1082;
    pub const TIME: u32 = 1083;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const INTERVAL: u32 = 1186;
    pub const TIMETZ: u32 = 1266;
    pub const BIT: u32 = 1560;
    pub const VARBIT: u32 = 1562;
    pub const NUMERIC: u32 = 1700;
    pub const UUID: u32 = 2950;
    pub const TSVECTOR: u32 = 3614;
    pub const JSONB: u32 = 3802;
    pub const INT4RANGE: u32 = 3904;
    pub const NUMRANGE: u32 = 3906;
    pub const TSRANGE: u32 = 3908;
    pub const TSTZRANGE: u32 = 3910;
    pub const DATERANGE: u32 = 3912;
    pub const INT8RANGE: u32 = 3926;
}

/// What the catalog says about a column (pgoutput's Relation message does not carry it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnFacts {
    pub name: String,
    pub not_null: bool,
    /// `pg_get_expr(adbin, adrelid)`, e.g. `'pending'::character varying` or `now()`.
    pub default_expression: Option<String>,
    /// The column's type with domains resolved to their base type; `None` types the
    /// column from the Relation message's OID alone.
    pub pg_type: Option<PgType>,
    /// Its place in the table's primary key, or without one in its first unique index by
    /// name, as Debezium's pgoutput decoder falls back to (ascending: `pg_index.indkey`'s
    /// order), which the change event's key follows; `None` when it is not part of it.
    pub key_position: Option<i32>,
}

/// A column's type as the catalog resolves it (domains walked down to their base type, as
/// Debezium's `PgOutputMessageDecoder.resolveRelationFromMetadata` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgType {
    /// The base type's OID.
    pub oid: u32,
    /// The modifier: the column's, or the innermost domain's that sets one.
    pub typmod: i32,
    /// `pg_type.typname` of the base type (`citext`, `hstore`, `_int4`, ...): extension
    /// types have no fixed OID.
    pub name: String,
    /// An enum's labels in `enumsortorder`.
    pub enum_labels: Option<Vec<String>>,
    /// An array's element type.
    pub element: Option<Box<PgType>>,
}

impl PgType {
    /// A built-in type by OID (tests, and columns whose type the catalog did not resolve).
    pub fn builtin(oid: u32, typmod: i32) -> Self {
        Self {
            oid,
            typmod,
            name: String::new(),
            enum_labels: None,
            element: None,
        }
    }
}

/// `decimal.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecimalMode {
    #[default]
    Precise,
    Double,
    String,
}

/// `time.precision.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimePrecisionMode {
    #[default]
    Adaptive,
    AdaptiveTimeMicroseconds,
    Connect,
    IsoString,
}

/// `interval.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntervalMode {
    #[default]
    Numeric,
    String,
}

/// `hstore.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HstoreMode {
    #[default]
    Json,
    Map,
}

/// `binary.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BinaryMode {
    #[default]
    Bytes,
    Base64,
    Base64UrlSafe,
    Hex,
}

/// The connector options that change how columns are typed and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeModes {
    pub decimal: DecimalMode,
    pub time: TimePrecisionMode,
    pub interval: IntervalMode,
    pub hstore: HstoreMode,
    pub binary: BinaryMode,
    /// `money.fraction.digits` (default 2).
    pub money_fraction_digits: u8,
    /// `include.unknown.datatypes`: a column of a type Debezium cannot map is written as
    /// the bytes of its text (binary.handling.mode) instead of being left out.
    pub include_unknown: bool,
}

impl Default for TypeModes {
    fn default() -> Self {
        Self {
            decimal: DecimalMode::default(),
            time: TimePrecisionMode::default(),
            interval: IntervalMode::default(),
            hstore: HstoreMode::default(),
            binary: BinaryMode::default(),
            money_fraction_digits: 2,
            include_unknown: false,
        }
    }
}

/// PVC: an unconstrained numeric has length 131089 (pgjdbc's display size) and scale 0.
const VARIABLE_SCALE_LENGTH: u32 = 131_089;

/// The kind of a column, with what its schema and conversion depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnKind {
    Boolean,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    /// text, varchar, bpchar (padding kept), "char", name, citext, inet, cidr, macaddr,
    /// macaddr8 and the range types: plain strings.
    Text,
    Json,
    Uuid,
    Xml,
    Ltree,
    Tsvector,
    Bytea(BinaryMode),
    /// `numeric(length, scale)`; unconstrained is length 131089, scale 0.
    Numeric {
        length: u32,
        scale: u32,
        mode: DecimalMode,
    },
    Money {
        fraction_digits: u8,
        mode: DecimalMode,
    },
    Date(TimePrecisionMode),
    /// `time(precision)` (unqualified: 6).
    Time {
        precision: u8,
        mode: TimePrecisionMode,
    },
    /// io.debezium.time.ZonedTime in every mode.
    TimeTz,
    /// `timestamp(precision)` (unqualified: 6).
    Timestamp {
        precision: u8,
        mode: TimePrecisionMode,
    },
    /// `timestamptz(p)`: ISO-8601 text in UTC with exactly `precision` fraction digits
    /// (io.debezium.time.ZonedTimestamp; fixed width since Debezium 2.2).
    TimestampTz {
        precision: u8,
    },
    Interval(IntervalMode),
    /// bit(n) / varbit(n); n <= 1 is a boolean.
    Bits {
        length: u32,
    },
    Hstore(HstoreMode),
    /// A user-defined enum (io.debezium.data.Enum; its labels go in the schema's `allowed`).
    Enum(Arc<str>),
    Array(Box<ColumnKind>),
    /// `include.unknown.datatypes=true`: the text's bytes, written as binary columns are.
    Unknown(BinaryMode),
}

/// Whether Debezium writes columns of `pg_type` with a schema of its own that outbox-relay
/// does not produce (`PostgresValueConverter.schemaBuilder`): the geometric types as
/// `io.debezium.data.geometry.*` structs, PostGIS's geometry and geography, pgvector's
/// vectors. A row image leaves out only what Debezium leaves out, so these are refused
/// rather than dropped.
pub fn debezium_writes_unproduced(pg_type: &PgType) -> bool {
    // point, lseg, path, box, polygon, line, circle.
    const GEOMETRIC: &[u32] = &[600, 601, 602, 603, 604, 628, 718];
    GEOMETRIC.contains(&pg_type.oid)
        || matches!(
            pg_type.name.as_str(),
            "geometry" | "geography" | "vector" | "halfvec" | "sparsevec"
        )
        || pg_type.element.as_deref().is_some_and(|element| {
            !UNMAPPED_ARRAY_ELEMENTS.contains(&element.oid) && debezium_writes_unproduced(element)
        })
}

/// Array element types Debezium has no schema for (PVC.schemaBuilder returns null and the
/// column is left out of the record): money[], name[], interval[], varbit[], bit[], xml[],
/// point[].
const UNMAPPED_ARRAY_ELEMENTS: &[u32] = &[790, 19, 1186, 1562, 1560, 142, 600];

impl ColumnKind {
    /// How Debezium types a column of `pg_type`; `Err` names the type when Debezium would
    /// leave the column out of the record (or outbox-relay cannot write it as Debezium
    /// does), so the caller refuses to start rather than guess the bytes.
    pub fn resolve(pg_type: &PgType, modes: &TypeModes) -> Result<Self, String> {
        if let Some(labels) = &pg_type.enum_labels {
            // SchemaFactory.datatypeEnumSchema: the labels in enumsortorder, joined by ",".
            return Ok(Self::Enum(labels.join(",").into()));
        }
        if let Some(element) = &pg_type.element {
            if UNMAPPED_ARRAY_ELEMENTS.contains(&element.oid) {
                return Err(format!(
                    "{} (Debezium has no schema for arrays of this type and leaves the column out)",
                    describe(pg_type)
                ));
            }
            let element = PgType {
                // An array column's modifier is its element's (numeric(10,2)[]).
                typmod: pg_type.typmod,
                ..(**element).clone()
            };
            let kind = Self::resolve(&element, modes).map_err(|_| {
                if debezium_writes_unproduced(pg_type) {
                    format!(
                        "{} (Debezium writes it as an array of structs of its own, which outbox-relay does not produce)",
                        describe(pg_type)
                    )
                } else {
                    describe(pg_type)
                }
            })?;
            if matches!(kind, Self::Array(_) | Self::Unknown(_)) {
                return Err(describe(pg_type));
            }
            return Ok(Self::Array(Box::new(kind)));
        }
        let typmod = pg_type.typmod;
        // pgjdbc TypeInfoCache.getScale: time types with typmod -1 have precision 6.
        let precision = if (0..=6).contains(&typmod) {
            typmod as u8
        } else {
            6
        };
        Ok(match pg_type.oid {
            oid::BOOL => Self::Boolean,
            oid::INT2 => Self::Int16,
            oid::INT4 => Self::Int32,
            oid::INT8 | oid::OID => Self::Int64,
            oid::FLOAT4 => Self::Float32,
            oid::FLOAT8 => Self::Float64,
            oid::CHAR
            | oid::NAME
            | oid::TEXT
            | oid::BPCHAR
            | oid::VARCHAR
            | oid::INET
            | oid::CIDR
            | oid::MACADDR
            | oid::MACADDR8
            | oid::INT4RANGE
            | oid::INT8RANGE
            | oid::NUMRANGE
            | oid::TSRANGE
            | oid::TSTZRANGE
            | oid::DATERANGE => Self::Text,
            oid::JSON | oid::JSONB => Self::Json,
            oid::UUID => Self::Uuid,
            oid::XML => Self::Xml,
            oid::TSVECTOR => Self::Tsvector,
            oid::BYTEA => Self::Bytea(modes.binary),
            oid::NUMERIC => {
                // pgjdbc TypeInfoCache.getPrecision/getScale; typmod -1 → 131089, 0.
                let (length, scale) = if typmod < 4 {
                    (VARIABLE_SCALE_LENGTH, 0)
                } else {
                    let t = (typmod - 4) as u32;
                    ((t >> 16) & 0xFFFF, t & 0xFFFF)
                };
                Self::Numeric {
                    length,
                    scale,
                    mode: modes.decimal,
                }
            }
            oid::MONEY => Self::Money {
                fraction_digits: modes.money_fraction_digits,
                mode: modes.decimal,
            },
            oid::DATE => Self::Date(modes.time),
            oid::TIME => Self::Time {
                precision,
                mode: modes.time,
            },
            oid::TIMETZ => Self::TimeTz,
            oid::TIMESTAMP => Self::Timestamp {
                precision,
                mode: modes.time,
            },
            oid::TIMESTAMPTZ => Self::TimestampTz { precision },
            oid::INTERVAL => Self::Interval(modes.interval),
            // bit(n): typmod n; varbit without a length is Integer.MAX_VALUE.
            oid::BIT | oid::VARBIT => Self::Bits {
                length: if typmod < 0 { i32::MAX as u32 } else { typmod as u32 },
            },
            _ => match pg_type.name.as_str() {
                // PostgresValueConverter: typeRegistry.isbn() as a string.
                "citext" | "isbn" => Self::Text,
                "ltree" => Self::Ltree,
                "hstore" => Self::Hstore(modes.hstore),
                _ if debezium_writes_unproduced(pg_type) => {
                    return Err(format!(
                        "{} (Debezium writes it as a struct of its own, which outbox-relay does not produce)",
                        describe(pg_type)
                    ))
                }
                _ if modes.include_unknown => Self::Unknown(modes.binary),
                _ => {
                    return Err(format!(
                        "{} (Debezium leaves columns of this type out of the record unless include.unknown.datatypes=true)",
                        describe(pg_type)
                    ))
                }
            },
        })
    }

    /// A built-in type by OID and modifier, with the default modes.
    pub fn from_type(type_oid: u32, type_modifier: i32) -> Option<Self> {
        Self::resolve(
            &PgType::builtin(type_oid, type_modifier),
            &TypeModes::default(),
        )
        .ok()
    }

    pub fn schema(&self, optional: bool) -> Schema {
        let s = |kind| Schema::new(kind, optional);
        let string = |name: &str| s(SchemaType::String).named(name, Some(1));
        let binary = |mode: BinaryMode| match mode {
            BinaryMode::Bytes => s(SchemaType::Bytes),
            _ => s(SchemaType::String),
        };
        match self {
            Self::Boolean => s(SchemaType::Boolean),
            Self::Int16 => s(SchemaType::Int16),
            Self::Int32 => s(SchemaType::Int32),
            Self::Int64 => s(SchemaType::Int64),
            Self::Float32 => s(SchemaType::Float32),
            Self::Float64 => s(SchemaType::Float64),
            Self::Text => s(SchemaType::String),
            Self::Json => string("io.debezium.data.Json"),
            Self::Uuid => string("io.debezium.data.Uuid"),
            Self::Xml => string("io.debezium.data.Xml"),
            Self::Ltree => string("io.debezium.data.Ltree"),
            Self::Tsvector => string("io.debezium.data.Tsvector"),
            Self::Bytea(mode) | Self::Unknown(mode) => binary(*mode),
            Self::Numeric {
                length,
                scale,
                mode,
            } => match mode {
                DecimalMode::Precise if is_variable_scale(*length, *scale) => {
                    // SchemaFactory.datatypeVariableScaleDecimalSchema.
                    let mut schema = s(SchemaType::Struct(vec![
                        ("scale".into(), Schema::new(SchemaType::Int32, false)),
                        ("value".into(), Schema::new(SchemaType::Bytes, false)),
                    ]))
                    .named("io.debezium.data.VariableScaleDecimal", Some(1));
                    schema.doc = Some("Variable scaled decimal".into());
                    schema
                }
                // Kafka's Decimal.builder(scale) + connect.decimal.precision, in that order.
                DecimalMode::Precise => {
                    let mut schema = s(SchemaType::Bytes)
                        .named("org.apache.kafka.connect.data.Decimal", Some(1));
                    schema.parameters = vec![
                        ("scale".into(), scale.to_string().into()),
                        (
                            "connect.decimal.precision".into(),
                            length.to_string().into(),
                        ),
                    ];
                    schema
                }
                DecimalMode::Double => s(SchemaType::Float64),
                DecimalMode::String => s(SchemaType::String),
            },
            // PVC.moneySchema: Decimal.builder(money.fraction.digits), no precision.
            Self::Money {
                fraction_digits,
                mode,
            } => match mode {
                DecimalMode::Precise => {
                    let mut schema = s(SchemaType::Bytes)
                        .named("org.apache.kafka.connect.data.Decimal", Some(1));
                    schema.parameters = vec![("scale".into(), fraction_digits.to_string().into())];
                    schema
                }
                DecimalMode::Double => s(SchemaType::Float64),
                DecimalMode::String => s(SchemaType::String),
            },
            Self::Date(mode) => match mode {
                TimePrecisionMode::Connect => {
                    s(SchemaType::Int32).named("org.apache.kafka.connect.data.Date", Some(1))
                }
                TimePrecisionMode::IsoString => string("io.debezium.time.IsoDate"),
                _ => s(SchemaType::Int32).named("io.debezium.time.Date", Some(1)),
            },
            Self::Time { precision, mode } => match mode {
                TimePrecisionMode::Connect => {
                    s(SchemaType::Int32).named("org.apache.kafka.connect.data.Time", Some(1))
                }
                TimePrecisionMode::IsoString => string("io.debezium.time.IsoTime"),
                TimePrecisionMode::Adaptive if *precision <= 3 => {
                    s(SchemaType::Int32).named("io.debezium.time.Time", Some(1))
                }
                _ => s(SchemaType::Int64).named("io.debezium.time.MicroTime", Some(1)),
            },
            Self::TimeTz => string("io.debezium.time.ZonedTime"),
            Self::Timestamp { precision, mode } => match mode {
                TimePrecisionMode::Connect => {
                    s(SchemaType::Int64).named("org.apache.kafka.connect.data.Timestamp", Some(1))
                }
                TimePrecisionMode::IsoString => string("io.debezium.time.IsoTimestamp"),
                _ if *precision <= 3 => {
                    s(SchemaType::Int64).named("io.debezium.time.Timestamp", Some(1))
                }
                _ => s(SchemaType::Int64).named("io.debezium.time.MicroTimestamp", Some(1)),
            },
            Self::TimestampTz { .. } => string("io.debezium.time.ZonedTimestamp"),
            Self::Interval(IntervalMode::Numeric) => {
                s(SchemaType::Int64).named("io.debezium.time.MicroDuration", Some(1))
            }
            Self::Interval(IntervalMode::String) => string("io.debezium.time.Interval"),
            Self::Bits { length } if *length <= 1 => s(SchemaType::Boolean),
            Self::Bits { length } => {
                let mut schema = s(SchemaType::Bytes).named("io.debezium.data.Bits", Some(1));
                schema.parameters = vec![("length".into(), length.to_string().into())];
                schema
            }
            Self::Hstore(HstoreMode::Json) => string("io.debezium.data.Json"),
            Self::Hstore(HstoreMode::Map) => s(SchemaType::Map(
                Box::new(Schema::new(SchemaType::String, false)),
                Box::new(Schema::new(SchemaType::String, true)),
            )),
            Self::Enum(allowed) => {
                let mut schema = string("io.debezium.data.Enum");
                schema.parameters = vec![("allowed".into(), allowed.clone())];
                schema
            }
            // Elements are optional, but for enums (PVC: array(Enum.builder(...))).
            Self::Array(element) => s(SchemaType::Array(Box::new(
                element.schema(!matches!(**element, Self::Enum(_))),
            ))),
        }
    }

    /// The Connect value of pgoutput's text form of a column of this kind.
    pub fn value(&self, text: &Bytes) -> Result<Value, String> {
        let str = || std::str::from_utf8(text).map_err(|_| "column text is not UTF-8".to_owned());
        let bad = |what: &str| {
            format!(
                "cannot read {what} from {:?}",
                String::from_utf8_lossy(text)
            )
        };
        Ok(match self {
            Self::Text
            | Self::Json
            | Self::Uuid
            | Self::Xml
            | Self::Ltree
            | Self::Tsvector
            | Self::Enum(_) => Value::String(text.clone()),
            // pgoutput writes boolout's `t`/`f`; rows read with SQL (snapshot, polling) come
            // through `::text`, which writes `true`/`false` (found by the differential test).
            Self::Boolean => Value::Boolean(matches!(&text[..], b"t" | b"true")),
            Self::Int16 | Self::Int32 | Self::Int64 => {
                Value::Int(str()?.parse().map_err(|_| bad("an integer"))?)
            }
            Self::Float32 | Self::Float64 => Value::Float(match str()? {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                t => t.parse().map_err(|_| bad("a number"))?,
            }),
            Self::Bytea(mode) => {
                let hex = str()?.strip_prefix("\\x").ok_or_else(|| bad("bytea hex"))?;
                binary_value(
                    *mode,
                    hex::decode(hex).map_err(|_| bad("bytea hex"))?.into(),
                )
            }
            Self::Unknown(mode) => binary_value(*mode, text.clone()),
            Self::Numeric {
                length,
                scale,
                mode,
            } => {
                let n = Numeric::parse(str()?).ok_or_else(|| bad("a numeric"))?;
                let variable = is_variable_scale(*length, *scale);
                // PVC.withScaleAdjustedIfNeeded: padded to the column's scale.
                let n = match &n {
                    Numeric::Finite { scale: have, .. } if !variable && have < scale => {
                        n.with_scale(*scale)
                    }
                    _ => n,
                };
                decimal_value(n, *mode, variable)?
            }
            Self::Money {
                fraction_digits,
                mode,
            } => {
                // PostgresMoney.parse, then setScale(money.fraction.digits, HALF_UP).
                let n = pg_text::parse_money(str()?)
                    .ok_or_else(|| bad("a money amount"))?
                    .with_scale(u32::from(*fraction_digits));
                decimal_value(n, *mode, false)?
            }
            Self::Date(mode) => {
                let t = str()?;
                // DateTimeFormat.date maps the infinities to these days (ISODateTimeFormat).
                let days = match t {
                    "infinity" => -2_147_472_692,
                    "-infinity" => -2_147_472_691,
                    _ => pg_text::parse_date(t).ok_or_else(|| bad("a date"))?.0,
                };
                match mode {
                    TimePrecisionMode::IsoString => Value::text(&format!("{}Z", iso_date(days))),
                    _ => Value::Int(days),
                }
            }
            Self::Time { precision, mode } => {
                let (micros, rest) = pg_text::parse_time(str()?).ok_or_else(|| bad("a time"))?;
                if !rest.is_empty() {
                    return Err(bad("a time"));
                }
                match mode {
                    TimePrecisionMode::IsoString => {
                        // LocalTime.plus wraps 24:00:00 to midnight.
                        Value::text(&format!("{}Z", iso_time(micros.rem_euclid(DAY_MICROS))))
                    }
                    TimePrecisionMode::Connect => Value::Int(micros / 1000),
                    TimePrecisionMode::Adaptive if *precision <= 3 => Value::Int(micros / 1000),
                    _ => Value::Int(micros),
                }
            }
            Self::TimeTz => {
                let t = str()?;
                let (micros, rest) = pg_text::parse_time(t).ok_or_else(|| bad("a timetz"))?;
                let offset = pg_text::parse_offset(rest).ok_or_else(|| bad("a timetz"))?;
                // PostgresTimeBoundary: 24:00:00 at UTC stays 24:00:00Z.
                if micros == DAY_MICROS && offset == 0 {
                    Value::text("24:00:00Z")
                } else {
                    let utc = (micros - offset * 1_000_000).rem_euclid(DAY_MICROS);
                    Value::text(&format!("{}Z", iso_time(utc)))
                }
            }
            Self::Timestamp { precision, mode } => {
                // PGStatement.DATE_POSITIVE_INFINITY / DATE_NEGATIVE_INFINITY (microseconds).
                let micros = match str()? {
                    "infinity" => 9_223_372_036_825_200_000,
                    "-infinity" => -9_223_372_036_832_400_000,
                    t => pg_text::parse_timestamp_micros(t).ok_or_else(|| bad("a timestamp"))?,
                };
                match mode {
                    TimePrecisionMode::IsoString => Value::text(&format_iso_utc(micros, None)),
                    TimePrecisionMode::Connect => Value::Int(micros.div_euclid(1000)),
                    _ if *precision <= 3 => Value::Int(micros.div_euclid(1000)),
                    _ => Value::Int(micros),
                }
            }
            Self::TimestampTz { precision } => match str()? {
                // Debezium passes PostgreSQL's infinities through as text.
                "infinity" | "-infinity" => Value::String(text.clone()),
                t => {
                    let micros =
                        pg_text::parse_timestamp_micros(t).ok_or_else(|| bad("a timestamptz"))?;
                    Value::text(&format_iso_utc(micros, Some(*precision)))
                }
            },
            Self::Interval(mode) => {
                let interval = Interval::parse(str()?).ok_or_else(|| {
                    bad("an interval (IntervalStyle=postgres, which the relay sets on its connections)")
                })?;
                match mode {
                    IntervalMode::Numeric => Value::Int(interval.debezium_micros()),
                    IntervalMode::String => Value::text(&interval.iso_string()),
                }
            }
            Self::Bits { length } => {
                let t = str()?;
                if !t.bytes().all(|b| b == b'0' || b == b'1') {
                    return Err(bad("a bit string"));
                }
                if *length <= 1 {
                    Value::Boolean(t.ends_with('1'))
                } else {
                    Value::Bytes(bits_little_endian(t).into())
                }
            }
            Self::Hstore(mode) => {
                let pairs = java_hash_map_order(pg_text::parse_hstore(str()?)?);
                match mode {
                    HstoreMode::Json => {
                        let mut out = Vec::new();
                        out.push(b'{');
                        for (i, (k, v)) in pairs.iter().enumerate() {
                            if i > 0 {
                                out.push(b',');
                            }
                            super::json::write_string_as_text(&mut out, k);
                            out.push(b':');
                            match v {
                                Some(v) => super::json::write_string_as_text(&mut out, v),
                                None => out.extend_from_slice(b"null"),
                            }
                        }
                        out.push(b'}');
                        Value::String(out.into())
                    }
                    HstoreMode::Map => Value::Map(
                        pairs
                            .into_iter()
                            .map(|(k, v)| {
                                (Value::text(&k), v.map_or(Value::Null, |v| Value::text(&v)))
                            })
                            .collect(),
                    ),
                }
            }
            Self::Array(element) => Value::Array(
                pg_text::parse_array(str()?)?
                    .into_iter()
                    .map(|item| match item {
                        None => Ok(Value::Null),
                        Some(text) => element.value(&Bytes::from(text)),
                    })
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// Milliseconds since the epoch, for `table.field.event.timestamp`.
    pub fn epoch_millis(&self, text: &Bytes) -> Result<i64, String> {
        let t = std::str::from_utf8(text).map_err(|_| "column text is not UTF-8".to_owned())?;
        match self {
            Self::Timestamp { .. } | Self::TimestampTz { .. } => {
                pg_text::parse_timestamp_micros(t)
                    .map(|m| m.div_euclid(1000))
                    .ok_or_else(|| format!("cannot read a timestamp from {t:?}"))
            }
            // Debezium refuses a plain bigint (no logical type); it is taken as epoch
            // milliseconds here, the usual meaning of such a column.
            Self::Int64 | Self::Int32 => t
                .parse()
                .map_err(|_| format!("cannot read an integer from {t:?}")),
            other => Err(format!(
                "a {other:?} column cannot be the event timestamp; use timestamp, timestamptz or bigint (epoch milliseconds)"
            )),
        }
    }
}

const DAY_MICROS: i64 = 86_400_000_000;

/// PVC.isVariableScaleDecimal.
fn is_variable_scale(length: u32, scale: u32) -> bool {
    (length == 0 || length == VARIABLE_SCALE_LENGTH) && scale == 0
}

/// A numeric under `decimal.handling.mode` (SpecialValueDecimal.fromLogical,
/// VariableScaleDecimal.fromLogical).
fn decimal_value(n: Numeric, mode: DecimalMode, variable: bool) -> Result<Value, String> {
    Ok(match mode {
        DecimalMode::Double => Value::Float(n.to_f64()),
        DecimalMode::String => Value::text(&match n {
            // SpecialValueDecimal's enum names, not PostgreSQL's spelling.
            Numeric::NaN => "NAN".to_owned(),
            Numeric::Infinity => "POSITIVE_INFINITY".to_owned(),
            Numeric::NegativeInfinity => "NEGATIVE_INFINITY".to_owned(),
            finite => finite.plain_string(),
        }),
        DecimalMode::Precise => match n {
            Numeric::Finite { .. } if variable => {
                let n = n.strip_trailing_zeros();
                let Numeric::Finite { scale, .. } = &n else {
                    unreachable!("finite")
                };
                Value::Struct(vec![
                    Value::Int(i64::from(*scale)),
                    Value::Bytes(n.unscaled_bytes().expect("finite").into()),
                ])
            }
            Numeric::Finite { .. } => Value::Decimal(n),
            _ => {
                return Err(format!(
                    "{} in a numeric column: Debezium's task fails on it with decimal.handling.mode=precise \
                     (set decimal.handling.mode to string or double to relay it)",
                    n.java_string()
                ))
            }
        },
    })
}

fn binary_value(mode: BinaryMode, bytes: Bytes) -> Value {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    match mode {
        BinaryMode::Bytes => Value::Bytes(bytes),
        BinaryMode::Base64 => Value::text(&STANDARD.encode(&bytes)),
        BinaryMode::Base64UrlSafe => Value::text(&URL_SAFE.encode(&bytes)),
        BinaryMode::Hex => Value::text(&hex::encode(&bytes)),
    }
}

/// `BitSet.toByteArray()` of a bit string read as a binary number (its last character is
/// bit 0): little-endian, trailing zero bytes dropped (PVC.convertBits; ARPT
/// schemaAndValuesForBinTypes: bit(3) "101" → [5], "00" → []).
fn bits_little_endian(text: &str) -> Vec<u8> {
    let bits = text.as_bytes();
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, b) in bits.iter().rev().enumerate() {
        if *b == b'1' {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    while out.last() == Some(&0) {
        out.pop();
    }
    out
}

/// The iteration order of a `java.util.HashMap<String, _>` filled with these pairs (what
/// pgjdbc's HStoreConverter returns and Debezium writes in order): by bucket
/// (`(h ^ h >>> 16) & (capacity - 1)` with `String.hashCode`), then by insertion within a
/// bucket; capacity doubles from 16 while the map holds more than 3/4 of it.
pub(crate) fn java_hash_map_order<V>(pairs: Vec<(String, V)>) -> Vec<(String, V)> {
    let mut capacity = 16usize;
    while pairs.len() > capacity * 3 / 4 {
        capacity *= 2;
    }
    java_hash_map_order_in(pairs, capacity)
}

/// The iteration order of a `java.util.HashMap<String, _>` of `capacity` buckets filled with
/// these pairs in this order.
pub(crate) fn java_hash_map_order_in<V>(
    pairs: Vec<(String, V)>,
    capacity: usize,
) -> Vec<(String, V)> {
    let mut keyed: Vec<(usize, usize, (String, V))> = pairs
        .into_iter()
        .enumerate()
        .map(|(i, pair)| {
            let h = pair
                .0
                .encode_utf16()
                .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
            let spread = (h ^ ((h as u32) >> 16) as i32) as u32 as usize;
            (spread & (capacity - 1), i, pair)
        })
        .collect();
    keyed.sort_by_key(|(bucket, i, _)| (*bucket, *i));
    keyed.into_iter().map(|(_, _, pair)| pair).collect()
}

/// `ISO_LOCAL_DATE`: four-digit years, a sign beyond 9999 and before year 0.
fn iso_date(days: i64) -> String {
    let (y, m, d) = pg_text::civil_from_days(days);
    let year = if y > 9999 {
        format!("+{y}")
    } else if y < 0 {
        format!("-{:04}", -y)
    } else {
        format!("{y:04}")
    };
    format!("{year}-{m:02}-{d:02}")
}

/// `ISO_LOCAL_TIME`: seconds always, the fraction with as few digits as it needs.
fn iso_time(micros: i64) -> String {
    let s = micros / 1_000_000;
    let mut out = format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    let fraction = micros % 1_000_000;
    if fraction != 0 {
        out.push('.');
        out.push_str(format!("{fraction:06}").trim_end_matches('0'));
    }
    out
}

/// Whether Debezium reads the defaults of columns of this type at all
/// (`PostgresDefaultValueConverter` has a mapper for its name: the built-in types below and,
/// since 3.x, every enum): not of `citext`, `money`, arrays, `bytea`, `timetz`, network or
/// geometric types, whose defaults it leaves out of the schema.
pub fn has_default_mapper(pg_type: &PgType) -> bool {
    use oid::*;
    const MAPPED: &[u32] = &[
        BIT,
        VARBIT,
        BOOL,
        BPCHAR,
        VARCHAR,
        TEXT,
        NUMERIC,
        FLOAT4,
        FLOAT8,
        INT2,
        INT4,
        INT8,
        JSON,
        JSONB,
        XML,
        UUID,
        DATE,
        TIME,
        TIMESTAMP,
        TIMESTAMPTZ,
        INTERVAL,
    ];
    pg_type.enum_labels.is_some() || MAPPED.contains(&pg_type.oid)
}

/// A column default the way Debezium puts it in the schema
/// (`PostgresDefaultValueConverter`): a literal as its value; a function call (`now()`,
/// `gen_random_uuid()`, `nextval(…)`, `CURRENT_TIMESTAMP`) as Debezium's placeholder for the
/// type (the zero UUID, the epoch, 0); anything else none.
/// A default that would be a Struct (a `numeric` of variable scale) is none: Debezium leaves
/// it out (its workaround for KAFKA-12694).
pub fn default_value(kind: &ColumnKind, expression: &str) -> Option<Value> {
    parse_default(kind, expression).filter(|v| !matches!(v, Value::Struct(_)))
}

fn parse_default(kind: &ColumnKind, expression: &str) -> Option<Value> {
    let expression = expression.trim();
    if is_function_default(expression) {
        return function_placeholder(kind);
    }
    if let Some(rest) = expression.strip_prefix('\'') {
        let end = rest
            .rfind("'::")
            .or_else(|| rest.strip_suffix('\'').map(|r| r.len()))?;
        let literal = rest[..end].replace("''", "'");
        // pgjdbc reads `infinity` as OffsetDateTime.MAX (MIN), which Debezium's converter
        // cannot turn into its type: no default.
        if literal.ends_with("infinity")
            && matches!(
                kind,
                ColumnKind::Date(_) | ColumnKind::Timestamp { .. } | ColumnKind::TimestampTz { .. }
            )
        {
            return None;
        }
        return kind
            .value(&Bytes::from(literal))
            .ok()
            .map(|v| rescaled(kind, v));
    }
    match kind {
        ColumnKind::Int16 | ColumnKind::Int32 | ColumnKind::Int64 => {
            let t = expression.trim_start_matches('(').trim_end_matches(')');
            t.parse().ok().map(Value::Int)
        }
        ColumnKind::Float32 | ColumnKind::Float64 | ColumnKind::Numeric { .. } => {
            let t = expression.trim_start_matches('(').trim_end_matches(')');
            kind.value(&Bytes::from(t.to_owned()))
                .ok()
                .map(|v| rescaled(kind, v))
        }
        ColumnKind::Boolean => match expression {
            "true" => Some(Value::Boolean(true)),
            "false" => Some(Value::Boolean(false)),
            _ => None,
        },
        _ => None,
    }
}

/// A decimal default with fewer fraction digits than its column's scale, given that scale
/// (`PostgresDefaultValueConverter.convertDefaultValue`: `12.3` in a `numeric(10,2)` is 12.30).
fn rescaled(kind: &ColumnKind, value: Value) -> Value {
    match (kind, value) {
        (
            ColumnKind::Numeric { scale, .. },
            Value::Decimal(n @ Numeric::Finite { scale: have, .. }),
        ) if have < *scale => Value::Decimal(n.with_scale(*scale)),
        (_, value) => value,
    }
}

/// `PostgresDefaultValueConverter.FUNCTION_DEFAULT_PATTERN` (`^[(]?[A-Za-z0-9_.]+\((?:.+(?:, ?.+)*)?\)`)
/// and its `CURRENT_DATE_TIMES` (`current_timestamp`, `current_time`, `current_date`,
/// `localtime`, `localtimestamp`, with an optional precision).
fn is_function_default(expression: &str) -> bool {
    let lower = expression.to_ascii_lowercase();
    let bare = lower.split('(').next().unwrap_or("").trim();
    if [
        "current_timestamp",
        "current_time",
        "current_date",
        "localtime",
        "localtimestamp",
    ]
    .contains(&bare)
    {
        return true;
    }
    let e = expression.strip_prefix('(').unwrap_or(expression);
    let name_end = e
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(e.len());
    name_end > 0 && e[name_end..].starts_with('(') && e.contains(')')
}

/// The placeholder Debezium gives a function default of a column of `kind`.
fn function_placeholder(kind: &ColumnKind) -> Option<Value> {
    let epoch = |text: &'static str| kind.value(&Bytes::from_static(text.as_bytes())).ok();
    Some(match kind {
        ColumnKind::Uuid => Value::text("00000000-0000-0000-0000-000000000000"),
        ColumnKind::TimestampTz { .. } => return epoch("1970-01-01 00:00:00+00"),
        ColumnKind::Timestamp { .. } => return epoch("1970-01-01 00:00:00"),
        ColumnKind::Date(_) => return epoch("1970-01-01"),
        ColumnKind::Int16 | ColumnKind::Int32 | ColumnKind::Int64 => Value::Int(0),
        ColumnKind::Json => Value::text("{}"),
        ColumnKind::Text | ColumnKind::Xml => Value::text(""),
        ColumnKind::Boolean => Value::Boolean(false),
        ColumnKind::Float32 | ColumnKind::Float64 => Value::Float(0.0),
        // No placeholder outbox-relay knows of for the others: no default.
        _ => return None,
    })
}

/// ISO-8601 in UTC (`ISO_OFFSET_DATE_TIME` at UTC): with `Some(p)` exactly `p` fraction
/// digits (`ZonedTimestamp.toIsoString` with the column's scale; none for 0), with `None`
/// as few as the value needs (`IsoTimestamp`).
fn format_iso_utc(micros: i64, precision: Option<u8>) -> String {
    let time = micros.rem_euclid(DAY_MICROS);
    let date = iso_date(micros.div_euclid(DAY_MICROS));
    let time = match precision {
        None => iso_time(time),
        Some(p) => {
            let mut out = iso_time(time - time % 1_000_000);
            if p > 0 {
                out.push('.');
                out.push_str(&format!("{:06}", time % 1_000_000)[..usize::from(p.min(6))]);
            }
            out
        }
    };
    format!("{date}T{time}Z")
}

/// The type as a user reads it in an error.
fn describe(pg_type: &PgType) -> String {
    if pg_type.name.is_empty() {
        format!("type OID {}", pg_type.oid)
    } else {
        format!("type {} (OID {})", pg_type.name, pg_type.oid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which types Debezium writes with schemas of its own that outbox-relay does not make
    /// (refused), which it leaves out (point[]: dropped from a row image), and isbn, which
    /// it writes as a string.
    #[test]
    fn types_debezium_writes_its_own_way_are_told_from_those_it_leaves_out() {
        let named = |name: &str, oid: u32| PgType {
            name: name.into(),
            ..PgType::builtin(oid, -1)
        };
        let array_of = |element: PgType| PgType {
            element: Some(Box::new(element)),
            ..PgType::builtin(1, -1)
        };
        let modes = TypeModes {
            include_unknown: true,
            ..TypeModes::default()
        };
        for refused in [
            PgType::builtin(600, -1),
            PgType::builtin(718, -1),
            named("geometry", 90_001),
            named("vector", 90_002),
            array_of(PgType::builtin(603, -1)),
        ] {
            assert!(debezium_writes_unproduced(&refused), "{refused:?}");
            let why = ColumnKind::resolve(&refused, &modes).unwrap_err();
            assert!(
                why.contains("of its own, which outbox-relay does not produce"),
                "{why}"
            );
        }
        let points = array_of(PgType::builtin(600, -1));
        assert!(!debezium_writes_unproduced(&points));
        assert!(ColumnKind::resolve(&points, &modes)
            .unwrap_err()
            .contains("leaves the column out"));
        assert_eq!(
            ColumnKind::resolve(&named("isbn", 90_003), &TypeModes::default()),
            Ok(ColumnKind::Text)
        );
    }

    #[test]
    fn timestamps_convert_to_epoch_units() {
        let ts = ColumnKind::from_type(1114, -1).unwrap();
        assert_eq!(
            ts.value(&Bytes::from_static(b"2026-01-02 03:04:05.123456"))
                .unwrap(),
            Value::Int(1_767_323_045_123_456)
        );
        assert_eq!(
            ts.epoch_millis(&Bytes::from_static(b"1970-01-01 00:00:01.5"))
                .unwrap(),
            1500
        );
        // Fixed width since Debezium 2.2: as many digits as the column's precision
        // (PostgresValueConverter.convertTimestampWithZone → ZonedTimestamp.toIsoString
        // with column.scale(); pgjdbc TypeInfoCache.getScale: timestamptz typmod -1 → 6).
        let tz = ColumnKind::from_type(1184, -1).unwrap();
        assert_eq!(
            tz.value(&Bytes::from_static(b"2026-01-02 04:04:05.12+01"))
                .unwrap(),
            Value::text("2026-01-02T03:04:05.120000Z")
        );
        assert_eq!(
            tz.value(&Bytes::from_static(b"2026-01-02 03:04:05+00"))
                .unwrap(),
            Value::text("2026-01-02T03:04:05.000000Z")
        );
        let tz3 = ColumnKind::from_type(1184, 3).unwrap();
        assert_eq!(
            tz3.value(&Bytes::from_static(b"2026-03-04 05:06:07.12+00"))
                .unwrap(),
            Value::text("2026-03-04T05:06:07.120Z")
        );
        let tz0 = ColumnKind::from_type(1184, 0).unwrap();
        assert_eq!(
            tz0.value(&Bytes::from_static(b"2026-03-04 05:06:07+00"))
                .unwrap(),
            Value::text("2026-03-04T05:06:07Z")
        );
        assert_eq!(
            tz.value(&Bytes::from_static(b"infinity")).unwrap(),
            Value::text("infinity")
        );
        assert_eq!(
            tz.epoch_millis(&Bytes::from_static(b"1969-12-31 19:00:00-05"))
                .unwrap(),
            0
        );
        assert_eq!(
            ColumnKind::Date(TimePrecisionMode::Adaptive)
                .value(&Bytes::from_static(b"2026-01-02"))
                .unwrap(),
            Value::Int(20455)
        );
    }

    /// Debezium leaves out the defaults of types it has no mapper for (found by the
    /// differential test: a citext column's `DEFAULT ''` replaced a NULL value in the relay's
    /// schemaless JSON, Debezium's stayed null), and of a numeric of variable scale.
    #[test]
    fn defaults_only_for_the_types_debezium_maps() {
        let of = |oid| has_default_mapper(&PgType::builtin(oid, -1));
        assert!(of(oid::TEXT) && of(oid::TIMESTAMPTZ));
        assert!(!of(oid::MONEY) && !of(oid::INET) && !of(oid::TIMETZ) && !of(oid::BYTEA));
        // An enum has one (found by the differential test: Debezium 3.6 writes its default).
        let mood = PgType {
            enum_labels: Some(vec!["happy".into(), "so-so".into()]),
            ..PgType::builtin(98_765, -1)
        };
        assert!(has_default_mapper(&mood));
        // 'infinity' has none either (found by the differential test).
        let ts = ColumnKind::resolve(&PgType::builtin(oid::TIMESTAMP, -1), &TypeModes::default())
            .unwrap();
        assert_eq!(
            default_value(&ts, "'infinity'::timestamp without time zone"),
            None
        );
        assert!(default_value(&ts, "'2026-01-02 03:04:05'::timestamp without time zone").is_some());
        // A numeric of variable scale is a Struct: no default either.
        let variable =
            ColumnKind::resolve(&PgType::builtin(oid::NUMERIC, -1), &TypeModes::default()).unwrap();
        assert_eq!(default_value(&variable, "'-100'::numeric"), None);
        let fixed = ColumnKind::resolve(
            &PgType::builtin(oid::NUMERIC, (10 << 16 | 2) + 4),
            &TypeModes::default(),
        )
        .unwrap();
        assert_eq!(
            default_value(&fixed, "12.3"),
            Some(Value::Decimal(Numeric::parse("12.30").unwrap()))
        );
        assert_eq!(
            default_value(&fixed, "'-1'::numeric"),
            Some(Value::Decimal(Numeric::parse("-1.00").unwrap()))
        );
    }

    #[test]
    fn literal_defaults_and_debeziums_placeholders_for_functions() {
        assert_eq!(
            default_value(&ColumnKind::Text, "'pending'::character varying"),
            Some(Value::text("pending"))
        );
        assert_eq!(
            default_value(&ColumnKind::Text, "'it''s'::text"),
            Some(Value::text("it's"))
        );
        assert_eq!(default_value(&ColumnKind::Int32, "0"), Some(Value::Int(0)));
        // PostgresDefaultValueConverter: function defaults get a placeholder per type.
        let tz = ColumnKind::from_type(1184, -1).unwrap();
        assert_eq!(
            default_value(&tz, "now()"),
            Some(Value::text("1970-01-01T00:00:00.000000Z"))
        );
        assert_eq!(
            default_value(&tz, "CURRENT_TIMESTAMP"),
            Some(Value::text("1970-01-01T00:00:00.000000Z"))
        );
        assert_eq!(
            default_value(&ColumnKind::Uuid, "gen_random_uuid()"),
            Some(Value::text("00000000-0000-0000-0000-000000000000"))
        );
        assert_eq!(
            default_value(&ColumnKind::Int64, "nextval('outbox_seq'::regclass)"),
            Some(Value::Int(0))
        );
        assert_eq!(
            default_value(&ColumnKind::Text, "(gen_random_uuid())::text"),
            Some(Value::text(""))
        );
        assert_eq!(
            default_value(&ColumnKind::Boolean, "is_enabled()"),
            Some(Value::Boolean(false))
        );
    }

    #[test]
    fn bytea_and_booleans() {
        assert_eq!(
            ColumnKind::Bytea(BinaryMode::Bytes)
                .value(&Bytes::from_static(b"\\x00ff"))
                .unwrap(),
            Value::Bytes(Bytes::from_static(&[0, 255]))
        );
        assert_eq!(
            ColumnKind::Boolean
                .value(&Bytes::from_static(b"t"))
                .unwrap(),
            Value::Boolean(true)
        );
    }

    fn kind(oid: u32, typmod: i32, modes: TypeModes) -> ColumnKind {
        ColumnKind::resolve(&PgType::builtin(oid, typmod), &modes).unwrap()
    }

    fn value(kind: &ColumnKind, text: &str) -> Value {
        kind.value(&Bytes::copy_from_slice(text.as_bytes()))
            .unwrap()
    }

    fn json(kind: &ColumnKind, text: &str) -> String {
        let schema = kind.schema(true);
        let mut out = Vec::new();
        crate::connect::json_value::write_schema(&mut out, &schema);
        out.extend_from_slice(b" ");
        crate::connect::json_value::write_value(&mut out, &schema, &value(kind, text)).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// numeric(p,s) → Kafka Decimal (scale, then connect.decimal.precision); unconstrained →
    /// VariableScaleDecimal with trailing zeros stripped (ARPT
    /// schemasAndValuesForBigDecimalEncodedNumericTypes / ...NumericTypesWithVariableScale).
    #[test]
    fn numeric_under_each_decimal_handling_mode() {
        let modes = TypeModes::default();
        // numeric(3,2): typmod ((3 << 16) | 2) + 4.
        let n32 = kind(1700, (3 << 16 | 2) + 4, modes);
        assert_eq!(
            json(&n32, "1.10"),
            r#"{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"3"}} "bg==""#
        );
        assert!(json(&n32, "-1.10").ends_with(r#" "kg==""#));
        let n = kind(1700, -1, modes);
        assert_eq!(
            json(&n, "10.1111"),
            r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"scale"},{"type":"bytes","optional":false,"field":"value"}],"optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,"doc":"Variable scaled decimal"} {"scale":4,"value":"AYr3"}"#
        );
        assert!(json(&n, "1.500").ends_with(r#" {"scale":1,"value":"Dw=="}"#));
        assert!(json(&n, "100").ends_with(r#" {"scale":0,"value":"ZA=="}"#));
        assert!(json(&n, "-12.3400").ends_with(r#" {"scale":2,"value":"+y4="}"#));
        assert!(
            n.value(&Bytes::from_static(b"NaN")).is_err(),
            "precise refuses NaN"
        );
        let double = TypeModes {
            decimal: DecimalMode::Double,
            ..modes
        };
        assert_eq!(value(&kind(1700, -1, double), "22.22"), Value::Float(22.22));
        assert_eq!(
            json(&kind(1700, -1, double), "NaN"),
            r#"{"type":"double","optional":true} "NaN""#
        );
        let string = TypeModes {
            decimal: DecimalMode::String,
            ..modes
        };
        // numeric(6,4) 22.22 → "22.2200"; NaN → SpecialValueDecimal's enum name.
        assert_eq!(
            value(&kind(1700, (6 << 16 | 4) + 4, string), "22.22"),
            Value::text("22.2200")
        );
        assert_eq!(
            value(&kind(1700, -1, string), "1.500"),
            Value::text("1.500")
        );
        assert_eq!(value(&kind(1700, -1, string), "NaN"), Value::text("NAN"));
        assert_eq!(
            value(&kind(1700, -1, string), "-Infinity"),
            Value::text("NEGATIVE_INFINITY")
        );
    }

    /// PVC.moneySchema / PostgresMoney.parse (ARPT schemaAndValuesForNegativeMoneyTypes).
    #[test]
    fn money_is_a_decimal_of_money_fraction_digits() {
        let money = kind(790, -1, TypeModes::default());
        assert_eq!(
            json(&money, "$1,234.56"),
            r#"{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"}} "AeJA""#
        );
        let string = TypeModes {
            decimal: DecimalMode::String,
            ..TypeModes::default()
        };
        assert_eq!(
            value(&kind(790, -1, string), "-$1,234.11"),
            Value::text("-1234.11")
        );
    }

    /// ARPT schemasAndValuesForDateTimeTypes and the time precision modes.
    #[test]
    fn dates_times_and_intervals_under_each_mode() {
        let adaptive = TypeModes::default();
        let iso = TypeModes {
            time: TimePrecisionMode::IsoString,
            ..adaptive
        };
        let connect = TypeModes {
            time: TimePrecisionMode::Connect,
            ..adaptive
        };
        // date: BC, five-digit years, infinity (DateTimeFormat.date's constants).
        let date = kind(1082, -1, adaptive);
        assert_eq!(value(&date, "2016-11-04"), Value::Int(17109));
        assert_eq!(value(&date, "0044-03-15 BC"), Value::Int(-735_160));
        assert_eq!(value(&date, "10000-01-01"), Value::Int(2_932_897));
        assert_eq!(value(&date, "infinity"), Value::Int(-2_147_472_692));
        assert_eq!(
            value(&kind(1082, -1, iso), "0044-03-15 BC"),
            Value::text("-0043-03-15Z")
        );
        assert_eq!(
            value(&kind(1082, -1, iso), "10000-01-01"),
            Value::text("+10000-01-01Z")
        );
        // time: MicroTime unless time(p ≤ 3); 24:00:00 is one day.
        assert_eq!(
            value(&kind(1083, -1, adaptive), "13:51:30"),
            Value::Int(49_890_000_000)
        );
        assert_eq!(
            value(&kind(1083, 3, adaptive), "13:51:30.123"),
            Value::Int(49_890_123)
        );
        assert_eq!(
            value(&kind(1083, -1, adaptive), "24:00:00"),
            Value::Int(86_400_000_000)
        );
        assert_eq!(
            kind(1083, 3, connect).schema(false).name.as_deref(),
            Some("org.apache.kafka.connect.data.Time")
        );
        assert_eq!(
            value(&kind(1083, -1, iso), "13:51:30.120"),
            Value::text("13:51:30.12Z")
        );
        // timetz: UTC, minimal fraction (ZonedTime), 24:00:00+00 kept.
        let timetz = kind(1266, -1, adaptive);
        assert_eq!(
            value(&timetz, "13:51:30.123789+02"),
            Value::text("11:51:30.123789Z")
        );
        assert_eq!(value(&timetz, "00:00:00+05:30"), Value::text("18:30:00Z"));
        assert_eq!(value(&timetz, "24:00:00+00"), Value::text("24:00:00Z"));
        // timestamp: PGStatement's infinities, BC, isostring.
        let ts = kind(1114, -1, adaptive);
        assert_eq!(
            value(&ts, "infinity"),
            Value::Int(9_223_372_036_825_200_000)
        );
        assert_eq!(
            value(&ts, "-infinity"),
            Value::Int(-9_223_372_036_832_400_000)
        );
        assert_eq!(
            value(&ts, "4713-12-31 23:59:59.999999 BC"),
            Value::Int(-210_831_897_600_000_001)
        );
        assert_eq!(
            value(&kind(1114, 3, adaptive), "2016-11-04 13:51:30.123456"),
            Value::Int(1_478_267_490_123)
        );
        assert_eq!(
            value(&kind(1114, -1, iso), "2016-11-04 13:51:30.123456"),
            Value::text("2016-11-04T13:51:30.123456Z")
        );
        assert_eq!(
            value(&kind(1114, -1, iso), "infinity"),
            Value::text("+294247-01-10T04:00:25.2Z")
        );
        let tz = kind(1184, -1, adaptive);
        assert_eq!(
            value(&tz, "21016-11-04 13:51:30+07"),
            Value::text("+21016-11-04T06:51:30.000000Z")
        );
        assert_eq!(
            value(&tz, "0044-03-15 10:00:00+00 BC"),
            Value::text("-0043-03-15T10:00:00.000000Z")
        );
        // interval: MicroDuration (365.25 / 12 days a month) or the ISO string.
        let interval = kind(1186, -1, adaptive);
        assert_eq!(
            value(&interval, "1 year 2 mons 3 days 04:05:06.78"),
            Value::Int(37_091_106_780_000)
        );
        assert_eq!(value(&interval, "1 mon"), Value::Int(2_629_800_000_000));
        assert_eq!(
            value(&interval, "-1 days +02:00:00"),
            Value::Int(-79_200_000_000)
        );
        let strings = TypeModes {
            interval: IntervalMode::String,
            ..adaptive
        };
        let interval = kind(1186, -1, strings);
        assert_eq!(
            value(&interval, "1 year 2 mons 3 days 04:05:06.78"),
            Value::text("P1Y2M3DT4H5M6.78S")
        );
        assert_eq!(value(&interval, "00:00:00"), Value::text("P0Y0M0DT0H0M0S"));
        assert_eq!(
            value(&interval, "-1 days +02:00:00"),
            Value::text("P0Y0M-1DT2H0M0S")
        );
        assert_eq!(
            value(&interval, "-00:00:01.5"),
            Value::text("P0Y0M0DT0H0M-1.5S")
        );
    }

    /// ARPT schemaAndValuesForBinTypes: little-endian, not padded; bit(1) is a boolean.
    #[test]
    fn bit_strings_bytea_modes_and_text_types() {
        let modes = TypeModes::default();
        let bits3 = kind(1560, 3, modes);
        assert_eq!(
            json(&bits3, "101"),
            r#"{"type":"bytes","optional":true,"name":"io.debezium.data.Bits","version":1,"parameters":{"length":"3"}} "BQ==""#
        );
        assert_eq!(
            value(&kind(1560, 2, modes), "00"),
            Value::Bytes(Bytes::new())
        );
        assert_eq!(
            value(&kind(1560, 24, modes), "000000110000001000000001"),
            Value::Bytes(Bytes::from_static(&[1, 2, 3]))
        );
        assert_eq!(value(&kind(1560, 1, modes), "1"), Value::Boolean(true));
        // boolout's letters (pgoutput) and `::text`'s words (rows read with SQL).
        for (text, b) in [("t", true), ("true", true), ("f", false), ("false", false)] {
            assert_eq!(
                value(&kind(16, -1, modes), text),
                Value::Boolean(b),
                "{text}"
            );
        }
        assert_eq!(
            kind(1562, -1, modes).schema(true).parameters[0].1.as_ref(),
            "2147483647"
        );
        for (mode, expected) in [
            (BinaryMode::Base64, "AQID"),
            (BinaryMode::Base64UrlSafe, "AQID"),
            (BinaryMode::Hex, "010203"),
        ] {
            let bytea = kind(
                17,
                -1,
                TypeModes {
                    binary: mode,
                    ..modes
                },
            );
            assert_eq!(value(&bytea, "\\x010203"), Value::text(expected));
        }
        let ltree = ColumnKind::resolve(
            &PgType {
                name: "ltree".into(),
                ..PgType::builtin(16_400, -1)
            },
            &modes,
        )
        .unwrap();
        assert_eq!(
            ltree.schema(false).name.as_deref(),
            Some("io.debezium.data.Ltree")
        );
        assert_eq!(kind(869, -1, modes), ColumnKind::Text, "inet");
        assert_eq!(
            kind(1042, 14, modes)
                .value(&Bytes::from_static(b"ab   "))
                .unwrap(),
            Value::text("ab   ")
        );
        // float4 NaN: Jackson quotes non-finite numbers.
        assert_eq!(
            json(&kind(700, -1, modes), "NaN"),
            r#"{"type":"float","optional":true} "NaN""#
        );
    }

    /// ARPT: hstore as compact JSON in java.util.HashMap order; arrays with optional
    /// elements (enum elements required); numeric(10,2)[] carries the element modifier.
    #[test]
    fn hstore_arrays_enums_and_unmapped_types() {
        let modes = TypeModes::default();
        let hstore_type = PgType {
            name: "hstore".into(),
            ..PgType::builtin(16_500, -1)
        };
        let hstore = ColumnKind::resolve(&hstore_type, &modes).unwrap();
        assert_eq!(
            value(&hstore, r#""key4"=>"val4", "key5"=>NULL"#),
            Value::text(r#"{"key5":null,"key4":"val4"}"#)
        );
        assert_eq!(
            value(&hstore, r#""key1"=>"val1", "key2"=>"val2", "key3"=>"val3""#),
            Value::text(r#"{"key1":"val1","key2":"val2","key3":"val3"}"#)
        );
        let map = ColumnKind::resolve(
            &hstore_type,
            &TypeModes {
                hstore: HstoreMode::Map,
                ..modes
            },
        )
        .unwrap();
        assert_eq!(
            json(&map, r#""a"=>"1""#),
            r#"{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"string","optional":true},"optional":true} {"a":"1"}"#
        );
        let array = |element: PgType, typmod: i32| PgType {
            typmod,
            element: Some(Box::new(element)),
            ..PgType::builtin(1, typmod)
        };
        let ints = ColumnKind::resolve(&array(PgType::builtin(23, -1), -1), &modes).unwrap();
        assert_eq!(
            json(&ints, "{1,2,NULL}"),
            r#"{"type":"array","items":{"type":"int32","optional":true},"optional":true} [1,2,null]"#
        );
        let texts = ColumnKind::resolve(&array(PgType::builtin(25, -1), -1), &modes).unwrap();
        assert_eq!(
            value(&texts, r#"{one,"two \"2\"","NULL"}"#),
            Value::Array(vec![
                Value::text("one"),
                Value::text("two \"2\""),
                Value::text("NULL")
            ])
        );
        let decimals = ColumnKind::resolve(
            &array(PgType::builtin(1700, -1), (10 << 16 | 2) + 4),
            &modes,
        )
        .unwrap();
        assert!(json(&decimals, "{1.20,3.40}")
            .contains(r#""parameters":{"scale":"2","connect.decimal.precision":"10"}"#));
        let status = PgType {
            name: "status".into(),
            enum_labels: Some(vec!["V1".into(), "V2".into()]),
            ..PgType::builtin(16_600, -1)
        };
        assert_eq!(
            json(
                &ColumnKind::resolve(&array(status.clone(), -1), &modes).unwrap(),
                "{V1,V2}"
            ),
            r#"{"type":"array","items":{"type":"string","optional":false,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"V1,V2"}},"optional":true} ["V1","V2"]"#
        );
        assert!(
            ColumnKind::resolve(&array(PgType::builtin(790, -1), -1), &modes).is_err(),
            "money[]"
        );
        let tsquery = PgType {
            name: "tsquery".into(),
            ..PgType::builtin(3615, -1)
        };
        let refused = ColumnKind::resolve(&tsquery, &modes).unwrap_err();
        assert!(
            refused.contains("tsquery") && refused.contains("include.unknown.datatypes"),
            "{refused}"
        );
        let unknown = ColumnKind::resolve(
            &tsquery,
            &TypeModes {
                include_unknown: true,
                ..modes
            },
        )
        .unwrap();
        assert_eq!(
            json(&unknown, "'fat' <-> 'cat'"),
            r#"{"type":"bytes","optional":true} "J2ZhdCcgPC0+ICdjYXQn""#
        );
    }
}
