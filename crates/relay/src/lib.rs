//! The outbox-relay runtime. Data flows one way, one module per step:
//!
//! `pgwire-replication` stream -> [`pgoutput`] decoder -> [`outbox_router`] ->
//! [`sink`] (Kafka) -> [`ack`] tracker -> confirmed LSN back to the stream.
//!
//! [`pipeline`] wires them together; [`cli`] is the command line.

pub mod ack;
pub mod backoff;
pub mod cli;
pub mod config;
pub mod dead_letter;
pub mod debezium;
pub mod error;
pub mod http;
pub mod metrics;
pub mod pipeline;
pub mod polling;
pub mod postgres;
pub mod secret;
pub mod sink;
pub mod snapshot;
pub mod table_rows;
pub mod tls;

pub use cli::main;
pub mod ops;

/// The outbox table of the seeds' schema (sql/outbox.sql), for `setup-sql`.
pub const OUTBOX_DDL: &str = include_str!("../../../sql/outbox.sql");
