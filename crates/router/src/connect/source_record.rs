//! Kafka Connect's `SourceRecord`, as the EventRouter hands it to the transforms after it and
//! they hand it to the converters: topic, partition, key and value each with its schema,
//! headers with theirs, timestamp. Nothing here is bytes yet; [`ConnectRecord::convert`]
//! writes them with the worker's converters.

use super::converter::{binary_data_delegates, Converter, Delegate, HeaderConverter};
use super::data::{Data, Header, Value};
use super::registry::SerdeError;
use crate::kafka_record::OutboxRecord;
use bytes::Bytes;
use std::sync::Arc;

impl Data {
    /// A record's key or value written by `converter` for `topic` (schema-registry
    /// converters register its schema under the topic's subject); `None` is a Kafka null.
    /// Apicurio's converter adds its headers to `headers`.
    pub fn encode_to(
        &self,
        converter: &Converter,
        topic: &str,
        headers: &mut Vec<(Arc<str>, Option<Bytes>)>,
    ) -> Result<Option<Bytes>, Failed> {
        match converter {
            Converter::Avro(avro) => avro
                .encode(topic, self.schema.as_ref(), &self.value, headers)
                .map_err(registry_failure),
            Converter::JsonSchema(json) => json
                .encode(topic, self.schema.as_ref(), &self.value)
                .map_err(registry_failure),
            Converter::Protobuf(proto) => proto
                .encode(topic, self.schema.as_ref(), &self.value)
                .map_err(registry_failure),
            // A schema-registry delegate writes for the topic too.
            Converter::BinaryData {
                delegate: Some(delegate @ Delegate::Registry(_)),
            } if binary_data_delegates(self.schema.as_ref(), &self.value) => {
                self.encode_to(&delegate.converter(), topic, headers)
            }
            other => self.encode(other).map_err(|m| Failed(m, None)),
        }
    }

    /// Written by `converter`; `None` is a Kafka null.
    pub fn encode(&self, converter: &Converter) -> Result<Option<Bytes>, String> {
        match (&self.schema, &self.value) {
            (Some(schema), value) => converter.encode(Some(schema), value),
            (None, Value::Null) => Ok(None),
            (None, Value::String(text)) => converter.encode_schemaless_string(text),
            (None, other) => converter.encode_schemaless(other),
        }
    }
}

/// A schema-registry converter's failure: the record's, or one that stops the session.
fn registry_failure(e: SerdeError) -> Failed {
    match e {
        SerdeError::Record(m) => Failed(m, None),
        SerdeError::Unavailable(m) => Failed(m, Some(Stop::Unavailable)),
        SerdeError::Unauthorized(m) => Failed(m, Some(Stop::Unauthorized)),
    }
}

impl Header {
    /// A header whose bytes are written once, here, for every record that carries it.
    pub fn encoded_once(
        name: impl Into<Arc<str>>,
        data: Data,
        converter: &HeaderConverter,
    ) -> Result<Self, String> {
        let encoded = Some(converter.encode_data(&data)?);
        Ok(Self {
            name: name.into(),
            data,
            encoded,
        })
    }

    fn bytes(&self, converter: &HeaderConverter) -> Result<Option<Bytes>, String> {
        match &self.encoded {
            Some(bytes) => Ok(bytes.clone()),
            None => converter.encode_data(&self.data),
        }
    }
}

/// A record between the EventRouter and the converters.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectRecord {
    pub topic: Arc<str>,
    /// An explicit partition; `None` = by key.
    pub partition: Option<i32>,
    pub key: Data,
    pub value: Data,
    /// In order.
    pub headers: Vec<Header>,
    /// Epoch milliseconds; `None` = when the relay read the event (stamped later).
    pub timestamp_ms: Option<i64>,
}

/// The converters of a worker: key, value, header.
#[derive(Debug, Clone, Copy)]
pub struct Converters<'a> {
    pub key: &'a Converter,
    pub value: &'a Converter,
    pub header: &'a HeaderConverter,
}

/// A converter that failed on a record: Kafka Connect's stage (`HEADER_CONVERTER`,
/// `KEY_CONVERTER`, `VALUE_CONVERTER`), the converter's class, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertError {
    pub stage: &'static str,
    pub class: &'static str,
    pub message: String,
    /// Set when the failure is not the record's: the relay stops (and retries, or exits)
    /// instead of dead-lettering it.
    pub stop: Option<Stop>,
}

/// A converter failure that is not the record's problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// A schema registry that cannot be reached, timed out or answered 5xx: passes.
    Unavailable,
    /// The schema registry refused the credentials.
    Unauthorized,
}

/// A key or value converter's failure: why, and whether it stops the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed(pub String, pub Option<Stop>);

impl ConnectRecord {
    /// The Kafka record the converters make of it: headers first, then key, then value, as
    /// a Connect worker converts them.
    pub fn convert(&self, converters: Converters<'_>) -> Result<OutboxRecord, ConvertError> {
        let failed = |stage, class| {
            move |Failed(message, stop)| ConvertError {
                stage,
                class,
                message,
                stop,
            }
        };
        let mut headers = self
            .headers
            .iter()
            .map(|h| Ok((h.name.clone(), h.bytes(converters.header)?)))
            .collect::<Result<Vec<_>, String>>()
            .map_err(|m| Failed(m, None))
            .map_err(failed("HEADER_CONVERTER", converters.header.class()))?;
        // Kafka Connect hands the converters the record's headers: Apicurio's adds its own.
        let key = self
            .key
            .encode_to(converters.key, &self.topic, &mut headers)
            .map_err(failed("KEY_CONVERTER", converters.key.class()))?;
        let value = match converters.value {
            // Debezium's CloudEventsConverter reads the record's headers.
            Converter::CloudEvents(ce) => ce
                .encode(self.value.schema.as_ref(), &self.value.value, &self.headers)
                .map_err(|m| Failed(m, None)),
            other => self.value.encode_to(other, &self.topic, &mut headers),
        }
        .map_err(failed("VALUE_CONVERTER", converters.value.class()))?;
        Ok(OutboxRecord {
            topic: self.topic.clone(),
            key,
            value,
            headers,
            partition: self.partition,
            timestamp_ms: self.timestamp_ms,
        })
    }

    /// The header named `name`, the last one if there are several (`Headers.lastWithName`).
    pub fn last_header(&self, name: &str) -> Option<&Header> {
        self.headers.iter().rev().find(|h| &*h.name == name)
    }
}
