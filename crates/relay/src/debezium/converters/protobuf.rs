//! Confluent's schema-registry Protobuf converter of a Debezium configuration,
//! `io.confluent.connect.protobuf.ProtobufConverter` (7.0.x), with its options as Kafka
//! Connect hands them over (`value.converter.schema.registry.url`, ...).

use super::super::options::{flag, Options};
use super::avro::{confluent_registry, describe_lookup};
use outbox_router::connect::{ProtobufConverter, ProtobufOptions};

const CLASS: &str = "io.confluent.connect.protobuf.ProtobufConverter";

/// Confluent's ProtobufConverter under `key` (`value.converter`, `key.converter`).
pub(in crate::debezium) fn confluent(key: &str, o: &Options) -> Result<ProtobufConverter, String> {
    let serde = confluent_registry(key, o, CLASS)?;
    let options = ProtobufOptions {
        optional_for_nullables: flag(o, &format!("{key}.optional.for.nullables"), false)?,
        wrapper_for_nullables: flag(o, &format!("{key}.wrapper.for.nullables"), false)?,
        scrub_invalid_names: flag(o, &format!("{key}.scrub.invalid.names"), false)?,
    };
    // What only reading Protobuf back changes, or what Debezium's schemas have not (enums,
    // unions): no effect on what is written.
    for option in [
        "enhanced.protobuf.schema.support",
        "optional.for.proto2",
        "wrapper.for.raw.primitives",
        "generate.index.for.unions",
        "int.for.enums",
        "reference.lookup.only",
    ] {
        flag(o, &format!("{key}.{option}"), false)?;
    }
    // The schema cache's size, and the subject of references (there are none: the types
    // imported are all known types, which the serializer skips).
    o.accept(&[
        &format!("{key}.schemas.cache.config"),
        &format!("{key}.reference.subject.name.strategy"),
    ]);
    // Options whose other values change what is written or asked of the registry.
    for (option, default) in [
        ("skip.known.types", true),
        ("normalize.schemas", false),
        ("generate.struct.for.nulls", false),
        ("flatten.unions", false),
    ] {
        let name = format!("{key}.{option}");
        if flag(o, &name, default)? != default {
            return Err(format!(
                "{name}={} is not supported by outbox-relay's {CLASS} (it writes what 7.0.x writes with {option}={default})",
                !default
            ));
        }
    }
    let id_key = format!("{key}.use.schema.id");
    if let Some(v) = o.get(&id_key) {
        if v != "-1" {
            return Err(format!(
                "{id_key}={v} is not supported; outbox-relay asks the registry for the schema's id"
            ));
        }
    }
    Ok(ProtobufConverter::new(serde, options))
}

/// What the relay's notes say about the converter (never its credentials).
pub(in crate::debezium) fn describe(c: &ProtobufConverter) -> String {
    let o = c.options;
    format!(
        "{}{}{}{}",
        describe_lookup(&c.serde),
        if o.optional_for_nullables {
            ", optional.for.nullables"
        } else {
            ""
        },
        if o.wrapper_for_nullables {
            ", wrapper.for.nullables"
        } else {
            ""
        },
        if o.scrub_invalid_names {
            ", scrub.invalid.names"
        } else {
            ""
        },
    )
}
