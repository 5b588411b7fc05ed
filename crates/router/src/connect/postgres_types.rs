//! How Debezium's PostgreSQL connector (default settings: `time.precision.mode=adaptive`,
//! `binary.handling.mode=bytes`) types a column, and its value from pgoutput's text form.

use super::data::{Schema, SchemaType, Value};
use bytes::Bytes;

/// What the catalog says about a column (pgoutput's Relation message does not carry it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnFacts {
    pub name: String,
    pub not_null: bool,
    /// `pg_get_expr(adbin, adrelid)`, e.g. `'pending'::character varying` or `now()`.
    pub default_expression: Option<String>,
    /// The labels of an enum column's type, in `enumsortorder`; `None` for other types.
    pub enum_labels: Option<Vec<String>>,
}

/// The kind of a column, by type OID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    Boolean,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Text,
    Json,
    Uuid,
    Xml,
    Bytea,
    /// `timestamp(p)`: milliseconds for p <= 3, else microseconds since the epoch.
    Timestamp {
        millis: bool,
    },
    /// `timestamptz(p)`: ISO-8601 text in UTC with exactly `precision` fraction digits
    /// (io.debezium.time.ZonedTimestamp; fixed width since Debezium 2.2).
    TimestampTz {
        precision: u8,
    },
    /// A user-defined enum (io.debezium.data.Enum; its labels go in the schema's `allowed`).
    Enum,
    /// days since the epoch (io.debezium.time.Date).
    Date,
}

impl ColumnKind {
    /// `None` for types outbox-relay does not convert the way Debezium does (numeric,
    /// arrays, ranges, ...): the caller refuses to start rather than guess the bytes.
    pub fn from_type(type_oid: u32, type_modifier: i32) -> Option<Self> {
        Some(match type_oid {
            16 => Self::Boolean,
            21 => Self::Int16,
            23 => Self::Int32,
            20 | 26 => Self::Int64,
            700 => Self::Float32,
            701 => Self::Float64,
            18 | 19 | 25 | 1042 | 1043 => Self::Text,
            114 | 3802 => Self::Json,
            2950 => Self::Uuid,
            142 => Self::Xml,
            17 => Self::Bytea,
            1114 => Self::Timestamp {
                millis: (0..=3).contains(&type_modifier),
            },
            // pgjdbc TypeInfoCache.getScale: TIMESTAMPTZ typmod -1 → 6, else the typmod.
            1184 => Self::TimestampTz {
                precision: if (0..=6).contains(&type_modifier) {
                    type_modifier as u8
                } else {
                    6
                },
            },
            1082 => Self::Date,
            _ => return None,
        })
    }

    pub fn schema(self, optional: bool) -> Schema {
        let s = |kind| Schema::new(kind, optional);
        match self {
            Self::Boolean => s(SchemaType::Boolean),
            Self::Int16 => s(SchemaType::Int16),
            Self::Int32 => s(SchemaType::Int32),
            Self::Int64 => s(SchemaType::Int64),
            Self::Float32 => s(SchemaType::Float32),
            Self::Float64 => s(SchemaType::Float64),
            Self::Text => s(SchemaType::String),
            Self::Json => s(SchemaType::String).named("io.debezium.data.Json", Some(1)),
            Self::Uuid => s(SchemaType::String).named("io.debezium.data.Uuid", Some(1)),
            Self::Xml => s(SchemaType::String).named("io.debezium.data.Xml", Some(1)),
            Self::Bytea => s(SchemaType::Bytes),
            Self::Timestamp { millis: true } => {
                s(SchemaType::Int64).named("io.debezium.time.Timestamp", Some(1))
            }
            Self::Timestamp { millis: false } => {
                s(SchemaType::Int64).named("io.debezium.time.MicroTimestamp", Some(1))
            }
            Self::TimestampTz { .. } => {
                s(SchemaType::String).named("io.debezium.time.ZonedTimestamp", Some(1))
            }
            // `allowed` is added by the caller, which knows the labels.
            Self::Enum => s(SchemaType::String).named("io.debezium.data.Enum", Some(1)),
            Self::Date => s(SchemaType::Int32).named("io.debezium.time.Date", Some(1)),
        }
    }

    /// The Connect value of pgoutput's text form of a column of this kind.
    pub fn value(self, text: &Bytes) -> Result<Value, String> {
        let str = || std::str::from_utf8(text).map_err(|_| "column text is not UTF-8".to_owned());
        let bad = |what: &str| {
            format!(
                "cannot read {what} from {:?}",
                String::from_utf8_lossy(text)
            )
        };
        Ok(match self {
            Self::Text | Self::Json | Self::Uuid | Self::Xml | Self::Enum => {
                Value::String(text.clone())
            }
            Self::Boolean => Value::Boolean(&text[..] == b"t"),
            Self::Int16 | Self::Int32 | Self::Int64 => {
                Value::Int(str()?.parse().map_err(|_| bad("an integer"))?)
            }
            Self::Float32 | Self::Float64 => Value::Float(match str()? {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                t => t.parse().map_err(|_| bad("a number"))?,
            }),
            Self::Bytea => {
                let hex = str()?.strip_prefix("\\x").ok_or_else(|| bad("bytea hex"))?;
                Value::Bytes(decode_hex(hex).ok_or_else(|| bad("bytea hex"))?.into())
            }
            Self::Timestamp { millis } => {
                let micros = parse_timestamp_micros(str()?).ok_or_else(|| bad("a timestamp"))?;
                Value::Int(if millis {
                    micros.div_euclid(1000)
                } else {
                    micros
                })
            }
            Self::TimestampTz { precision } => match str()? {
                // Debezium passes PostgreSQL's infinities through as text.
                "infinity" | "-infinity" => Value::String(text.clone()),
                t => {
                    let micros = parse_timestamp_micros(t).ok_or_else(|| bad("a timestamptz"))?;
                    Value::text(&format_iso_utc(micros, precision))
                }
            },
            Self::Date => {
                let t = str()?;
                let days = parse_date(t).ok_or_else(|| bad("a date"))?;
                Value::Int(days)
            }
        })
    }

    /// Milliseconds since the epoch, for `table.field.event.timestamp`.
    pub fn epoch_millis(self, text: &Bytes) -> Result<i64, String> {
        let t = std::str::from_utf8(text).map_err(|_| "column text is not UTF-8".to_owned())?;
        match self {
            Self::Timestamp { .. } | Self::TimestampTz { .. } => parse_timestamp_micros(t)
                .map(|m| m.div_euclid(1000))
                .ok_or_else(|| format!("cannot read a timestamp from {t:?}")),
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

/// A column default the way Debezium puts it in the schema
/// (`PostgresDefaultValueConverter`): a literal as its value; a function call (`now()`,
/// `gen_random_uuid()`, `nextval(…)`, `CURRENT_TIMESTAMP`) as Debezium's placeholder for the
/// type (the zero UUID, the epoch, 0); anything else none.
pub fn default_value(kind: ColumnKind, expression: &str) -> Option<Value> {
    let expression = expression.trim();
    if is_function_default(expression) {
        return function_placeholder(kind);
    }
    if let Some(rest) = expression.strip_prefix('\'') {
        let end = rest
            .rfind("'::")
            .or_else(|| rest.strip_suffix('\'').map(|r| r.len()))?;
        let literal = rest[..end].replace("''", "'");
        return kind.value(&Bytes::from(literal)).ok();
    }
    match kind {
        ColumnKind::Int16 | ColumnKind::Int32 | ColumnKind::Int64 => {
            let t = expression.trim_start_matches('(').trim_end_matches(')');
            t.parse().ok().map(Value::Int)
        }
        ColumnKind::Boolean => match expression {
            "true" => Some(Value::Boolean(true)),
            "false" => Some(Value::Boolean(false)),
            _ => None,
        },
        _ => None,
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn parse_date(text: &str) -> Option<i64> {
    let mut parts = text.get(..10)?.split('-');
    let y = parts.next()?.parse().ok()?;
    let m = parts.next()?.parse().ok()?;
    let d = parts.next()?.parse().ok()?;
    Some(days_from_civil(y, m, d))
}

/// Microseconds since the epoch of PostgreSQL's ISO output, `2026-01-02 03:04:05.123456`
/// with an optional offset (`+00`, `-05:30`) for timestamptz.
fn parse_timestamp_micros(text: &str) -> Option<i64> {
    let days = parse_date(text)?;
    let rest = text.get(10..)?.strip_prefix(' ')?;
    let h: i64 = rest.get(0..2)?.parse().ok()?;
    let mi: i64 = rest.get(3..5)?.parse().ok()?;
    let s: i64 = rest.get(6..8)?.parse().ok()?;
    let mut rest = rest.get(8..)?;
    let mut micros = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(fraction.len());
        let f = &fraction[..digits];
        micros = format!("{f:0<6}").get(..6)?.parse().ok()?;
        rest = &fraction[digits..];
    }
    let offset_seconds = if rest.is_empty() {
        0
    } else {
        let sign = match rest.as_bytes()[0] {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        let mut fields = rest[1..].split(':');
        let oh: i64 = fields.next()?.parse().ok()?;
        let om: i64 = fields.next().map_or(Some(0), |f| f.parse().ok())?;
        let os: i64 = fields.next().map_or(Some(0), |f| f.parse().ok())?;
        sign * (oh * 3600 + om * 60 + os)
    };
    let seconds = days * 86_400 + h * 3600 + mi * 60 + s - offset_seconds;
    Some(seconds * 1_000_000 + micros)
}

/// `2026-01-02T03:04:05.123456Z`, fraction without trailing zeros (ISO_OFFSET_DATE_TIME).
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
fn function_placeholder(kind: ColumnKind) -> Option<Value> {
    Some(match kind {
        ColumnKind::Uuid => Value::text("00000000-0000-0000-0000-000000000000"),
        ColumnKind::TimestampTz { precision } => Value::text(&format_iso_utc(0, precision)),
        ColumnKind::Timestamp { .. } | ColumnKind::Date => Value::Int(0),
        ColumnKind::Int16 | ColumnKind::Int32 | ColumnKind::Int64 => Value::Int(0),
        ColumnKind::Json => Value::text("{}"),
        ColumnKind::Text | ColumnKind::Xml => Value::text(""),
        ColumnKind::Boolean => Value::Boolean(false),
        ColumnKind::Float32 | ColumnKind::Float64 => Value::Float(0.0),
        // No placeholder in Debezium for these: no default.
        ColumnKind::Enum | ColumnKind::Bytea => return None,
    })
}

/// ISO-8601 in UTC with exactly `precision` fraction digits (`ZonedTimestamp.toIsoString`
/// with the column's scale; none at all for precision 0).
fn format_iso_utc(micros: i64, precision: u8) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let (y, m, d) = civil_from_days(seconds.div_euclid(86_400));
    let s = seconds.rem_euclid(86_400);
    let mut out = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60
    );
    if precision > 0 {
        let digits = format!("{fraction:06}");
        out.push('.');
        out.push_str(&digits[..usize::from(precision.min(6))]);
    }
    out.push('Z');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_convert_to_epoch_units() {
        let ts = ColumnKind::Timestamp { millis: false };
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
            ColumnKind::Date
                .value(&Bytes::from_static(b"2026-01-02"))
                .unwrap(),
            Value::Int(20455)
        );
    }

    #[test]
    fn literal_defaults_and_debeziums_placeholders_for_functions() {
        assert_eq!(
            default_value(ColumnKind::Text, "'pending'::character varying"),
            Some(Value::text("pending"))
        );
        assert_eq!(
            default_value(ColumnKind::Text, "'it''s'::text"),
            Some(Value::text("it's"))
        );
        assert_eq!(default_value(ColumnKind::Int32, "0"), Some(Value::Int(0)));
        // PostgresDefaultValueConverter: function defaults get a placeholder per type.
        let tz = ColumnKind::from_type(1184, -1).unwrap();
        assert_eq!(
            default_value(tz, "now()"),
            Some(Value::text("1970-01-01T00:00:00.000000Z"))
        );
        assert_eq!(
            default_value(tz, "CURRENT_TIMESTAMP"),
            Some(Value::text("1970-01-01T00:00:00.000000Z"))
        );
        assert_eq!(
            default_value(ColumnKind::Uuid, "gen_random_uuid()"),
            Some(Value::text("00000000-0000-0000-0000-000000000000"))
        );
        assert_eq!(
            default_value(ColumnKind::Int64, "nextval('outbox_seq'::regclass)"),
            Some(Value::Int(0))
        );
        assert_eq!(
            default_value(ColumnKind::Text, "(gen_random_uuid())::text"),
            Some(Value::text(""))
        );
        assert_eq!(
            default_value(ColumnKind::Boolean, "is_enabled()"),
            Some(Value::Boolean(false))
        );
    }

    #[test]
    fn bytea_and_booleans() {
        assert_eq!(
            ColumnKind::Bytea
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
}
