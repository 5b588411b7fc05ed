//! `value.converter=io.debezium.converters.CloudEventsConverter` and its options
//! (`CloudEventsConverterConfig`): the JSON form is written; Avro (`serializer.type` or
//! `data.serializer.type` `avro`) is refused at start, naming the option.

use super::super::options::{flag, Options};
use outbox_router::connect::cloudevents::{CloudEvents, Source};
use outbox_router::connect::{Converter, HeaderConverter, JsonConverter};

/// The converter configured under `key` (`value.converter`).
pub(in crate::debezium) fn converter(key: &str, o: &Options) -> Result<CloudEvents, String> {
    if key != "value.converter" {
        return Err(format!(
            "{key}: {} is supported as value.converter (Debezium documents it there)",
            outbox_router::connect::cloudevents::CLASS
        ));
    }
    for part in ["serializer.type", "data.serializer.type"] {
        let option = format!("{key}.{part}");
        match o.get(&option).map(str::trim) {
            None => {}
            Some(v) if v.eq_ignore_ascii_case("json") => {}
            Some(v) if v.eq_ignore_ascii_case("avro") => {
                return Err(format!(
                    "{option}=avro is not supported; outbox-relay writes CloudEvents as JSON (serializer.type=json, data.serializer.type=json)"
                ))
            }
            Some(v) => return Err(format!("{option}: {v:?} is not json or avro")),
        }
    }
    match o
        .get(&format!("{key}.schema.name.adjustment.mode"))
        .map(str::trim)
    {
        // Names only the CloudEvent's schema, which JSON without schemas does not write.
        None | Some("avro" | "none" | "avro_unicode") => {}
        Some(other) => {
            return Err(format!(
                "{key}.schema.name.adjustment.mode: {other:?} is not avro, avro_unicode or none"
            ))
        }
    }
    // Names the schema registered in a registry (Avro only): no effect in JSON.
    o.get(&format!("{key}.schema.cloudevents.name"));
    let trace = flag(
        o,
        &format!("{key}.opentelemetry.tracing.attributes.enable"),
        false,
    )?;
    let name_from_header = flag(
        o,
        &format!("{key}.schema.data.name.source.header.enable"),
        false,
    )?;
    let metadata_key = format!("{key}.metadata.source");
    let (global, id, kind, trace_parent, data_schema_name) = CloudEvents::metadata_source(
        o.get(&metadata_key).unwrap_or(
            "value,id:generate,type:generate,traceparent:header,dataSchemaName:generate",
        ),
        trace,
        name_from_header,
    )
    .map_err(|e| format!("{metadata_key}: {e}"))?;
    let json = |name: &str, default: bool| flag(o, &format!("{key}.json.{name}"), default);
    Ok(CloudEvents {
        global,
        id,
        kind,
        trace_parent: trace.then_some(trace_parent),
        data_schema_name,
        extension_attributes: flag(o, &format!("{key}.extension.attributes.enable"), true)?,
        data: outbox_router::connect::JsonConverter {
            schemas_enable: json("schemas.enable", true)?,
            replace_null_with_default: json("replace.null.with.default", true)?,
        },
        // Set by the translation, which knows the EventRouter's options.
        expanded_payload: None,
    })
}

/// Debezium's converter reads the metadata headers back with a JsonConverter with schemas:
/// any other header converter fails every record there, so it is refused here at start.
pub(in crate::debezium) fn check_header_converter(
    value: &Converter,
    header: &HeaderConverter,
) -> Result<(), String> {
    let Converter::CloudEvents(ce) = value else {
        return Ok(());
    };
    let json_with_schemas = matches!(
        header,
        HeaderConverter::Other(Converter::Json(JsonConverter {
            schemas_enable: true,
            ..
        }))
    );
    if ce.reads_headers() && !json_with_schemas {
        return Err(
            "header.converter: CloudEventsConverter with metadata from headers reads them as JSON with schemas; \
             set header.converter=org.apache.kafka.connect.json.JsonConverter and header.converter.schemas.enable=true \
             (as Debezium's CloudEvents documentation does)"
                .into(),
        );
    }
    if ce.global == Source::Value {
        tracing::warn!(
            "value.converter.metadata.source=value: CloudEventsConverter writes null for records that are not change \
             events, which the EventRouter's are not (Debezium does the same); Debezium documents metadata.source=header \
             with a HeaderFrom before the EventRouter for the outbox"
        );
    }
    Ok(())
}
