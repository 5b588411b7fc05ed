//! The end-to-end canary (`--canary-interval`): every few seconds the active instance writes
//! a transactional logical decoding message with its own prefix; its stream receives it like
//! any change, produces it to the canary topic and waits for Kafka's acknowledgement, which
//! sets `outbox_relay_canary_age_seconds`. A stall anywhere on the way (the walsender,
//! decoding, the relay, the broker) lets the age grow, and /ready turns red past
//! `--canary-max-age` while PostgreSQL still takes canaries (see `Metrics::readiness`).
//!
//! `pg_logical_emit_message` needs no table privilege (PUBLIC may execute it unless a DBA
//! revoked that). Every slot of the database receives every message: a canary names the slot
//! whose relay wrote it, and a relay produces only its own; other consumers of the database's
//! messages (Debezium's `message.prefix.include.list`) can leave the prefix out.

use crate::config::Canary;
use crate::metrics::{now_ms, Metrics};
use crate::source::postgres::Database;
use std::sync::Arc;

/// The messages' prefix.
pub const PREFIX: &str = "outbox-relay.canary";

/// What a canary says: the slot whose relay wrote it, and when (milliseconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Written {
    pub slot: String,
    pub written_ms: i64,
}

impl Written {
    pub fn parse(content: &[u8]) -> Option<Self> {
        serde_json::from_slice(content).ok()
    }
}

/// Writes a canary every `canary.interval` for `slot`, for as long as it runs (the session
/// that streams aborts it when it ends).
pub async fn write_every(database: Database, slot: String, canary: Canary, metrics: Arc<Metrics>) {
    metrics.canary_on(canary.max_age);
    let mut timer = tokio::time::interval(canary.interval);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut client = None;
    let mut failing = false;
    loop {
        timer.tick().await;
        if client.is_none() {
            client = database.connect().await.ok();
        }
        let Some(sql) = &client else {
            continue;
        };
        let content = serde_json::to_string(&Written {
            slot: slot.clone(),
            written_ms: now_ms(),
        })
        .expect("a canary serialises");
        match sql
            .execute(
                "SELECT pg_logical_emit_message(true, $1, $2::text)",
                &[&PREFIX, &content],
            )
            .await
        {
            Ok(_) => {
                metrics.canary_written();
                if failing {
                    tracing::info!("canaries are written again");
                }
                failing = false;
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(
                        "cannot write the canary ({}): grant EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) \
                         to the relay's role, or turn the canary off with --canary-interval 0",
                        crate::error::server_message(&e)
                    );
                }
                failing = true;
                client = None;
            }
        }
    }
}
