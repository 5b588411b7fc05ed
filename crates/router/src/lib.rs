//! Turns decoded outbox rows into Kafka records, the way Debezium's Outbox EventRouter
//! does: topic from a template over the routing column (`${routedByValue}.events`),
//! key = the aggregate id, value = the payload text, the event id in header `id`, other
//! columns as headers. Pure: no I/O, no clock, unit-tested on decoded pgoutput messages.
//!
//! A row that cannot be routed (NULL routing value, invalid topic name, missing column)
//! is not an error of the stream: it becomes [`RouteOutcome::Invalid`], which the relay
//! sends to the dead-letter topic so that nothing is dropped silently.

mod config;
pub mod connect;
mod error;
mod json_compact;
mod kafka_record;
mod router;
mod topic;
pub mod transforms;

pub use config::{
    AdditionalField, ConnectFormat, ContextHeaders, ErrorHandling, InvalidOperation, ListPattern,
    MessageConfig, Notifications, Output, Placement, RouterConfig, SchemaFilter, TableName,
    TransactionMetadata,
};
pub use error::ConfigError;
pub use kafka_record::{
    detached, ChangeEventAt, InvalidRow, OutboxRecord, PendingRecord, RouteOutcome,
};
pub use router::{
    change_event_topic, java_hash_set_order, BeforeRouter, Notification, Router, SourcePosition,
    TransactionMark,
};
pub use topic::{validate_topic_name, TopicTemplate, DEFAULT_TOPIC_REGEX};
