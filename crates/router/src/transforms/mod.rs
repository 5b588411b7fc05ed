//! Kafka Connect's transforms before and after the EventRouter, applied to each record in the order a
//! worker's `transforms=a,b,c` applies them, each with its predicate (`predicate`, `negate`),
//! over the Connect record model ([`ConnectRecord`]: schemas and values, before the
//! converters write bytes). Pure: records in, records out (or none: filtered).
//!
//! Each transform is one file here and one line of [`REGISTRY`]: its class, its options'
//! parser and what it does, with the semantics of Kafka's own classes
//! (`org.apache.kafka.connect.transforms.*`).
//!
//! Predicates (`org.apache.kafka.connect.transforms.predicates.*`): `TopicNameMatches`
//! (`pattern`, whole topic), `HasHeaderKey` (`name`), `RecordIsTombstone` (a null value).

mod cast;
mod date_format;
mod drop_headers;
mod extract_field;
mod fields;
mod filter;
mod flatten;
mod header_from;
mod header_to_value;
mod hoist_field;
mod insert_field;
mod insert_header;
mod mask_field;
mod regex_router;
mod replace_field;
mod set_schema_metadata;
mod timestamp_converter;
mod timestamp_router;
mod value_to_key;

pub use date_format::DateFormat;
pub use insert_header::simple_header_literal;

use crate::connect::ConnectRecord;
use std::sync::Arc;

/// One transform, configured.
pub trait Transformation: std::fmt::Debug + Send + Sync {
    /// The record this transform makes of `record`; `Ok(None)` drops it, `Err` says why the
    /// record cannot be transformed (Connect's `DataException`). `now_ms`: the time of a
    /// record without a timestamp of its own.
    fn apply(&self, record: ConnectRecord, now_ms: i64) -> Result<Option<ConnectRecord>, String>;
}

/// Which part of the record a transform with `$Key` and `$Value` variants works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Key,
    Value,
}

/// A transform's options: `transforms.<alias>.<name>`, read through the connector's options
/// (which remember what was read).
pub struct Options<'a> {
    pub alias: &'a str,
    pub get: &'a dyn Fn(&str) -> Option<String>,
}

impl Options<'_> {
    /// The full option name, for messages.
    pub fn key(&self, name: &str) -> String {
        format!("transforms.{}.{name}", self.alias)
    }

    pub fn get(&self, name: &str) -> Option<String> {
        (self.get)(&self.key(name))
    }

    pub fn required(&self, name: &str) -> Result<String, String> {
        self.get(name)
            .ok_or_else(|| format!("{} is missing", self.key(name)))
    }

    /// A comma-separated list (Connect's `ConfigDef.Type.LIST`): see [`connect_list`].
    pub fn list(&self, name: &str) -> Vec<String> {
        self.get(name).map(|l| connect_list(&l)).unwrap_or_default()
    }

    pub fn flag(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(format!(
                    "{}: {v:?} is not a boolean (true or false)",
                    self.key(name)
                )),
            },
        }
    }

    /// One of `choices` (case-insensitive, as Connect's `ValidString` is not; the value as
    /// written is returned lower-cased).
    pub fn choice(&self, name: &str, default: &str, choices: &[&str]) -> Result<String, String> {
        let value = self.get(name).unwrap_or_else(|| default.to_owned());
        let trimmed = value.trim();
        choices
            .iter()
            .find(|c| c.eq_ignore_ascii_case(trimmed))
            .map(|c| (*c).to_owned())
            .ok_or_else(|| {
                format!(
                    "{}: {value:?} is not one of {}",
                    self.key(name),
                    choices.join(", ")
                )
            })
    }
}

/// The configured transform of one class.
pub type Parser = fn(&Options<'_>, Option<Side>) -> Result<Arc<dyn Transformation>, String>;

/// A transform class outbox-relay applies.
pub struct Entry {
    /// The class, without `$Key` / `$Value`.
    pub class: &'static str,
    /// Whether the class comes as `$Key` and `$Value` variants (and only so).
    pub sides: bool,
    pub parse: Parser,
    /// One line for `check` and the README.
    pub doc: &'static str,
}

/// Every transform class outbox-relay applies.
pub const REGISTRY: &[Entry] = &[
    regex_router::ENTRY,
    timestamp_router::ENTRY,
    insert_header::ENTRY,
    drop_headers::ENTRY,
    header_from::ENTRY,
    insert_field::ENTRY,
    replace_field::ENTRY,
    mask_field::ENTRY,
    value_to_key::ENTRY,
    extract_field::ENTRY,
    hoist_field::ENTRY,
    set_schema_metadata::ENTRY,
    cast::ENTRY,
    timestamp_converter::ENTRY,
    flatten::ENTRY,
    filter::ENTRY,
    header_to_value::ENTRY,
];

/// The registry entry of `class` (with its `$Key`/`$Value` variant), if outbox-relay applies
/// it.
pub fn lookup(class: &str) -> Option<(&'static Entry, Option<Side>)> {
    let (base, side) = match class.rsplit_once('$') {
        Some((base, "Key")) => (base, Some(Side::Key)),
        Some((base, "Value")) => (base, Some(Side::Value)),
        Some(_) => return None,
        None => (class, None),
    };
    REGISTRY
        .iter()
        .find(|e| e.class == base && e.sides == side.is_some())
        .map(|e| (e, side))
}

/// Every class name `transforms.*.type` takes, for messages.
pub fn supported_classes() -> Vec<String> {
    REGISTRY
        .iter()
        .flat_map(|e| {
            if e.sides {
                vec![format!("{}$Key", e.class), format!("{}$Value", e.class)]
            } else {
                vec![e.class.to_owned()]
            }
        })
        .collect()
}

/// A comma-separated list as Kafka Connect reads one (`ConfigDef.Type.LIST`): items trimmed,
/// empty ones dropped.
pub fn connect_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A condition on a record.
#[derive(Debug, Clone)]
pub enum Predicate {
    TopicNameMatches(regex::Regex),
    HasHeaderKey(String),
    RecordIsTombstone,
}

impl Predicate {
    /// `TopicNameMatches` with Java's `Pattern.matches` semantics (the whole topic).
    pub fn topic_name_matches(pattern: &str) -> Result<Self, String> {
        crate::topic::java_whole_match(pattern).map(Predicate::TopicNameMatches)
    }

    pub fn test(&self, record: &ConnectRecord) -> bool {
        match self {
            Predicate::TopicNameMatches(regex) => regex.is_match(&record.topic),
            Predicate::HasHeaderKey(name) => record.headers.iter().any(|h| &*h.name == name),
            Predicate::RecordIsTombstone => record.value.value.is_null(),
        }
    }
}

/// A transform, under its alias, with its predicate (and `negate`).
#[derive(Debug, Clone)]
pub struct Step {
    pub alias: String,
    /// The class as configured, for messages.
    pub class: String,
    pub transform: Arc<dyn Transformation>,
    pub predicate: Option<(Predicate, bool)>,
}

impl Step {
    fn applies_to(&self, record: &ConnectRecord) -> bool {
        match &self.predicate {
            None => true,
            Some((predicate, negate)) => predicate.test(record) != *negate,
        }
    }
}

/// A step that could not transform a record: which, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    pub alias: String,
    pub class: String,
    pub reason: String,
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "transform {:?} ({}) failed: {}",
            self.alias, self.class, self.reason
        )
    }
}

/// Transforms in order: those before the EventRouter, or those after it.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    pub steps: Vec<Step>,
}

impl Chain {
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The record each step makes of it, in order; `None` when a step filtered it out.
    /// `now_ms`: the time of a record without a timestamp of its own (the producer stamps
    /// it when it is sent, a moment later).
    pub fn apply(
        &self,
        mut record: ConnectRecord,
        now_ms: i64,
    ) -> Result<Option<ConnectRecord>, StepError> {
        for step in &self.steps {
            if !step.applies_to(&record) {
                continue;
            }
            match step.transform.apply(record, now_ms) {
                Ok(Some(next)) => record = next,
                Ok(None) => return Ok(None),
                Err(reason) => {
                    return Err(StepError {
                        alias: step.alias.clone(),
                        class: step.class.clone(),
                        reason,
                    })
                }
            }
        }
        Ok(Some(record))
    }
}

#[cfg(test)]
pub(crate) mod tests;
