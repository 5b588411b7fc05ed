//! Byte-for-byte what Kafka Connect writes for Debezium's outbox records: Connect schemas
//! and values typed like Debezium's PostgreSQL connector types columns, and the
//! converters (JsonConverter with or without schemas, StringConverter, ByteArrayConverter,
//! SimpleHeaderConverter) that turn them into bytes. Pure.

mod avro;
mod avro_canonical;
pub mod cloudevents;
mod converter;
mod data;
mod java_text;
pub(crate) mod json;
mod json_schema;
mod json_value;
pub(crate) mod payload_json;
mod payload_struct;
pub(crate) mod pg_text;
mod postgres_types;
mod protobuf;
mod registry;
mod source_record;

pub use avro::{avro_fullname, avro_schema, AvroClass, AvroConverter, AvroSchema, Framing};
pub use avro_canonical::parsing_canonical_form;
pub use converter::{Converter, Delegate, HeaderConverter};
pub use data::{java_class, Data, Header, Schema, SchemaType, Value};
pub use java_text::struct_to_java_string;
pub use json_schema::{json_schema, JsonSchemaConverter, JsonSchemaText, JSON_SCHEMA_CONVERTER};
pub use json_value::{write_schema, JsonConverter};
pub use payload_struct::{decode_object, expand, expands_to_no_schema, ExpandBehaviour};
pub use pg_text::Numeric;
pub(crate) use pg_text::{civil_from_days, days_from_civil};
pub use postgres_types::{
    debezium_writes_unproduced, default_value, has_default_mapper, oid, BinaryMode, ColumnFacts,
    ColumnKind, DecimalMode, HstoreMode, IntervalMode, PgType, TimePrecisionMode, TypeModes,
};
pub(crate) use postgres_types::{java_hash_map_order, java_hash_map_order_in};
pub use protobuf::{protobuf_schema, ProtobufConverter, ProtobufOptions, ProtobufSchema};
pub use registry::{
    Lookup, RegistryError, RegistrySerde, SchemaFormat, SchemaReference, SchemaRegistry,
    SchemaText, SerdeError, SubjectNameStrategy,
};
pub use source_record::{ConnectRecord, ConvertError, Converters, Failed, Stop};
