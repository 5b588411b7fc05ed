//! The boundary between the schema-registry converters (pure) and the registry the relay
//! talks to: a schema's text, its format and its references in, an id out; and what the
//! converters (Avro, JSON Schema, Protobuf) share on their side of it: the subject, the id
//! asked for under it, the schemas translated lately.

use super::data::Schema;
use std::fmt;
use std::sync::{Arc, Mutex};

/// The registry's name for a schema's language (`schemaType`; Avro when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaFormat {
    Avro,
    Protobuf,
    Json,
}

impl SchemaFormat {
    /// The `schemaType` of Confluent's REST API, and Apicurio's artifact type.
    pub fn name(self) -> &'static str {
        match self {
            SchemaFormat::Avro => "AVRO",
            SchemaFormat::Protobuf => "PROTOBUF",
            SchemaFormat::Json => "JSON",
        }
    }
}

/// A schema another one imports, registered under its own subject (Confluent's
/// `references`: `{"name", "subject", "version"}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

/// A schema as it is sent to the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaText<'a> {
    pub format: SchemaFormat,
    pub text: &'a str,
    pub references: &'a [SchemaReference],
}

impl<'a> SchemaText<'a> {
    pub fn avro(text: &'a str) -> Self {
        Self {
            format: SchemaFormat::Avro,
            text,
            references: &[],
        }
    }
}

/// Why the registry did not give an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryError {
    /// Unreachable, timed out, 5xx: passes; the record is converted again later.
    Unavailable(String),
    /// 401/403: the credentials must change (the message names the option, never its value).
    Unauthorized(String),
    /// The registry refused this schema (409 incompatible, 422 invalid, or not found when
    /// schemas are not registered automatically): the record's problem.
    Rejected(String),
}

/// How an id is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lookup {
    /// `auto.register.schemas=true`: registered under the subject (an existing identical
    /// schema keeps its id).
    Register,
    /// `auto.register.schemas=false`: the schema must already be registered under the subject.
    Find,
    /// `use.latest.version=true`: the subject's latest version, whatever its schema.
    Latest,
}

/// A schema registry: the id of a schema under a subject. Implementations cache, so
/// that each schema is asked for once.
pub trait SchemaRegistry: Send + Sync + fmt::Debug {
    fn id(
        &self,
        subject: &str,
        schema: &SchemaText<'_>,
        lookup: Lookup,
    ) -> Result<u64, RegistryError>;
}

/// Why a schema-registry converter did not write a key or value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SerdeError {
    /// The record cannot be written (Kafka Connect's `DataException`, a refused schema).
    Record(String),
    /// The registry is unavailable: try again later.
    Unavailable(String),
    /// The registry refused the credentials: stop.
    Unauthorized(String),
}

/// Kafka Connect's subject name strategies (`key.subject.name.strategy`,
/// `value.subject.name.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectNameStrategy {
    /// `<topic>-key` / `<topic>-value` (the default).
    Topic,
    /// The record's full name.
    Record,
    /// `<topic>-<record full name>`.
    TopicRecord,
}

impl SubjectNameStrategy {
    /// The subject of a schema whose `ParsedSchema.name()` is `record_name` (an Avro
    /// record's full name, a JSON Schema's `title`, a Protobuf message's full name) for
    /// `topic`. The record strategies refuse a schema without one (Confluent 7.0.16's
    /// `RecordNameStrategy.getRecordName` throws a `SerializationException` with this text).
    pub fn subject(
        self,
        topic: &str,
        is_key: bool,
        record_name: Option<&str>,
    ) -> Result<String, String> {
        let part = if is_key { "key" } else { "value" };
        let record_name = || {
            record_name.ok_or_else(|| {
                let class = match self {
                    SubjectNameStrategy::TopicRecord => "TopicRecordNameStrategy",
                    _ => "RecordNameStrategy",
                };
                format!(
                    "In configuration {part}.subject.name.strategy = \
                     io.confluent.kafka.serializers.subject.{class}, the message {part} must only be a record schema"
                )
            })
        };
        Ok(match self {
            SubjectNameStrategy::Topic => format!("{topic}-{part}"),
            SubjectNameStrategy::Record => record_name()?.to_owned(),
            SubjectNameStrategy::TopicRecord => format!("{topic}-{}", record_name()?),
        })
    }
}

/// The Connect schemas a converter translated lately (AvroData's, JsonSchemaData's and
/// ProtobufData's schema caches), the oldest dropped past 64. Not part of what a converter
/// is: any two caches are equal, and none shows its entries.
pub(crate) struct SchemaCache<T>(Mutex<Vec<(Schema, Arc<T>)>>);

/// How many translated schemas a converter keeps.
const TRANSLATED_CACHE: usize = 64;

impl<T> fmt::Debug for SchemaCache<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SchemaCache")
    }
}

impl<T> PartialEq for SchemaCache<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for SchemaCache<T> {}

impl<T> SchemaCache<T> {
    pub(crate) fn new() -> Self {
        Self(Mutex::new(Vec::new()))
    }

    /// `schema` translated, by `translate` unless it was lately.
    pub(crate) fn get(&self, schema: &Schema, translate: impl FnOnce() -> T) -> Arc<T> {
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, t)) = cache.iter().find(|(s, _)| s == schema) {
            return t.clone();
        }
        let t = Arc::new(translate());
        if cache.len() == TRANSLATED_CACHE {
            cache.remove(0);
        }
        cache.push((schema.clone(), t.clone()));
        t
    }
}

/// What the schema-registry converters share: which side of the record they write, how
/// the subject is named, how an id is asked for, and the registry asked.
#[derive(Debug, Clone)]
pub struct RegistrySerde {
    pub is_key: bool,
    pub strategy: SubjectNameStrategy,
    pub lookup: Lookup,
    pub registry: Arc<dyn SchemaRegistry>,
}

impl PartialEq for RegistrySerde {
    fn eq(&self, other: &Self) -> bool {
        self.is_key == other.is_key
            && self.strategy == other.strategy
            && self.lookup == other.lookup
            && Arc::ptr_eq(&self.registry, &other.registry)
    }
}

impl Eq for RegistrySerde {}

impl RegistrySerde {
    pub fn new(
        is_key: bool,
        strategy: SubjectNameStrategy,
        lookup: Lookup,
        registry: Arc<dyn SchemaRegistry>,
    ) -> Self {
        Self {
            is_key,
            strategy,
            lookup,
            registry,
        }
    }

    /// The subject a schema whose `ParsedSchema.name()` is `record_name` is registered
    /// under for `topic`.
    pub fn subject(&self, topic: &str, record_name: Option<&str>) -> Result<String, String> {
        self.strategy.subject(topic, self.is_key, record_name)
    }

    /// The id of `schema` under its subject for `topic`. `failed` words what is the record's
    /// fault (the subject refused, the schema rejected) as the converter's `DataException`.
    pub(crate) fn id(
        &self,
        topic: &str,
        record_name: Option<&str>,
        schema: &SchemaText<'_>,
        failed: impl Fn(String) -> SerdeError,
    ) -> Result<u64, SerdeError> {
        let subject = self.subject(topic, record_name).map_err(&failed)?;
        self.registry
            .id(&subject, schema, self.lookup)
            .map_err(|e| match e {
                RegistryError::Unavailable(m) => SerdeError::Unavailable(m),
                RegistryError::Unauthorized(m) => SerdeError::Unauthorized(m),
                RegistryError::Rejected(m) => failed(m),
            })
    }
}

/// Confluent's framing of a key or value: magic byte 0 and the id in four big-endian bytes.
pub(crate) fn confluent_prefix(id: u64) -> Result<[u8; 5], String> {
    let id = u32::try_from(id).map_err(|_| format!("schema id {id} does not fit in four bytes"))?;
    let [a, b, c, d] = id.to_be_bytes();
    Ok([0, a, b, c, d])
}

/// The registry the converters' unit tests write through.
#[cfg(test)]
pub(crate) mod fixed {
    use super::*;

    /// What a [`FixedRegistry`] was asked.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct Asked {
        pub subject: String,
        pub format: SchemaFormat,
        pub text: String,
        pub references: usize,
    }

    /// A registry that answers the one id it was made with, recording what it was asked.
    #[derive(Debug)]
    pub(crate) struct FixedRegistry {
        id: u64,
        asked: Mutex<Vec<Asked>>,
    }

    impl FixedRegistry {
        /// A registry answering `id`, and a value converter's common part asking it
        /// (`TopicNameStrategy`, schemas registered).
        pub(crate) fn serde(id: u64) -> (RegistrySerde, Arc<Self>) {
            Self::serde_for(id, false, SubjectNameStrategy::Topic)
        }

        /// The same for keys or values, under `strategy`.
        pub(crate) fn serde_for(
            id: u64,
            is_key: bool,
            strategy: SubjectNameStrategy,
        ) -> (RegistrySerde, Arc<Self>) {
            let registry = Arc::new(Self {
                id,
                asked: Mutex::new(Vec::new()),
            });
            let serde = RegistrySerde::new(is_key, strategy, Lookup::Register, registry.clone());
            (serde, registry)
        }

        /// What it was asked last (taken off the record).
        pub(crate) fn last(&self) -> Option<Asked> {
            self.asked.lock().unwrap().pop()
        }

        /// Whether it has been asked nothing (since the last [`Self::last`]).
        pub(crate) fn asked_nothing(&self) -> bool {
            self.asked.lock().unwrap().is_empty()
        }
    }

    impl SchemaRegistry for FixedRegistry {
        fn id(
            &self,
            subject: &str,
            schema: &SchemaText<'_>,
            _: Lookup,
        ) -> Result<u64, RegistryError> {
            self.asked.lock().unwrap().push(Asked {
                subject: subject.to_owned(),
                format: schema.format,
                text: schema.text.to_owned(),
                references: schema.references.len(),
            });
            Ok(self.id)
        }
    }
}
