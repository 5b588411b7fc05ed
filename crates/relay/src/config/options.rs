//! The options of `run` (and `check`), from (highest first) the command line,
//! `OUTBOX_RELAY_*` environment variables and the `--config` TOML file. clap handles the
//! first two; [`RunOptions::merge_file`] fills what they left unset from the file, and a
//! Debezium connector configuration comes below all three, by the same rule ([`RunOptions::over`]).

use super::defaults;
use super::ConfigError;
use crate::secret::Secret;
use clap::{Args, FromArgMatches, ValueEnum};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How rows are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Logical replication (pgoutput).
    Cdc,
    /// SELECT ... FOR UPDATE SKIP LOCKED, produce, then DELETE (or mark), in one transaction.
    Polling,
}

/// Options of `run` (and of the commands that share its settings). Every option can also
/// come from the environment (`OUTBOX_RELAY_<NAME>`) or from the `--config` file, where
/// the key is the option's long name without the dashes, e.g. `postgres-url = "..."`.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RunOptions {
    /// TOML file with any of these options (keys are the long option names, e.g. `slot = "outbox_relay"`).
    #[arg(
        help_heading = "Configuration files",
        long,
        env = "OUTBOX_RELAY_CONFIG",
        value_name = "FILE"
    )]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Debezium connector configuration to run as it is: the JSON POSTed to Kafka Connect
    /// ({"name": ..., "config": {...}} or the config object) or a .properties file. Its
    /// database.*, slot, publication, table, EventRouter and converter options apply; the
    /// options above (URL, servers, slot, ...) still override it.
    #[arg(
        help_heading = "Configuration files",
        long,
        env = "OUTBOX_RELAY_DEBEZIUM_CONFIG",
        value_name = "FILE"
    )]
    pub debezium_config: Option<PathBuf>,

    /// Kafka Connect worker properties (connect-distributed.properties), with --debezium-config:
    /// supplies bootstrap.servers, converters and producer.* the connector config leaves out.
    #[arg(
        help_heading = "Configuration files",
        long,
        env = "OUTBOX_RELAY_WORKER_CONFIG",
        value_name = "FILE",
        requires = "debezium_config"
    )]
    pub worker_config: Option<PathBuf>,

    #[arg(help_heading = "Source (PostgreSQL)", long, env = "OUTBOX_RELAY_MODE", value_enum,
        help = defaults::help("How rows are read: cdc (logical replication) or polling (SELECT ... FOR UPDATE SKIP LOCKED, then DELETE, for databases without logical replication)", defaults::MODE))]
    pub mode: Option<Mode>,

    #[arg(help_heading = "Source (PostgreSQL)", long, env = "OUTBOX_RELAY_POLL_INTERVAL_MS", value_name = "MS",
        help = defaults::help("Polling mode: pause between polls that found less than a full batch, in milliseconds", defaults::POLL_INTERVAL_MS))]
    pub poll_interval_ms: Option<u64>,

    #[arg(help_heading = "Source (PostgreSQL)", long, env = "OUTBOX_RELAY_POLL_BATCH_SIZE", value_name = "N",
        help = defaults::help("Polling mode: rows per poll (one transaction)", defaults::POLL_BATCH_SIZE))]
    pub poll_batch_size: Option<i64>,

    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_POLL_ORDER_BY",
        value_name = "COLUMN",
        help = "Polling mode: the identity or serial column that gives the insertion order [default: the table's identity or serial column]"
    )]
    pub poll_order_by: Option<String>,

    /// With --debezium-config: propagate `traceparent`/`tracestate` from the
    /// tracing.span.context.field column. Off by default, as Debezium writes trace headers only
    /// with an OpenTelemetry SDK or agent configured.
    #[arg(
        help_heading = "Routing (EventRouter)",
        long,
        env = "OUTBOX_RELAY_PROPAGATE_TRACING",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub propagate_tracing: Option<bool>,

    /// Polling mode: set this timestamp column to now() instead of deleting relayed rows;
    /// rows where it IS NULL are pending (the seeds' `published_at`).
    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_PROCESSED_COLUMN",
        value_name = "COLUMN"
    )]
    pub processed_column: Option<String>,

    /// Rows already in the outbox table: no-data (not relayed; the stream starts at the
    /// slot), initial (relayed once when the slot is created, from its exported snapshot,
    /// before the stream), always (relayed at every start, then the stream from the slot:
    /// rows the slot still holds come twice) or initial-only (relayed once, no slot and no
    /// stream: the relay then idles until stopped) [default: no-data]. Debezium configs:
    /// `snapshot.mode`. CDC mode only.
    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_SNAPSHOT_MODE",
        value_enum,
        value_name = "no-data|initial|always|initial-only"
    )]
    pub snapshot_mode: Option<super::SnapshotMode>,

    /// The signal table (SCHEMA.TABLE, columns id, type, data as text): a row inserted there is
    /// a signal to the relay (execute-snapshot, stop-snapshot, pause-snapshot, resume-snapshot,
    /// log), and incremental snapshots write their watermarks there. The relay adds it to its
    /// publication. Debezium configs: `signal.data.collection`. CDC mode only.
    #[arg(
        help_heading = "Signals and incremental snapshots",
        long,
        env = "OUTBOX_RELAY_SIGNAL_TABLE",
        value_name = "SCHEMA.TABLE"
    )]
    pub signal_table: Option<String>,

    /// Where signals are read: any of source (the signal table), kafka (--signal-kafka-topic)
    /// and file (--signal-file), comma-separated [default: source]. Debezium configs:
    /// `signal.enabled.channels`.
    #[arg(
        help_heading = "Signals and incremental snapshots",
        long,
        env = "OUTBOX_RELAY_SIGNAL_CHANNELS",
        value_name = "LIST"
    )]
    pub signal_channels: Option<String>,

    /// The Kafka signal channel's topic (partition 0 is read); a record's key must be the
    /// connector's name (`topic.prefix`; the slot's name natively) [default: <name>-signal].
    /// Debezium configs: `signal.kafka.topic`.
    #[arg(
        help_heading = "Signals and incremental snapshots",
        long,
        env = "OUTBOX_RELAY_SIGNAL_KAFKA_TOPIC",
        value_name = "TOPIC"
    )]
    pub signal_kafka_topic: Option<String>,

    /// The brokers of the Kafka signal channel [default: --bootstrap-servers]. Debezium
    /// configs: `signal.kafka.bootstrap.servers`.
    #[arg(
        help_heading = "Signals and incremental snapshots",
        long,
        env = "OUTBOX_RELAY_SIGNAL_KAFKA_BOOTSTRAP_SERVERS",
        value_name = "HOST:PORT,..."
    )]
    pub signal_kafka_bootstrap_servers: Option<String>,

    /// The Kafka signal channel's consumer group [default: kafka-signal]. Debezium configs:
    /// `signal.kafka.groupId`.
    #[arg(
        help_heading = "Signals and incremental snapshots",
        long,
        env = "OUTBOX_RELAY_SIGNAL_KAFKA_GROUP_ID",
        value_name = "GROUP"
    )]
    pub signal_kafka_group_id: Option<String>,

    /// The file signal channel: one JSON signal per line ({"id", "type", "data"}); the file is
    /// emptied once read [default: file-signals.txt]. Debezium configs: `signal.file`.
    #[arg(
        help_heading = "Signals and incremental snapshots",
        long,
        env = "OUTBOX_RELAY_SIGNAL_FILE",
        value_name = "PATH"
    )]
    pub signal_file: Option<PathBuf>,

    #[arg(help_heading = "Signals and incremental snapshots", long, env = "OUTBOX_RELAY_SIGNAL_POLL_INTERVAL_MS", value_name = "MS",
        help = defaults::help("How often the kafka and file signal channels are read (Debezium: signal.poll.interval.ms)", defaults::SIGNAL_POLL_INTERVAL_MS))]
    pub signal_poll_interval_ms: Option<u64>,

    /// Incremental snapshots write nothing to the database: no watermark rows in the signal
    /// table; a chunk's window is the stream's way from where it stood when the chunk was
    /// read to the server's WAL position once it was (signals then come from the signal table,
    /// Kafka or the file) [default: false]. Debezium configs: `read.only`.
    #[arg(
        help_heading = "Signals and incremental snapshots",
        long,
        env = "OUTBOX_RELAY_INCREMENTAL_SNAPSHOT_READ_ONLY",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub incremental_snapshot_read_only: Option<bool>,

    #[arg(help_heading = "Signals and incremental snapshots", long, env = "OUTBOX_RELAY_INCREMENTAL_SNAPSHOT_CHUNK_SIZE", value_name = "ROWS",
        help = defaults::help("Rows an incremental snapshot reads per chunk (Debezium: incremental.snapshot.chunk.size)", defaults::INCREMENTAL_SNAPSHOT_CHUNK_SIZE))]
    pub incremental_snapshot_chunk_size: Option<std::num::NonZeroUsize>,

    #[arg(help_heading = "Source (PostgreSQL)", long, env = "OUTBOX_RELAY_SNAPSHOT_FETCH_SIZE", value_name = "ROWS",
        help = defaults::help("Rows the initial snapshot fetches per round trip (Debezium: snapshot.fetch.size)", defaults::SNAPSHOT_FETCH_SIZE))]
    pub snapshot_fetch_size: Option<std::num::NonZeroUsize>,

    /// How the publication is made when it is missing: outbox-inserts-only (FOR TABLE the
    /// outbox tables, inserts only), filtered (FOR TABLE, every operation), all-tables (FOR
    /// ALL TABLES; a superuser), no-tables (empty; a DBA adds the tables) or disabled (it
    /// must exist) [default: outbox-inserts-only]. Debezium configs:
    /// `publication.autocreate.mode`. CDC mode only.
    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_PUBLICATION_MODE",
        value_enum,
        value_name = "MODE"
    )]
    pub publication_mode: Option<super::PublicationMode>,

    /// What to do when a replication slot this relay streamed from before is gone (dropped,
    /// or not carried over by a failover): refuse (stop and say so), reread (create it again
    /// and relay every row still in the outbox table) or accept-gap (create it at the current
    /// position; events written in between are not relayed) [default: refuse].
    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_ON_MISSING_SLOT",
        value_enum,
        value_name = "refuse|reread|accept-gap"
    )]
    pub on_missing_slot: Option<super::OnMissingSlot>,

    /// What to do when the server went back in time: restored from a file-system copy or a VM
    /// snapshot (or a cold copy started), it kept its system identifier and timeline but its
    /// WAL ends before what this relay confirmed to it. refuse (stop and say so), reread
    /// (resume from the server's slot position: what it has after it comes again) or
    /// accept-gap (resume from the confirmed position: commits the server makes below it are
    /// not relayed) [default: refuse].
    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_ON_SERVER_REWIND",
        value_enum,
        value_name = "refuse|reread|accept-gap"
    )]
    pub on_server_rewind: Option<super::OnServerRewind>,

    /// No duplicates after a crash, a broker restart or a standby takeover: every record
    /// carries its source position (header __outbox_relay.position) and, after a restart, the
    /// replayed events already at or before their partition's last record are not produced
    /// again. The relay chooses partitions itself (murmur2 of the key, as librdkafka does).
    /// Assumes the relay is the only writer of its partitions (detected and warned otherwise).
    /// CDC mode only.
    #[arg(
        help_heading = "Kafka",
        long,
        env = "OUTBOX_RELAY_EXACTLY_ONCE",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub exactly_once: Option<bool>,

    /// Make the replication slot a failover slot (PostgreSQL 17+), synchronized to standbys
    /// so that it survives a failover: created with FAILOVER, or an existing slot altered
    /// (ALTER_REPLICATION_SLOT … (FAILOVER true)). Refused on an older server, with the
    /// reason. Debezium configs: `slot.failover=true`. CDC mode only.
    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_SLOT_FAILOVER",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub slot_failover: Option<bool>,

    /// Delete the outbox rows the relay relayed, once Kafka acknowledged their events and
    /// the position after them is confirmed: by primary key, in batches (--cleanup-batch
    /// every --cleanup-interval), after --cleanup-grace. Rows whose event went to the
    /// dead-letter topic stay. Needs DELETE on the outbox table (`setup-sql --cleanup`).
    /// Only the instance that holds the slot cleans. Polling mode: deletes rows marked by
    /// --processed-column. Debezium configs: `outbox.relay.cleanup=true` (a relay option).
    #[arg(
        help_heading = "Operations",
        long,
        env = "OUTBOX_RELAY_CLEANUP",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub cleanup: Option<bool>,

    #[arg(help_heading = "Operations", long, env = "OUTBOX_RELAY_CLEANUP_BATCH", value_name = "ROWS",
        help = defaults::help("--cleanup deletes at most this many rows every --cleanup-interval", defaults::CLEANUP_BATCH))]
    pub cleanup_batch: Option<u32>,

    #[arg(help_heading = "Operations", long, env = "OUTBOX_RELAY_CLEANUP_INTERVAL", value_name = "SECONDS",
        help = defaults::help("How often --cleanup deletes a batch", defaults::CLEANUP_INTERVAL_S))]
    pub cleanup_interval: Option<u64>,

    #[arg(help_heading = "Operations", long, env = "OUTBOX_RELAY_CLEANUP_GRACE", value_name = "MINUTES",
        help = defaults::help("--cleanup keeps relayed rows this long (for audit) before deleting them", 0))]
    pub cleanup_grace: Option<u64>,

    #[arg(help_heading = "Operations", long, env = "OUTBOX_RELAY_CANARY_INTERVAL", value_name = "SECONDS",
        help = defaults::help("Every SECONDS the relay writes a canary (a row of its canary table, see --canary-method), relays it through its own stream to --canary-topic and waits for Kafka's acknowledgement: outbox_relay_canary_age_seconds, and /ready red past --canary-max-age. 0: off", defaults::CANARY_INTERVAL_S))]
    pub canary_interval: Option<u64>,

    /// How a canary enters the stream. `table`: a row of outbox_relay_canaries (in the outbox
    /// table's schema), which only the relay's own publication carries; made (and added to
    /// the publication) when the role may, else the canary is off with a warning saying what
    /// to grant. `message`: a logical decoding message, which PostgreSQL sends to EVERY
    /// logical decoding consumer of the database (another team's Debezium connector receives
    /// it and may fail on it); CDC mode only [default: table].
    #[arg(
        help_heading = "Operations",
        long,
        env = "OUTBOX_RELAY_CANARY_METHOD",
        value_enum,
        value_name = "table|message"
    )]
    pub canary_method: Option<super::CanaryMethod>,

    #[arg(help_heading = "Operations", long, env = "OUTBOX_RELAY_CANARY_MAX_AGE", value_name = "SECONDS",
        help = defaults::help("/ready turns red when the newest canary Kafka acknowledged is older than this while PostgreSQL takes canaries", defaults::CANARY_MAX_AGE_S))]
    pub canary_max_age: Option<u64>,

    /// Also read the canaries back from --canary-topic with a consumer: /ready turns red
    /// (and outbox_relay_canary_read_age_seconds grows) when Kafka acknowledges canaries that
    /// no consumer can read within --canary-max-age, covering the broker's read path too.
    #[arg(
        help_heading = "Operations",
        long,
        env = "OUTBOX_RELAY_CANARY_READ_BACK",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub canary_read_back: Option<bool>,

    #[arg(help_heading = "Operations", long, env = "OUTBOX_RELAY_CANARY_TOPIC", value_name = "TOPIC",
        help = defaults::help("Where canaries go (never a business topic)", defaults::CANARY_TOPIC))]
    pub canary_topic: Option<String>,

    /// PostgreSQL connection URL, e.g. postgres://relay:secret@db:5432/app. The user needs the
    /// REPLICATION attribute and SELECT on the outbox table (see `sql/`).
    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_POSTGRES_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    #[serde(serialize_with = "Secret::serialize_for_merge")]
    pub postgres_url: Option<Secret>,

    /// Capture from a hot standby (PostgreSQL 16+): --postgres-url names the standby, where
    /// the slot lives, and this URL its primary, which takes what needs writes (the
    /// publication, the snapshot progress, the slot history, the canary, --cleanup). Without
    /// it, capturing from a standby refuses what needs writes, with the reason.
    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_PRIMARY_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    #[serde(serialize_with = "Secret::serialize_for_merge")]
    pub primary_url: Option<Secret>,

    /// File holding the PostgreSQL password (e.g. a mounted secret); overrides a password in
    /// the URL. OUTBOX_RELAY_POSTGRES_PASSWORD does the same from the environment.
    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_POSTGRES_PASSWORD_FILE",
        value_name = "FILE"
    )]
    pub postgres_password_file: Option<PathBuf>,

    /// Kafka bootstrap servers, comma-separated HOST:PORT.
    #[arg(
        help_heading = "Kafka",
        long,
        env = "OUTBOX_RELAY_BOOTSTRAP_SERVERS",
        value_name = "HOSTS"
    )]
    pub bootstrap_servers: Option<String>,

    #[arg(help_heading = "Source (PostgreSQL)", long, env = "OUTBOX_RELAY_TABLE", value_name = "SCHEMA.TABLE",
        help = defaults::help("Outbox table(s) to relay, SCHEMA.TABLE[,SCHEMA.TABLE...]", defaults::TABLE))]
    pub table: Option<String>,

    /// Also relay logical decoding messages, `pg_logical_emit_message(true, prefix, content)`
    /// written in the business transaction, whose prefix matches one of these regular
    /// expressions (whole, any case): the content is a JSON object with the outbox columns as
    /// fields (a string field is taken as the column's text, any other as its JSON).
    /// `--table ''` relays messages only.
    #[arg(
        help_heading = "Source (PostgreSQL)",
        long,
        env = "OUTBOX_RELAY_MESSAGE_PREFIX",
        value_name = "REGEX[,REGEX...]"
    )]
    pub message_prefix: Option<String>,

    #[arg(help_heading = "Source (PostgreSQL)", long, env = "OUTBOX_RELAY_SLOT", value_name = "NAME",
        help = defaults::help("Logical replication slot (pgoutput), created when missing", defaults::SLOT))]
    pub slot: Option<String>,

    #[arg(help_heading = "Source (PostgreSQL)", long, env = "OUTBOX_RELAY_PUBLICATION", value_name = "NAME",
        help = defaults::help("Publication for the outbox table, created when missing", defaults::PUBLICATION))]
    pub publication: Option<String>,

    #[arg(help_heading = "Routing (EventRouter)", long, env = "OUTBOX_RELAY_ID_COLUMN", value_name = "COLUMN",
        help = defaults::help("Column whose value becomes header `id` (Debezium table.field.event.id)", defaults::ID_COLUMN))]
    pub id_column: Option<String>,

    #[arg(help_heading = "Routing (EventRouter)", long, env = "OUTBOX_RELAY_KEY_COLUMN", value_name = "COLUMN",
        help = defaults::help("Column whose value is the record key (table.field.event.key)", defaults::KEY_COLUMN))]
    pub key_column: Option<String>,

    #[arg(help_heading = "Routing (EventRouter)", long, env = "OUTBOX_RELAY_PAYLOAD_COLUMN", value_name = "COLUMN",
        help = defaults::help("Column whose value is the record value (table.field.event.payload)", defaults::PAYLOAD_COLUMN))]
    pub payload_column: Option<String>,

    #[arg(help_heading = "Routing (EventRouter)", long, env = "OUTBOX_RELAY_ROUTE_BY_COLUMN", value_name = "COLUMN",
        help = defaults::help("Column whose value builds the topic name (route.by.field)", defaults::ROUTE_BY_COLUMN))]
    pub route_by_column: Option<String>,

    #[arg(help_heading = "Routing (EventRouter)", long, env = "OUTBOX_RELAY_TOPIC_TEMPLATE", value_name = "TEMPLATE",
        help = defaults::help("Topic name template (route.topic.replacement)", defaults::TOPIC_TEMPLATE))]
    pub topic_template: Option<String>,

    /// Produce the payload as compact JSON without null fields and empty arrays (Debezium's
    /// table.expand.json.payload); a payload that is not JSON goes to the dead-letter topic.
    #[arg(help_heading = "Routing (EventRouter)", long, env = "OUTBOX_RELAY_EXPAND_JSON_PAYLOAD", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub expand_json_payload: Option<bool>,

    #[arg(help_heading = "Routing (EventRouter)", long, env = "OUTBOX_RELAY_ADDITIONAL_PLACEMENT", value_name = "LIST",
        help = defaults::help("Extra columns as headers, Debezium's table.fields.additional.placement syntax: COLUMN:header[:ALIAS],...; pass \"\" for none", defaults::ADDITIONAL_PLACEMENT))]
    pub additional_placement: Option<String>,

    #[arg(help_heading = "Kafka", long, env = "OUTBOX_RELAY_DEAD_LETTER_TOPIC", value_name = "TOPIC",
        help = defaults::help("Topic for rows that cannot be routed or that the broker refuses (NULL or invalid routing value, missing column, too large)", defaults::DEAD_LETTER_TOPIC))]
    pub dead_letter_topic: Option<String>,

    #[arg(help_heading = "Kafka", long, env = "OUTBOX_RELAY_TOPIC_PARTITIONS", value_name = "N",
        help = defaults::help("Partitions of topics the relay creates", defaults::TOPIC_PARTITIONS))]
    pub topic_partitions: Option<i32>,

    #[arg(
        help_heading = "Kafka",
        long,
        env = "OUTBOX_RELAY_TOPIC_REPLICATION_FACTOR",
        value_name = "N",
        allow_negative_numbers = true,
        help = defaults::help("Replication factor of topics the relay creates; -1 = the broker's default", defaults::TOPIC_REPLICATION_FACTOR))]
    pub topic_replication_factor: Option<i32>,

    #[arg(help_heading = "Kafka", long, env = "OUTBOX_RELAY_MAX_IN_FLIGHT", value_name = "N",
        help = defaults::help("Events produced but not yet acknowledged before reading pauses (backpressure)", defaults::MAX_IN_FLIGHT))]
    pub max_in_flight: Option<usize>,

    #[arg(help_heading = "Kafka", long, env = "OUTBOX_RELAY_MAX_IN_FLIGHT_BYTES", value_name = "BYTES",
        help = defaults::help("Bytes of events produced but not yet acknowledged before reading pauses (librdkafka's queue; raised to hold one record of message.max.bytes)", defaults::MAX_IN_FLIGHT_BYTES))]
    pub max_in_flight_bytes: Option<usize>,

    #[arg(help_heading = "Kafka", long, env = "OUTBOX_RELAY_STUCK_PARTITION_AFTER", value_name = "SECONDS",
        help = defaults::help("A partition whose oldest record waits this long for Kafka's acknowledgement is reported: /ready red, an error naming topic and partition, outbox_relay_stuck_partitions", defaults::STUCK_PARTITION_AFTER_S))]
    pub stuck_partition_after: Option<u64>,

    #[arg(help_heading = "Source (PostgreSQL)", long, env = "OUTBOX_RELAY_STATUS_INTERVAL_MS", value_name = "MS",
        help = defaults::help("How often the confirmed position is reported to PostgreSQL, in milliseconds", defaults::STATUS_INTERVAL_MS))]
    pub status_interval_ms: Option<u64>,

    #[arg(help_heading = "Operations", long, env = "OUTBOX_RELAY_METRICS_ADDRESS", value_name = "HOST:PORT",
        help = defaults::help("Where /metrics (Prometheus), /health and /ready are served, HOST:PORT; port 0 picks a free port (logged at start-up)", defaults::METRICS_ADDRESS))]
    pub metrics_address: Option<String>,

    /// With a Debezium connector configuration, also serve Debezium's metric names on
    /// /metrics: `debezium_metrics_<Attribute>{context, name, plugin}` as the JMX exporter of
    /// Debezium's monitoring example names the streaming and snapshot MBeans' attributes, so
    /// that its Grafana dashboards and alerts read the relay unchanged. `false` leaves them
    /// out [default: true].
    #[arg(
        help_heading = "Operations",
        long,
        env = "OUTBOX_RELAY_DEBEZIUM_METRICS",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub debezium_metrics: Option<bool>,

    #[arg(help_heading = "Operations", long, env = "OUTBOX_RELAY_METRICS_TOPIC_LIMIT", value_name = "N",
        help = defaults::help("Topics counted under a label of their own in outbox_relay_events_total; events of the topics after the first N are counted under topic=\"_other\" (0: every topic under _other), so thousands of aggregate types keep /metrics small", defaults::METRICS_TOPIC_LIMIT))]
    pub metrics_topic_limit: Option<usize>,

    /// librdkafka producer property KEY=VALUE (repeatable, or a comma-separated list), e.g.
    /// security.protocol=SASL_SSL,compression.codec=lz4. A comma followed by something that is
    /// not a librdkafka property stays in the value (debug=msg,topic; a password); write `\,`
    /// for a comma that must stay whatever follows. Applied after the relay's own settings;
    /// the relay refuses values that would break its guarantees (enable.idempotence=false,
    /// acks other than all).
    #[arg(
        help_heading = "Kafka",
        long = "producer-property",
        env = "OUTBOX_RELAY_PRODUCER_PROPERTIES",
        value_name = "KEY=VALUE",
        hide_env_values = true
    )]
    #[serde(default)]
    pub producer_property: Vec<String>,

    /// The producer properties came from the `--config` file: each element is one property,
    /// whole (not a comma-separated list).
    #[arg(skip)]
    #[serde(skip)]
    pub producer_property_from_file: bool,

    /// File of librdkafka producer properties, one KEY=VALUE per line (# comments), for
    /// secrets such as sasl.password or ssl.key.password. --producer-property wins over it.
    #[arg(
        help_heading = "Kafka",
        long,
        env = "OUTBOX_RELAY_PRODUCER_PROPERTIES_FILE",
        value_name = "FILE"
    )]
    pub producer_properties_file: Option<PathBuf>,
}

impl RunOptions {
    /// Fills every option the command line and environment left unset from the `--config`
    /// file, by [`RunOptions::over`].
    pub fn merge_file(self) -> Result<Self, ConfigError> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let file_error = |message: String| ConfigError::File {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| file_error(e.to_string()))?;
        let mut file: RunOptions =
            toml::from_str(&text).map_err(|e| file_error(e.message().to_owned()))?;
        file.producer_property_from_file = !file.producer_property.is_empty();
        self.over(file).map_err(file_error)
    }

    /// The one rule by which layers of options are merged (command line and environment over
    /// the `--config` file, over what a Debezium connector configuration means): every option
    /// `self` sets wins, every option it leaves unset comes from `lower`. Both layers are the
    /// same struct, so no list of fields is kept by hand.
    pub fn over(self, lower: RunOptions) -> Result<RunOptions, String> {
        let to_map = |o: &RunOptions| match serde_json::to_value(o) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            other => Err(format!("cannot merge options: {other:?}")),
        };
        let mut merged = to_map(&lower)?;
        for (key, value) in to_map(&self)? {
            let unset = value.is_null() || value.as_array().is_some_and(|a| a.is_empty());
            if !unset {
                merged.insert(key, value);
            }
        }
        let merged: RunOptions =
            serde_json::from_value(serde_json::Value::Object(merged)).map_err(|e| e.to_string())?;
        let producer_property_from_file = if self.producer_property.is_empty() {
            lower.producer_property_from_file
        } else {
            self.producer_property_from_file
        };
        Ok(RunOptions {
            config: self.config.or(lower.config),
            producer_property_from_file,
            ..merged
        })
    }

    /// The options `--FLAG=VALUE` sets, parsed exactly as on the command line (the
    /// environment is not read): how a foreign configuration's option that means a native
    /// option becomes one. The error says what is wrong with the value.
    pub fn from_flag(flag: &str, value: &str) -> Result<RunOptions, String> {
        let command = Self::augment_args(clap::Command::new("outbox-relay").no_binary_name(true))
            .mut_args(|a| a.env(None::<&str>));
        let matches = command
            .try_get_matches_from([format!("--{flag}={value}")])
            .map_err(|e| clap_reason(&e))?;
        Self::from_arg_matches(&matches).map_err(|e| clap_reason(&e))
    }

    /// The options `flags` (long names) the environment sets (`OUTBOX_RELAY_*`, values
    /// trimmed), each parsed as `run` parses it; the environment's other variables are not read.
    pub fn from_environment(flags: &[&str]) -> Result<RunOptions, String> {
        let command = Self::augment_args(clap::Command::new("outbox-relay"));
        let mut options = RunOptions::default();
        for arg in command.get_arguments() {
            let (Some(flag), Some(name)) = (arg.get_long(), arg.get_env()) else {
                continue;
            };
            if !flags.contains(&flag) {
                continue;
            }
            let Some(value) = std::env::var_os(name) else {
                continue;
            };
            let name = name.to_string_lossy();
            let value = value
                .into_string()
                .map_err(|_| format!("{name}: not UTF-8"))?;
            let parsed = Self::from_flag(flag, value.trim()).map_err(|e| format!("{name}: {e}"))?;
            options = parsed.over(options)?;
        }
        Ok(options)
    }
}

/// clap's message on one line, without its "error: " and its advice to try --help.
fn clap_reason(e: &clap::Error) -> String {
    let text = e.to_string();
    let reason = text
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    reason.strip_prefix("error: ").unwrap_or(&reason).to_owned()
}
