//! The schema-registry and CloudEvents converters of a Debezium configuration, read from their
//! options as Kafka Connect hands them over (the encodings themselves are the router's,
//! `outbox_router::connect`).

pub(super) mod avro;
pub(super) mod cloudevents;
pub(super) mod json_schema;
pub(super) mod protobuf;
