//! `--debezium-config` / `--worker-config`: run from the connector JSON (or .properties)
//! a Debezium user POSTs to Kafka Connect today, and their worker's properties.

mod connector;
mod options;
mod producer;
mod properties;

pub use connector::{translate, DebeziumSetup, Heartbeat, SnapshotMode};
pub use properties::{parse, read_file, RawConfig};

#[cfg(test)]
mod tests;
