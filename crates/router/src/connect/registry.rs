//! The boundary between the schema-registry converters (pure) and the registry the relay
//! talks to: a schema's text, its format and its references in, an id out.

use std::fmt;

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
