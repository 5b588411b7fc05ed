//! What is wrong with a router setting (table name, placement list, topic template or regex).

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error("invalid table name {0:?}: expected schema.table, e.g. public.outbox")]
    InvalidTable(String),
    #[error("invalid additional field placement {0:?}: expected column:header|envelope|partition[:alias], e.g. event_type:header:eventType")]
    InvalidPlacement(String),
    #[error("invalid topic template {0:?}: it must produce a topic name, e.g. ${{routedByValue}}.events")]
    InvalidTemplate(String),
    #[error("invalid topic regex {0:?}: {1}")]
    InvalidRegex(String, String),
}
