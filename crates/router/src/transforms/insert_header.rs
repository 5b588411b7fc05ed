//! `InsertHeader`: `header` added after the others, with `value.literal` parsed as Connect's
//! `Values.parseString` does (its schema and value), written by the header converter.

use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, Header, Schema, SchemaType, Value};
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.InsertHeader",
    sides: false,
    parse,
    doc: "a header `header` added last, `value.literal` typed as Connect's Values.parseString types it",
};

#[derive(Debug)]
struct InsertHeader(Header);

fn parse(o: &Options<'_>, _: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let header = o.required("header")?;
    let literal = o.required("value.literal")?;
    Ok(Arc::new(InsertHeader(Header::new(
        header,
        parse_literal(&literal),
    ))))
}

impl Transformation for InsertHeader {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        record.headers.push(self.0.clone());
        Ok(Some(record))
    }
}

/// What Connect's `Values.parseString` makes of a literal: `true`/`false` (exactly: `TRUE`
/// stays a string, as Kafka Connect + Debezium showed in the differential test) a boolean, a
/// whole number the smallest of INT8 to INT64 that holds it (`007` is `7`), anything else
/// the string itself.
pub(super) fn parse_literal(literal: &str) -> Data {
    let required = |kind| Schema::new(kind, false);
    if literal == "true" || literal == "false" {
        return Data::new(
            required(SchemaType::Boolean),
            Value::Boolean(literal == "true"),
        );
    }
    let digits = literal.strip_prefix(['+', '-']).unwrap_or(literal);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = literal.parse::<i64>() {
            let kind = if i8::try_from(n).is_ok() {
                SchemaType::Int8
            } else if i16::try_from(n).is_ok() {
                SchemaType::Int16
            } else if i32::try_from(n).is_ok() {
                SchemaType::Int32
            } else {
                SchemaType::Int64
            };
            return Data::new(required(kind), Value::Int(n));
        }
    }
    Data::text(literal)
}

/// The text the default `SimpleHeaderConverter` writes for an `InsertHeader` literal.
pub fn simple_header_literal(literal: &str) -> String {
    match parse_literal(literal).value {
        Value::Int(n) => n.to_string(),
        _ => literal.to_owned(),
    }
}
