//! Sources: what produces outbox rows and owns its setup. Every source routes its rows with
//! the same router (`route.rs`), hands them to the same delivery stage (`deliver/`) with a
//! ticket from the acknowledgement tracker, and confirms back only what the tracker allows.
//!
//! - `replication/`: the pgoutput stream from a logical replication slot (CDC mode).
//! - `snapshot.rs`: `snapshot.mode=initial`, the rows already in the outbox, once.
//! - `polling.rs`: `--mode polling`, SELECT ... FOR UPDATE SKIP LOCKED in transactions.
//! - `catalog/`: the outbox tables, the publication, the slot, the columns and keys, checked
//!   and created;
//!   `slot_history.rs`: which slots were streamed from, so a vanished one is noticed;
//!   `preflight.rs`: the same rules as typed findings, for `check` and Connect's validate.
//! - `signal.rs`: Debezium's signals from the signal table, Kafka or a file;
//!   `incremental.rs`: the incremental snapshots they start.
//! - `canary.rs`: the end-to-end canary the active instance writes into its own stream.
//! - `cleanup.rs`: `--cleanup`, relayed rows deleted once their position is confirmed.
//! - `own_tables.rs`: the names of the relay's own tables, which are never outbox tables.
//! - `dead_letter_table.rs`: polling mode's copy of each row whose event Kafka could not take
//!   whole, made in the transaction that retires the row.
//! - `survival.rs`: whether the slot survives a failover (PostgreSQL 17+).
//! - `session.rs`: what the supervisor runs, session after session.
//! - `postgres.rs`: connections (URL, TLS); `sql_rows.rs`: rows read with SQL shaped as
//!   pgoutput messages.

pub mod canary;
pub mod catalog;
pub mod cleanup;
pub mod dead_letter_table;
pub mod incremental;
pub mod own_tables;
pub mod polling;
pub mod postgres;
pub mod preflight;
pub mod replication;
pub mod session;
pub mod signal;
pub mod slot_history;
pub mod snapshot;
pub mod sql_rows;
pub mod survival;
