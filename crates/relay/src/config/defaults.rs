//! Every default of `run`, named once: `--help` shows these and resolution applies them.

pub const MODE: &str = "cdc";
pub const SLOT: &str = "outbox_relay";
pub const PUBLICATION: &str = "outbox_relay";
pub const TABLE: &str = "public.outbox";
pub const ID_COLUMN: &str = "id";
pub const KEY_COLUMN: &str = "aggregate_id";
pub const PAYLOAD_COLUMN: &str = "payload";
pub const ROUTE_BY_COLUMN: &str = "aggregate_type";
pub const TOPIC_TEMPLATE: &str = "${routedByValue}.events";
pub const ADDITIONAL_PLACEMENT: &str = "event_type:header:eventType";
pub const DEAD_LETTER_TOPIC: &str = "outbox-relay.dlq";
pub const TOPIC_PARTITIONS: i32 = 1;
/// -1: the broker's default.
pub const TOPIC_REPLICATION_FACTOR: i32 = -1;
/// Events produced and not yet acknowledged: 4,096. Half Debezium's `max.queue.size`
/// (8,192): what librdkafka keeps per record beyond its key and value (the record, its
/// headers, its copy in a produce request) is held as long as the record, and this bound is
/// what keeps a catch-up's peak memory within twice the idle relay's. 4,096 records are
/// 25 ms of a catch-up at 160,000 events/s: more than a broker's acknowledgement takes.
pub const MAX_IN_FLIGHT: usize = 4_096;
/// Bytes of records produced and not yet acknowledged (librdkafka's queue): 4 MiB, raised
/// to hold one record of `message.max.bytes`.
pub const MAX_IN_FLIGHT_BYTES: usize = 4 << 20;
/// Seconds a partition may leave a record unacknowledged before it is reported stuck.
pub const STUCK_PARTITION_AFTER_S: u64 = 180;
/// The end-to-end canary: how often one is written, the age of the newest acknowledged one
/// past which /ready turns red, and its topic.
pub const CANARY_INTERVAL_S: u64 = 10;
pub const CANARY_MAX_AGE_S: u64 = 60;
pub const CANARY_TOPIC: &str = "outbox-relay.canary";
pub const STATUS_INTERVAL_MS: u64 = 1000;
pub const METRICS_ADDRESS: &str = "127.0.0.1:9187";
/// Topics with a label of their own in `outbox_relay_events_total`; events of later topics
/// are counted under `topic="_other"`.
pub const METRICS_TOPIC_LIMIT: usize = 500;
pub const POLL_INTERVAL_MS: u64 = 500;
pub const POLL_BATCH_SIZE: i64 = 1000;

/// `text [default: value]`, the help line of an option whose default is one of the above.
/// `--cleanup`: rows deleted at most per round, and how often a round runs.
pub const CLEANUP_BATCH: u32 = 5_000;
pub const CLEANUP_INTERVAL_S: u64 = 1;

/// Snapshot rows fetched at most per round trip (Debezium's `snapshot.fetch.size` default).
pub const SNAPSHOT_FETCH_SIZE: usize = 10_240;
pub const SIGNAL_POLL_INTERVAL_MS: u64 = 5_000;
pub const INCREMENTAL_SNAPSHOT_CHUNK_SIZE: usize = 1_024;

pub fn help(text: &str, default: impl std::fmt::Display) -> String {
    format!("{text} [default: {default}]")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_router_defaults_are_these() {
        let router = outbox_router::RouterConfig::default();
        assert_eq!(router.tables[0].to_string(), super::TABLE);
        assert_eq!(router.id_column, super::ID_COLUMN);
        assert_eq!(router.key_column, super::KEY_COLUMN);
        assert_eq!(router.payload_column, super::PAYLOAD_COLUMN);
        assert_eq!(router.route_by_column, super::ROUTE_BY_COLUMN);
        assert_eq!(router.topic_template.render("X"), "X.events");
    }
}
