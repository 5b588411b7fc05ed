//! The outbox-relay runtime. Data flows one way, one module per step:
//!
//! ```text
//! source/ ─── decoded rows ──▶ route ──▶ deliver/ ──▶ Kafka
//!  (replication, snapshot,      (router     (producer, dead letters,
//!   polling)                     outcome)    acknowledgement tracker)
//!    ▲                                          │
//!    └────────────── confirm ◀── tickets ───────┘
//! ```
//!
//! - [`source`]: what produces rows and owns its setup (slot, publication, polling SQL).
//! - [`route`]: what the relay does with each outcome of the pure `outbox_router`.
//! - [`deliver`]: the one delivery stage of every source; `deliver::tracker` holds the rule
//!   of when a position may be confirmed.
//! - [`confirm`]: what goes back to the source once delivered.
//! - [`supervisor`]: the one retry loop; [`error`]: errors by what the caller must do.
//! - [`config`]: settings by concern; [`debezium`] translates a Debezium connector into them.
//! - [`metrics`]: what every step counts; [`ops`]: `check`, `status`, `setup-sql` and the
//!   HTTP endpoints; [`cli`]: the command line.

pub mod cli;
pub mod config;
pub mod confirm;
pub mod connect;
pub mod debezium;
pub mod deliver;
pub mod error;
pub mod keystore;
pub mod metrics;
pub mod ops;
pub mod panics;
pub mod pg_time;
pub mod registry_client;
pub mod route;
pub mod secret;
pub mod source;
pub mod supervisor;
pub mod tls;

pub use cli::main;
pub use pgoutput::Lsn;

/// The outbox table of the seeds' schema (sql/outbox.sql), for `setup-sql`.
pub const OUTBOX_DDL: &str = include_str!("../../../sql/outbox.sql");
