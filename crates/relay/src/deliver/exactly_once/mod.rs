//! `run --exactly-once`: replayed events already in Kafka are not produced again. Three
//! parts, each with one concern:
//! - `rule.rs`: the pure rule (which replayed events a partition's last record proves
//!   delivered), with its proof and its tests on bytes;
//! - `guard.rs`: what the delivery stage asks before sending (placement, the takeover fence,
//!   the tail check): one [`Guard`] per session;
//! - `tail.rs`: reading a partition's last record (the guard owns its reader; the producer
//!   knows nothing of tails).
//!
//! The session makes a [`Guard`] with [`Guard::for_session`] and its producer settings
//! with [`producer_settings`]; delivery calls the guard. Neither carries the rule.

pub mod guard;
pub mod rule;
pub mod tail;

pub use guard::{producer_settings, Guard};
pub use rule::{partition_for, EventPosition, Fence, Source, TailRead, Written, POSITION_HEADER};
pub use tail::{ReadTail, TailReader};
