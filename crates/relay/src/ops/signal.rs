//! `outbox-relay signal`: writes a Debezium signal for the operator, through the channel the
//! relay's settings enable (the signal table, the Kafka topic, the file), as an operator would
//! write it by hand.

use crate::config::{ClientRole, Settings};
use crate::error::RelayError;
use crate::source::signal::{self, Signal};
use serde_json::json;

/// What to signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SignalType {
    /// Read tables again: incremental (the default) or --blocking.
    ExecuteSnapshot,
    /// Stop the incremental snapshot (of --table's tables only, when given).
    StopSnapshot,
    PauseSnapshot,
    ResumeSnapshot,
    /// Log --message (its first `{}` replaced by the relay's position).
    Log,
}

/// Where to write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Channel {
    Source,
    Kafka,
    File,
}

#[derive(Debug, clap::Args)]
pub struct SignalArgs {
    #[arg(value_enum)]
    pub r#type: SignalType,
    /// A table to snapshot (SCHEMA.TABLE; a regular expression, as Debezium's
    /// `data-collections`); repeat for several.
    #[arg(long = "table", value_name = "SCHEMA.TABLE")]
    pub tables: Vec<String>,
    /// Only the rows where this SQL condition holds (`additional-conditions`, for every
    /// --table).
    #[arg(long = "where", value_name = "SQL")]
    pub condition: Option<String>,
    /// A blocking snapshot (the stream waits) instead of an incremental one.
    #[arg(long)]
    pub blocking: bool,
    /// The `log` signal's message.
    #[arg(long)]
    pub message: Option<String>,
    /// The signal's id (the notifications of the snapshot it starts carry it) [default: a
    /// new UUID].
    #[arg(long)]
    pub id: Option<String>,
    /// The channel to write to [default: the first the settings enable of source, kafka,
    /// file].
    #[arg(long, value_enum)]
    pub channel: Option<Channel>,
    #[command(flatten)]
    pub run: crate::config::RunOptions,
}

/// The signal `args` describe; why not, for arguments that do not make one.
pub fn signal_of(args: &SignalArgs) -> Result<Signal, String> {
    let kind = if args.blocking {
        "blocking"
    } else {
        "incremental"
    };
    let (name, data) = match args.r#type {
        SignalType::ExecuteSnapshot => {
            if args.tables.is_empty() {
                return Err("execute-snapshot needs --table (one or more)".into());
            }
            let mut data = json!({"data-collections": args.tables, "type": kind});
            if let Some(condition) = &args.condition {
                data["additional-conditions"] = args
                    .tables
                    .iter()
                    .map(|t| json!({"data-collection": t, "filter": condition}))
                    .collect();
            }
            (signal::EXECUTE_SNAPSHOT, data)
        }
        SignalType::StopSnapshot => {
            let mut data = json!({"type": kind});
            if !args.tables.is_empty() {
                data["data-collections"] = json!(args.tables);
            }
            (signal::STOP_SNAPSHOT, data)
        }
        SignalType::PauseSnapshot => (signal::PAUSE_SNAPSHOT, json!({"type": "incremental"})),
        SignalType::ResumeSnapshot => (signal::RESUME_SNAPSHOT, json!({"type": "incremental"})),
        SignalType::Log => match &args.message {
            Some(message) => (signal::LOG, json!({ "message": message })),
            None => return Err("log needs --message".into()),
        },
    };
    Ok(Signal {
        id: Some(
            args.id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        ),
        kind: name.to_owned(),
        data,
    })
}

/// Writes `signal` through `channel` (else the first one `settings` enable); returns where.
pub async fn write(
    settings: &Settings,
    signal: &Signal,
    channel: Option<Channel>,
) -> Result<String, RelayError> {
    let Some(cdc) = settings.cdc() else {
        return Err(RelayError::misconfigured(
            "signals are read in CDC mode only (--mode cdc)",
        ));
    };
    let signals = &cdc.signals;
    let channel = match channel {
        Some(c) => c,
        None if signals.source && signals.table.is_some() => Channel::Source,
        None if signals.kafka => Channel::Kafka,
        None if signals.file => Channel::File,
        None => {
            return Err(RelayError::misconfigured(
                "no signal channel is set up: --signal-table (signal.data.collection), or --signal-channels kafka or file",
            ))
        }
    };
    let data = signal.data.to_string();
    match channel {
        Channel::Source => {
            let Some(table) = &signals.table else {
                return Err(RelayError::misconfigured(
                    "--channel source needs --signal-table (signal.data.collection)",
                ));
            };
            let client = crate::source::postgres::Database::for_writes(settings)
                .connect()
                .await?;
            let literal = postgres_protocol::escape::escape_literal;
            client
                .batch_execute(&format!(
                    "INSERT INTO {} VALUES ({}, {}, {})",
                    crate::source::sql_rows::qualified(table),
                    literal(signal.id.as_deref().unwrap_or_default()),
                    literal(&signal.kind),
                    literal(&data)
                ))
                .await
                .map_err(|e| {
                    RelayError::postgres("writing the signal", e, || {
                        format!("the role needs INSERT on the signal table {table} (id, type, data as text)")
                    })
                })?;
            Ok(format!("the signal table {table}"))
        }
        Channel::Kafka => {
            use rdkafka::producer::{FutureProducer, FutureRecord};
            let name = match &settings.router.output {
                outbox_router::Output::Connect(format) => format.topic_prefix.clone(),
                outbox_router::Output::Raw => cdc.slot.clone(),
            };
            let topic = signal::channels::kafka_topic(signals, &name);
            signal::channels::ensure_kafka_topic(signals, &settings.kafka, &topic)
                .await
                .map_err(|why| RelayError::BrokerUnavailable(anyhow::anyhow!("{why}")))?;
            let mut config = settings.kafka.client_config(ClientRole::Admin);
            if let Some(servers) = &signals.kafka_bootstrap_servers {
                config.set("bootstrap.servers", servers);
            }
            let producer: FutureProducer = config
                .create()
                .map_err(|e| RelayError::misconfigured(format!("the Kafka signal channel: {e}")))?;
            let value = signal::to_json(signal);
            producer
                .send(
                    FutureRecord::to(&topic)
                        .partition(0)
                        .key(&name)
                        .payload(&value),
                    std::time::Duration::from_secs(30),
                )
                .await
                .map_err(|(e, _)| {
                    RelayError::BrokerUnavailable(anyhow::anyhow!(
                        "writing the signal to {topic}: {e}"
                    ))
                })?;
            Ok(format!("topic {topic}, key {name}"))
        }
        Channel::File => {
            use std::io::Write;
            let path = &signals.file_path;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| writeln!(f, "{}", signal::to_json(signal)).map(|()| f))
                .map_err(|e| {
                    RelayError::misconfigured(format!("the signal file {}: {e}", path.display()))
                })?;
            let _ = file.flush();
            Ok(format!("the file {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::FromArgMatches;

    fn args(line: &[&str]) -> SignalArgs {
        let matches = crate::cli::command_line().get_matches_from(
            ["outbox-relay", "signal"]
                .into_iter()
                .chain(line.iter().copied()),
        );
        match crate::cli::Cli::from_arg_matches(&matches).unwrap().command {
            crate::cli::Command::Signal(args) => args,
            _ => unreachable!("signal"),
        }
    }

    #[test]
    fn the_cli_writes_debeziums_signals() {
        let s = signal_of(&args(&[
            "execute-snapshot",
            "--table",
            "public.outbox",
            "--where",
            "aggregate_type = 'Order'",
            "--id",
            "s1",
        ]))
        .unwrap();
        assert_eq!(s.id.as_deref(), Some("s1"));
        assert_eq!(s.kind, "execute-snapshot");
        assert_eq!(
            s.data,
            json!({"data-collections": ["public.outbox"], "type": "incremental",
                   "additional-conditions": [{"data-collection": "public.outbox", "filter": "aggregate_type = 'Order'"}]})
        );
        assert!(signal_of(&args(&["execute-snapshot"]))
            .unwrap_err()
            .contains("--table"));
        let blocking =
            signal_of(&args(&["execute-snapshot", "--table", "a.b", "--blocking"])).unwrap();
        assert_eq!(blocking.data["type"], "blocking");
        assert_eq!(
            signal_of(&args(&["log", "--message", "at {}"]))
                .unwrap()
                .data,
            json!({"message": "at {}"})
        );
        assert_eq!(
            signal_of(&args(&["stop-snapshot"])).unwrap().data,
            json!({"type": "incremental"})
        );
        // What the relay reads back is what was asked.
        let read = s.action().unwrap();
        assert!(matches!(
            read,
            crate::source::signal::Action::ExecuteSnapshot { .. }
        ));
    }
}
