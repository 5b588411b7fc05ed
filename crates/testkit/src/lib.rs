//! Real components for outbox-relay's tests, benchmarks and demo: a throwaway PostgreSQL
//! cluster, Apache Kafka brokers (one, pooled, or a cluster of three), a Kafka read-back helper
//! and the relay process.
//!
//! Nothing here is a mock. When a component cannot be started the error says how to install it.

pub mod apicurio;
pub mod broker;
pub mod debezium;
pub mod http;
pub mod kafka;
pub mod large_outbox;
pub mod locale;
pub mod net;
pub mod postgres;
pub mod proxy;
pub mod relay;
pub mod slot;

pub use broker::{Broker, Cluster, Storage};
pub use kafka::{read_topic, ConsumedRecord};
pub use pgoutput::Lsn;
pub use postgres::PgCluster;
pub use relay::{status_kib, RelayProcess};
pub use slot::{confirmed_flush_lsn, current_wal_lsn, wait_confirmed, wait_delivered};
