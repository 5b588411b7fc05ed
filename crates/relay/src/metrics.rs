//! Prometheus metrics and the relay's health, shared by the sources, the delivery stage and
//! the HTTP endpoint.

pub mod debezium;

use pgoutput::Lsn;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// `outbox_relay_build_info{version, librdkafka, git_sha} 1`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
    pub librdkafka: String,
    pub git_sha: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TopicLabels {
    pub topic: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

/// The end-to-end canary's state, in milliseconds since the epoch (0: not yet).
#[derive(Debug, Default)]
struct CanaryState {
    /// `--canary-max-age`; `None` until this process first writes canaries (off, or only
    /// ever a standby).
    max_age_ms: Option<i64>,
    /// When this process started writing canaries: the age counts from it until the first
    /// one is acknowledged.
    since: i64,
    /// When the newest canary Kafka acknowledged was written.
    newest_acknowledged: i64,
    /// When PostgreSQL last took a canary (it is reachable).
    last_written: i64,
    /// `--canary-read-back`: when reading back started, and when the newest canary read
    /// back from the canary topic was written; `None` when off.
    read_since: Option<i64>,
    newest_read: i64,
}

/// Which topics have a label of their own in `outbox_relay_events_total`.
struct TopicLabelling {
    /// Every topic counted so far, and whether it has its own label.
    own: std::collections::HashMap<String, bool>,
    /// How many have one.
    labelled: usize,
    /// `--metrics-topic-limit`.
    limit: usize,
    /// Values a config provider expanded: never in a label.
    hidden: crate::secret::Redaction,
}

/// The `topic` label of the events of topics past `--metrics-topic-limit`.
pub const OTHER_TOPICS: &str = "_other";

/// The `reason` label values of `outbox_relay_dead_letters_total` (`deliver::dead_letter::Cause`).
pub const DEAD_LETTER_REASONS: [&str; 2] = ["unroutable", "refused"];

pub struct Metrics {
    registry: Registry,
    /// Events acknowledged by Kafka, per destination topic (the first
    /// `--metrics-topic-limit` topics; the others under [`OTHER_TOPICS`]): use
    /// [`Metrics::topic_events`].
    events: Family<TopicLabels, Counter>,
    /// Every topic counted, and whether it has a label of its own in `events`.
    labelled_topics: std::sync::Mutex<TopicLabelling>,
    /// Distinct topics events were written to (every one, labelled or not).
    pub topics: Gauge,
    /// Dead letters acknowledged, per reason (`unroutable`, `refused`).
    dead_letters: Family<ReasonLabels, Counter>,
    pub confirmed_lsn: Gauge,
    /// Latest WAL position the server reported (keepalive or data).
    pub server_wal_lsn: Gauge,
    /// server_wal_lsn − confirmed_lsn: WAL the slot holds back because of us.
    pub replication_lag_bytes: Gauge,
    pub in_flight: Gauge,
    /// From a transaction's commit in PostgreSQL to its LSN being confirmable (all acked).
    pub commit_to_ack_seconds: Histogram,
    pub reconnects: Counter,
    /// 1 while a session streams (CDC) or polls (polling mode).
    pub streaming: Gauge,
    /// 1 on the instance that holds the slot (or polls), 0 on a standby.
    pub active: Gauge,
    /// Seconds behind PostgreSQL, set when scraped (see [`Metrics::encode`]).
    replication_lag_seconds: Gauge<f64, AtomicU64>,
    /// PostgreSQL commit time (micros since 2000) of the oldest transaction received and
    /// not yet confirmed; 0 when none.
    oldest_unconfirmed_commit: AtomicI64,
    /// Commit time of the newest confirmed transaction; 0 before the first.
    newest_confirmed_commit: AtomicI64,
    broker_reachable: AtomicBool,
    /// A standby that reached PostgreSQL and found the slot held by another instance.
    standing_by: AtomicBool,
    /// `snapshot.mode=initial`: rows of the snapshot being relayed, and how many were handed
    /// to Kafka so far.
    pub snapshot_rows_total: Gauge,
    pub snapshot_rows_done: Gauge,
    /// Partitions whose oldest record in flight has waited for Kafka longer than
    /// `--stuck-partition-after`, and how long the longest has waited.
    pub stuck_partitions: Gauge,
    pub stuck_seconds: Gauge,
    /// Which partitions, for /ready (empty when none).
    stuck: std::sync::Mutex<String>,
    /// `--exactly-once`: replayed events found already in Kafka and not produced again.
    pub exactly_once_skipped: Counter,
    /// The end-to-end canary (`--canary-interval`): its age, set when scraped.
    canary_age_seconds: Gauge<f64, AtomicU64>,
    /// Canaries Kafka acknowledged.
    pub canaries: Counter,
    /// `--canary-read-back`: the age of the newest canary read back, set when scraped.
    canary_read_age_seconds: Gauge<f64, AtomicU64>,
    /// 1 when the slot is a failover slot (`--slot-failover`, PostgreSQL 17+).
    pub slot_failover: Gauge,
    /// 1 when the slot survives a failover (see `source/survival.rs`).
    pub slot_failover_ready: Gauge,
    canary: std::sync::Mutex<CanaryState>,
    /// `--exactly-once`: partition tails written by another producer (they prove nothing).
    pub exactly_once_foreign_tails: Counter,
    /// `--cleanup`: outbox rows the relay deleted.
    pub cleanup_deleted_rows: Counter,
    /// `--cleanup`: rows and bytes in the outbox tables, and the age of the oldest row
    /// relayed and not deleted yet (read every few seconds).
    pub outbox_rows: Gauge,
    pub outbox_bytes: Gauge,
    pub outbox_oldest_row_age_seconds: Gauge<f64, AtomicU64>,
    /// Debezium's names for these figures, where a connector configuration runs (see
    /// `metrics/debezium.rs`).
    pub debezium: debezium::DebeziumSeries,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        Self::for_slot(None)
    }

    /// The metrics of a relay streaming from `slot`: every series but the build's carries a
    /// `slot` label (polling mode has no slot: no label).
    pub fn for_slot(slot: Option<&str>) -> Self {
        let mut root = Registry::with_prefix("outbox_relay");
        let m = Self {
            events: Family::default(),
            labelled_topics: std::sync::Mutex::new(TopicLabelling {
                own: Default::default(),
                labelled: 0,
                limit: crate::config::defaults::METRICS_TOPIC_LIMIT,
                hidden: Default::default(),
            }),
            topics: Gauge::default(),
            dead_letters: Family::default(),
            confirmed_lsn: Gauge::default(),
            server_wal_lsn: Gauge::default(),
            replication_lag_bytes: Gauge::default(),
            in_flight: Gauge::default(),
            commit_to_ack_seconds: Histogram::new([
                0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.015, 0.02, 0.03, 0.05,
                0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
            ]),
            reconnects: Counter::default(),
            streaming: Gauge::default(),
            active: Gauge::default(),
            replication_lag_seconds: Gauge::default(),
            oldest_unconfirmed_commit: AtomicI64::new(0),
            newest_confirmed_commit: AtomicI64::new(0),
            broker_reachable: AtomicBool::new(false),
            standing_by: AtomicBool::new(false),
            snapshot_rows_total: Gauge::default(),
            snapshot_rows_done: Gauge::default(),
            stuck_partitions: Gauge::default(),
            stuck_seconds: Gauge::default(),
            stuck: std::sync::Mutex::new(String::new()),
            exactly_once_skipped: Counter::default(),
            canary_age_seconds: Gauge::default(),
            canary_read_age_seconds: Gauge::default(),
            cleanup_deleted_rows: Counter::default(),
            outbox_rows: Gauge::default(),
            outbox_bytes: Gauge::default(),
            outbox_oldest_row_age_seconds: Gauge::default(),
            debezium: Default::default(),
            canaries: Counter::default(),
            slot_failover: Gauge::default(),
            slot_failover_ready: Gauge::default(),
            canary: std::sync::Mutex::new(CanaryState::default()),
            exactly_once_foreign_tails: Counter::default(),
            registry: Registry::default(),
        };
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").into(),
                librdkafka: rdkafka::util::get_rdkafka_version().1,
                git_sha: env!("OUTBOX_RELAY_GIT_SHA").into(),
            })
            .set(1);
        root.register(
            "build_info",
            "The running build: release, librdkafka version, git commit",
            build_info,
        );
        let registry = match slot {
            Some(slot) => root.sub_registry_with_label(("slot".into(), slot.to_owned().into())),
            None => &mut root,
        };
        registry.register(
            "events",
            "Events acknowledged by Kafka, per topic (the first --metrics-topic-limit topics; the others under topic=\"_other\")",
            m.events.clone(),
        );
        registry.register(
            "topics",
            "Distinct topics this relay wrote events to since it started (labelled in outbox_relay_events_total or not)",
            m.topics.clone(),
        );
        registry.register(
            "dead_letters",
            "Events sent to the dead-letter topic, per reason (unroutable, refused)",
            m.dead_letters.clone(),
        );
        registry.register(
            "confirmed_lsn",
            "LSN confirmed to PostgreSQL (as a number)",
            m.confirmed_lsn.clone(),
        );
        registry.register(
            "server_wal_lsn",
            "Latest WAL position reported by the server",
            m.server_wal_lsn.clone(),
        );
        registry.register(
            "replication_lag_bytes",
            "Server WAL position minus the confirmed LSN",
            m.replication_lag_bytes.clone(),
        );
        registry.register(
            "in_flight",
            "Events produced and not yet acknowledged",
            m.in_flight.clone(),
        );
        registry.register(
            "commit_to_ack_seconds",
            "Time from a transaction's commit to Kafka's acknowledgement of all its events",
            m.commit_to_ack_seconds.clone(),
        );
        registry.register(
            "reconnects",
            "Replication sessions restarted after a transient error",
            m.reconnects.clone(),
        );
        registry.register(
            "streaming",
            "1 while the replication stream is open",
            m.streaming.clone(),
        );
        registry.register(
            "active",
            "1 on the instance that holds the replication slot (or polls), 0 on a standby",
            m.active.clone(),
        );
        registry.register(
            "replication_lag_seconds",
            "Seconds since the oldest transaction not yet confirmed was committed in PostgreSQL (0 when caught \
             up); while not streaming, since the newest confirmed one was (Debezium's MilliSecondsBehindSource, in seconds)",
            m.replication_lag_seconds.clone(),
        );
        registry.register(
            "snapshot_rows",
            "Rows of the initial snapshot being relayed (0 before any snapshot)",
            m.snapshot_rows_total.clone(),
        );
        registry.register(
            "snapshot_rows_done",
            "Rows of the initial snapshot read and routed so far (they go to Kafka in groups of up to 2,000)",
            m.snapshot_rows_done.clone(),
        );
        registry.register(
            "stuck_partitions",
            "Partitions whose oldest record has waited for Kafka's acknowledgement longer than --stuck-partition-after \
             (nothing at or after it is confirmed; /ready is red)",
            m.stuck_partitions.clone(),
        );
        registry.register(
            "stuck_seconds",
            "How long the oldest record of a stuck partition has waited for Kafka (0 when none is stuck)",
            m.stuck_seconds.clone(),
        );
        registry.register(
            "exactly_once_skipped",
            "--exactly-once: replayed events already in Kafka (found at or before their partition's last record), not produced again",
            m.exactly_once_skipped.clone(),
        );
        registry.register(
            "canary_age_seconds",
            "Age of the newest canary Kafka acknowledged (written by PostgreSQL, relayed through the slot); 0 when canaries are off",
            m.canary_age_seconds.clone(),
        );
        registry.register(
            "canaries",
            "Canaries Kafka acknowledged",
            m.canaries.clone(),
        );
        registry.register(
            "canary_read_age_seconds",
            "--canary-read-back: age of the newest canary read back from the canary topic by a consumer; 0 when off",
            m.canary_read_age_seconds.clone(),
        );
        registry.register(
            "slot_failover",
            "1 when the replication slot is a failover slot, synchronized to standbys (--slot-failover, PostgreSQL 17+)",
            m.slot_failover.clone(),
        );
        registry.register(
            "cleanup_deleted_rows",
            "--cleanup: outbox rows deleted after their events were acknowledged and confirmed",
            m.cleanup_deleted_rows.clone(),
        );
        registry.register(
            "outbox_rows",
            "--cleanup: rows in the outbox table(s) (PostgreSQL's live-row count, pg_stat_user_tables.n_live_tup)",
            m.outbox_rows.clone(),
        );
        registry.register(
            "outbox_bytes",
            "--cleanup: size of the outbox table(s) with their indexes and TOAST (pg_total_relation_size)",
            m.outbox_bytes.clone(),
        );
        registry.register(
            "outbox_oldest_row_age_seconds",
            "--cleanup: age of the oldest relayed row not deleted yet (since its commit; polling: since it was marked processed); 0 when none",
            m.outbox_oldest_row_age_seconds.clone(),
        );
        registry.register(
            "slot_failover_ready",
            "1 when the slot survives a failover: a failover slot, synchronized_standby_slots naming the standby's physical slot, and a synchronized copy on a standby of the URL (PostgreSQL 17+)",
            m.slot_failover_ready.clone(),
        );
        registry.register(
            "exactly_once_foreign_tails",
            "--exactly-once: partitions whose last record another producer wrote (replays to them may duplicate)",
            m.exactly_once_foreign_tails.clone(),
        );
        for reason in DEAD_LETTER_REASONS {
            // Both series exist from the start, so rate() works before the first dead letter.
            let _ = m.dead_letters.get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            });
        }
        Self {
            registry: root,
            ..m
        }
    }

    /// A dead letter acknowledged, for `reason`.
    pub fn dead_letter(&self, reason: &str) {
        self.dead_letters
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Dead letters acknowledged for `reason`.
    pub fn dead_letters_of(&self, reason: &str) -> u64 {
        self.dead_letters
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .get()
    }

    /// Dead letters acknowledged, all reasons.
    pub fn dead_letters_total(&self) -> u64 {
        DEAD_LETTER_REASONS
            .iter()
            .map(|r| {
                self.dead_letters
                    .get_or_create(&ReasonLabels {
                        reason: (*r).to_owned(),
                    })
                    .get()
            })
            .sum()
    }

    /// Commit times (micros since 2000-01-01) for the lag in seconds: of the oldest
    /// transaction received and not confirmed (`None`: all confirmed), and of the newest
    /// confirmed one.
    pub fn set_commit_times(&self, oldest_unconfirmed: Option<i64>, newest_confirmed: Option<i64>) {
        self.oldest_unconfirmed_commit
            .store(oldest_unconfirmed.unwrap_or(0), Ordering::Relaxed);
        if let Some(t) = newest_confirmed {
            self.newest_confirmed_commit.store(t, Ordering::Relaxed);
        }
    }

    /// The lag in seconds at `now` (micros since 2000-01-01).
    pub fn lag_seconds_at(&self, now: i64) -> f64 {
        let oldest = self.oldest_unconfirmed_commit.load(Ordering::Relaxed);
        let newest = self.newest_confirmed_commit.load(Ordering::Relaxed);
        let since = if oldest != 0 {
            oldest
        } else if self.streaming.get() == 1 || newest == 0 {
            return 0.0;
        } else {
            newest
        };
        (now - since).max(0) as f64 / 1e6
    }

    pub fn set_confirmed(&self, lsn: Lsn) {
        self.confirmed_lsn.set(lsn.as_u64() as i64);
        self.update_lag();
    }

    pub fn set_server_wal(&self, lsn: Lsn) {
        let lsn = lsn.as_u64() as i64;
        if lsn > self.server_wal_lsn.get() {
            self.server_wal_lsn.set(lsn);
        }
        self.update_lag();
    }

    fn update_lag(&self) {
        self.replication_lag_bytes
            .set((self.server_wal_lsn.get() - self.confirmed_lsn.get()).max(0));
    }

    pub fn set_broker_reachable(&self, ok: bool) {
        self.broker_reachable.store(ok, Ordering::Relaxed);
    }

    /// Whether this instance stands by for a slot another instance holds (PostgreSQL
    /// answered: it said the slot is busy).
    pub fn set_standing_by(&self, standing_by: bool) {
        self.standing_by.store(standing_by, Ordering::Relaxed);
        if standing_by {
            // Another instance holds the slot: this one is behind nothing.
            self.newest_confirmed_commit.store(0, Ordering::Relaxed);
            self.oldest_unconfirmed_commit.store(0, Ordering::Relaxed);
        }
    }

    pub fn is_standing_by(&self) -> bool {
        self.standing_by.load(Ordering::Relaxed)
    }

    /// Ready: able to do its job. The broker answered recently, and this instance either
    /// streams (or polls) or stands by for the slot with PostgreSQL reachable — a standby
    /// is healthy, and a rolling update of an active/standby pair must not wait for it.
    pub fn readiness(&self) -> Result<String, String> {
        // Every reason at once: a stalled canary and the partitions it stalls on.
        let mut reasons = String::new();
        if self.streaming.get() == 1 {
            if let Some(stalled) = self.canary_stalled(now_ms()) {
                reasons.push_str(&stalled);
            }
        }
        let stuck = self.stuck.lock().unwrap().clone();
        if !stuck.is_empty() {
            reasons.push_str(&format!(
                "not ready: Kafka has not acknowledged records of {stuck}\n"
            ));
        }
        if !reasons.is_empty() {
            return Err(reasons);
        }
        let broker = self.broker_reachable.load(Ordering::Relaxed);
        let streaming = self.streaming.get() == 1;
        let standing_by = self.standing_by.load(Ordering::Relaxed);
        match (broker, streaming, standing_by) {
            (true, true, _) => Ok("ready: active\n".into()),
            (true, false, true) => Ok("ready: standing by for the slot\n".into()),
            (false, _, _) => Err("not ready: the broker is unreachable\n".into()),
            (true, false, false) => {
                Err("not ready: not streaming (starting or reconnecting to PostgreSQL)\n".into())
            }
        }
    }

    /// The partitions Kafka has not answered for too long (`--stuck-partition-after`),
    /// described for /ready; none clears it.
    pub fn set_stuck(&self, stuck: &[crate::deliver::producer::Unacknowledged]) {
        self.stuck_partitions.set(stuck.len() as i64);
        self.stuck_seconds
            .set(stuck.first().map_or(0, |s| s.waited.as_secs() as i64));
        let mut text: Vec<String> = stuck.iter().take(5).map(ToString::to_string).collect();
        if stuck.len() > 5 {
            text.push(format!("{} more", stuck.len() - 5));
        }
        *self.stuck.lock().unwrap() = text.join(", ");
    }

    /// `--metrics-topic-limit`: how many topics get a label of their own.
    pub fn limit_topic_labels(&self, limit: usize) {
        self.labelled_topics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .limit = limit;
    }

    /// Topic labels never show these values (a topic prefix a config provider supplied).
    pub fn hide_in_labels(&self, hidden: crate::secret::Redaction) {
        self.labelled_topics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .hidden = hidden;
    }

    /// What `settings` ask of the metrics: the topic label limit, and Debezium's names for a
    /// connector configuration (`--debezium-metrics`), with this process's JVM-named
    /// series when `process_series` (one pipeline per process writes them).
    pub fn configure(&self, settings: &crate::config::Settings, process_series: bool) {
        self.limit_topic_labels(settings.metrics_topic_limit);
        if !settings.debezium_metrics || settings.preset.is_none() {
            return;
        }
        if let outbox_router::Output::Connect(format) = &settings.router.output {
            self.debezium
                .enable(&format.topic_prefix, settings.kafka.max_in_flight);
            self.debezium
                .process
                .store(process_series, Ordering::Relaxed);
        }
    }

    /// The counter of `topic`'s events, first used for it now: its own series while fewer
    /// than `--metrics-topic-limit` topics have one, else the `_other` series. Label sets
    /// stay bounded whatever the number of aggregate types.
    pub fn topic_events(&self, topic: &str) -> Counter {
        let mut topics = self
            .labelled_topics
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let own = match topics.own.get(topic) {
            Some(own) => *own,
            None => {
                let own = topics.labelled < topics.limit;
                topics.labelled += usize::from(own);
                topics.own.insert(topic.to_owned(), own);
                self.topics.set(topics.own.len() as i64);
                own
            }
        };
        let label = if own {
            topics.hidden.apply(topic)
        } else {
            OTHER_TOPICS.to_owned()
        };
        drop(topics);
        self.events
            .get_or_create(&TopicLabels { topic: label })
            .clone()
    }

    /// The events counted for `topic` (or under `_other`).
    #[cfg(test)]
    pub fn events_of(&self, topic: &str) -> u64 {
        self.events
            .get_or_create(&TopicLabels {
                topic: topic.to_owned(),
            })
            .get()
    }

    /// Canaries are written from now on, /ready red past `max_age` (see [`Self::readiness`]).
    pub fn canary_on(&self, max_age: std::time::Duration) {
        let mut c = self.canary.lock().unwrap_or_else(|p| p.into_inner());
        if c.max_age_ms.is_none() {
            c.since = now_ms();
        }
        c.max_age_ms = Some(max_age.as_millis() as i64);
    }

    /// No canary is written (it cannot run this session): its age no longer turns /ready red.
    pub fn canary_off(&self) {
        *self.canary.lock().unwrap_or_else(|p| p.into_inner()) = CanaryState::default();
    }

    /// PostgreSQL took a canary.
    pub fn canary_written(&self) {
        self.canary
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last_written = now_ms();
    }

    /// Kafka acknowledged the canary written at `written_ms`.
    pub fn canary_acknowledged(&self, written_ms: i64) {
        self.canaries.inc();
        let mut c = self.canary.lock().unwrap_or_else(|p| p.into_inner());
        c.newest_acknowledged = c.newest_acknowledged.max(written_ms);
    }

    /// `--canary-read-back`: a consumer reads canaries back from now on.
    pub fn canary_read_back_on(&self) {
        let mut c = self.canary.lock().unwrap_or_else(|p| p.into_inner());
        if c.read_since.is_none() {
            c.read_since = Some(now_ms());
        }
    }

    /// The canary written at `written_ms` was read back from the canary topic.
    pub fn canary_read(&self, written_ms: i64) {
        let mut c = self.canary.lock().unwrap_or_else(|p| p.into_inner());
        c.newest_read = c.newest_read.max(written_ms);
    }

    /// The age of the newest canary read back at `now`; `None` when read-back is off.
    fn canary_read_age_ms(&self, now: i64) -> Option<i64> {
        let c = self.canary.lock().unwrap_or_else(|p| p.into_inner());
        let since = c.read_since?;
        Some((now - c.newest_read.max(since)).max(0))
    }

    /// The age of the newest canary Kafka acknowledged at `now` (from when canaries started,
    /// before the first); `None` when no canary is written.
    fn canary_age_ms(&self, now: i64) -> Option<i64> {
        let c = self.canary.lock().unwrap_or_else(|p| p.into_inner());
        c.max_age_ms?;
        Some((now - c.newest_acknowledged.max(c.since)).max(0))
    }

    /// Why /ready is red because of the canary, if it is: the newest canary acknowledged is
    /// older than the limit while PostgreSQL takes canaries (it is reachable): something
    /// between the walsender and Kafka's acknowledgement stalls.
    fn canary_stalled(&self, now: i64) -> Option<String> {
        let age = self.canary_age_ms(now)?;
        let c = self.canary.lock().unwrap_or_else(|p| p.into_inner());
        let max_age = c.max_age_ms?;
        let reachable = c.last_written != 0 && now - c.last_written <= max_age;
        if !reachable {
            return None;
        }
        if age > max_age {
            return Some(format!(
                "not ready: the newest canary Kafka acknowledged was written {} s ago (--canary-max-age {} s) while \
                 PostgreSQL takes canaries: the walsender, the relay or the broker stalls\n",
                age / 1000,
                max_age / 1000
            ));
        }
        drop(c);
        let read_age = self.canary_read_age_ms(now)?;
        (read_age > max_age).then(|| {
            format!(
                "not ready: the newest canary read back from the canary topic was written {} s ago (--canary-max-age {} s) \
                 while Kafka acknowledges canaries: the broker's read path (fetch, replication to followers) stalls\n",
                read_age / 1000,
                max_age / 1000
            )
        })
    }

    pub fn is_ready(&self) -> bool {
        self.readiness().is_ok()
    }

    pub fn encode(&self) -> String {
        self.replication_lag_seconds
            .set(self.lag_seconds_at(crate::pg_time::now_micros()));
        self.canary_age_seconds.set(
            self.canary_age_ms(now_ms())
                .map_or(0.0, |ms| ms as f64 / 1000.0),
        );
        self.canary_read_age_seconds.set(
            self.canary_read_age_ms(now_ms())
                .map_or(0.0, |ms| ms as f64 / 1000.0),
        );
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String");
        if self.debezium.enabled() {
            // Debezium's series before the end marker.
            let end = out.rfind("# EOF").unwrap_or(out.len());
            out.insert_str(end, &self.debezium.encode(self, now_ms()));
        }
        out
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thousands of aggregate types keep /metrics bounded: past the limit, events are counted
    /// under `_other`; the number of topics is still told.
    #[test]
    fn topic_labels_stop_at_the_limit() {
        let m = Metrics::for_slot(Some("s"));
        m.limit_topic_labels(2);
        for topic in ["a.events", "b.events", "c.events", "a.events", "d.events"] {
            m.topic_events(topic).inc();
        }
        assert_eq!(m.events_of("a.events"), 2);
        assert_eq!(m.events_of("b.events"), 1);
        assert_eq!(m.events_of(OTHER_TOPICS), 2, "c and d");
        let text = m.encode();
        assert!(!text.contains("c.events"), "{text}");
        assert!(
            text.contains(r#"outbox_relay_topics{slot="s"} 4"#),
            "{text}"
        );
        let series = text
            .lines()
            .filter(|l| l.starts_with("outbox_relay_events_total"))
            .count();
        assert_eq!(series, 3, "{text}");
    }

    /// `--canary-read-back`: canaries acknowledged but not read back turn /ready red with
    /// the read path named; read back in time, all is green.
    #[test]
    fn a_canary_acknowledged_but_not_read_back_is_a_stall_of_the_read_path() {
        let m = Metrics::new();
        m.canary_on(std::time::Duration::from_secs(5));
        m.canary_read_back_on();
        let start = now_ms();
        m.canary_written();
        m.canary_acknowledged(start);
        m.canary_read(start);
        assert_eq!(m.canary_stalled(start + 1_000), None);
        // Written and acknowledged on, read back no more.
        let later = start + 8_000;
        {
            let mut c = m.canary.lock().unwrap();
            c.last_written = later;
        }
        m.canary_acknowledged(later);
        let red = m.canary_stalled(later + 500).expect("red");
        assert!(red.contains("read back"), "{red}");
        m.canary_read(later);
        assert_eq!(m.canary_stalled(later + 500), None);
    }
}
