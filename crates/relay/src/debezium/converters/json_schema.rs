//! Confluent's schema-registry JSON Schema converter of a Debezium configuration,
//! `io.confluent.connect.json.JsonSchemaConverter`, with its options as Kafka Connect hands
//! them over (`value.converter.schema.registry.url`, ...): the registry options Confluent's
//! serializers share (read as the AvroConverter's are), `JsonSchemaDataConfig`'s and the JSON
//! Schema serializer's. What would change the records and is not written exactly is
//! refused, naming the option.

use super::super::options::{flag, Options};
use super::avro::confluent_registry;
use outbox_router::connect::{JsonSchemaConverter, JSON_SCHEMA_CONVERTER};

/// Options that change nothing outbox-relay writes: the deserializer's, those for schemas
/// derived from Java objects, caches, and later 7.x options that only read schemas back
/// (`flatten.singleton.unions`, `ignore.modern.dialects`) or only touch Connect enums and
/// unions, which Debezium's schemas do not have (`generalized.sum.type.support`).
const NO_EFFECT: &[&str] = &[
    "use.optional.for.nonrequired",
    "schemas.cache.size",
    "json.fail.unknown.properties",
    "json.write.dates.iso8601",
    "json.schema.spec.version",
    "json.oneof.for.nullables",
    "json.key.type",
    "json.value.type",
    "type.property",
    "generalized.sum.type.support",
    "flatten.singleton.unions",
    "ignore.modern.dialects",
    "max.schemas.per.subject",
    "latest.compatibility.strict",
    "id.compatibility.strict",
];

/// Boolean options refused when true: what they change is not written by outbox-relay.
const REFUSED_WHEN_TRUE: &[(&str, &str)] = &[
    (
        "json.fail.invalid.schema",
        "it validates each value against its schema, which 7.0's Decimal values (base64 text under \"type\":\"number\") fail",
    ),
    ("json.indent.output", "values are written compactly"),
    (
        "ignore.default.for.nullables",
        "a null is written as its schema's default, as 7.0 does",
    ),
    ("normalize.schemas", "schemas are registered as they are"),
];

/// Confluent's JsonSchemaConverter under `key` (`value.converter`, `key.converter`).
pub(in crate::debezium) fn confluent(
    key: &str,
    o: &Options,
) -> Result<JsonSchemaConverter, String> {
    let serde = confluent_registry(key, o, JSON_SCHEMA_CONVERTER)?;
    let additional_properties = flag(o, &format!("{key}.object.additional.properties"), true)?;
    for (option, why) in REFUSED_WHEN_TRUE {
        let name = format!("{key}.{option}");
        if flag(o, &name, false)? {
            return Err(format!(
                "{name}=true is not supported by outbox-relay's {JSON_SCHEMA_CONVERTER}: {why}"
            ));
        }
    }
    let inclusion = format!("{key}.json.default.property.inclusion");
    if let Some(v) = o.get(&inclusion).filter(|v| !v.is_empty()) {
        return Err(format!(
            "{inclusion}={v} is not supported by outbox-relay's {JSON_SCHEMA_CONVERTER}; leave it unset"
        ));
    }
    let use_schema_id = format!("{key}.use.schema.id");
    if let Some(v) = o.get(&use_schema_id).filter(|v| v.trim() != "-1") {
        return Err(format!(
            "{use_schema_id}={v} is not supported by outbox-relay; schemas are registered or looked up by subject"
        ));
    }
    let no_effect: Vec<String> = NO_EFFECT.iter().map(|o| format!("{key}.{o}")).collect();
    o.accept(&no_effect.iter().map(String::as_str).collect::<Vec<_>>());
    let mut c = JsonSchemaConverter::new(serde);
    c.additional_properties = additional_properties;
    Ok(c)
}

/// What the relay's notes say about the converter (never its credentials).
pub(in crate::debezium) fn describe(c: &JsonSchemaConverter) -> String {
    format!(
        "{}{}",
        super::avro::describe_lookup(&c.serde),
        if c.additional_properties {
            ""
        } else {
            ", object.additional.properties=false"
        }
    )
}
