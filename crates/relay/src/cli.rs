//! The `outbox-relay` command line.

use crate::config::{ConfigError, RunOptions, Settings, SourceSettings};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::process::ExitCode;
use tokio::sync::watch;

/// Relays transactional outbox rows from PostgreSQL to Kafka through logical replication
/// (pgoutput), the way Debezium's PostgreSQL connector and Outbox EventRouter do, as one
/// small binary. An LSN is confirmed to PostgreSQL only after Kafka acknowledged every
/// event at or before it: a crash anywhere loses nothing.
#[derive(Debug, Parser)]
#[command(name = "outbox-relay", version, propagate_version = true)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, env = "OUTBOX_RELAY_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Stream outbox rows to Kafka until SIGTERM/SIGINT. Creates the publication, the
    /// replication slot and the topics when missing; resumes from the slot's confirmed position.
    ///
    /// Topic = the template over the routing column (default `<aggregate_type>.events`),
    /// key = aggregate_id, value = payload text (NULL payload: tombstone), headers `id` and
    /// `eventType`. Rows that cannot be routed go to the dead-letter topic.
    Run(RunOptions),

    /// Check that `run` can work with these settings: configuration, PostgreSQL (wal_level,
    /// REPLICATION, table and privileges, publication, slot, free slots) and Kafka (reachable,
    /// topics creatable). Prints what is wrong with the SQL or setting that fixes it; exits 1
    /// when anything blocks `run`.
    Check(RunOptions),

    /// Show the replication slot: active process, confirmed LSN, lag in bytes. Exit codes: 0
    /// the slot exists, 3 no such slot, 1 an error (PostgreSQL unreachable, no privilege), 2 a
    /// bad argument.
    Status(StatusArgs),

    /// Print what `run` would produce from the changes pending in the slot (topic, key,
    /// headers, value; dead letters with their reason) without producing anything or moving
    /// the slot. Reads a slot no relay streams from (stop the relay, or copy the slot with
    /// pg_copy_logical_replication_slot). Exit codes: 0 done, 3 no such slot, 1 an error,
    /// 2 a bad setting.
    Preview(PreviewArgs),

    /// List the dead-letter topic's records, or replay them with the current configuration
    /// (after a fix): `dead-letters list`, `dead-letters replay`.
    DeadLetters(crate::ops::dead_letters::DeadLettersArgs),

    /// Write a Debezium signal to a running relay through the channel its settings enable
    /// (the signal table, the Kafka signal topic, the signal file): `signal execute-snapshot
    /// --table public.outbox [--where SQL] [--blocking]`, `signal stop-snapshot`,
    /// `pause-snapshot`, `resume-snapshot`, `log --message M`. Takes `run`'s options. Exit
    /// codes: 0 written, 1 an error, 2 a bad argument.
    Signal(crate::ops::signal::SignalArgs),

    /// Print the SQL a DBA runs by hand: a least-privilege role (REPLICATION, SELECT on the
    /// outbox only), the outbox table, the publication and the slot.
    SetupSql(SetupSqlArgs),

    /// Probe a running relay's /health (or /ready) endpoint: exit 0 if it answers 200, 1
    /// otherwise. For container HEALTHCHECKs on images without curl.
    Health(HealthArgs),

    /// Run as a Kafka Connect worker: the REST API deploy scripts, UIs and health checks use
    /// (POST /connectors, GET /connectors/{name}/status, pause, resume, restart, delete, …),
    /// each registered Debezium PostgreSQL connector run as a relay pipeline in this process.
    Connect(crate::connect::ConnectArgs),

    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout, e.g.
    /// `outbox-relay completions bash > /etc/bash_completion.d/outbox-relay`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },

    /// Print the man page (roff) to stdout, e.g. `outbox-relay man > outbox-relay.1`.
    Man,
}

#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// The relay's --metrics-address.
    #[arg(
        long,
        env = "OUTBOX_RELAY_METRICS_ADDRESS",
        value_name = "HOST:PORT",
        default_value = crate::config::defaults::METRICS_ADDRESS
    )]
    pub address: String,
    /// Probe /ready (streaming or standing by for the slot, with PostgreSQL and the broker
    /// reachable) instead of /health.
    #[arg(long)]
    pub ready: bool,
}

#[derive(Debug, clap::Args)]
pub struct PreviewArgs {
    #[command(flatten)]
    pub run: RunOptions,
    /// Show at most this many events (and dead letters).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
    /// `json`: one JSON object per record (lsn, commit_lsn, topic, partition, key, headers,
    /// value, timestamp_ms, dead_letter).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// PostgreSQL connection URL.
    #[arg(
        long,
        env = "OUTBOX_RELAY_POSTGRES_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub postgres_url: crate::secret::Secret,
    /// Replication slot to show.
    #[arg(
        long,
        env = "OUTBOX_RELAY_SLOT",
        value_name = "NAME",
        default_value = "outbox_relay"
    )]
    pub slot: String,
    /// `json`: one JSON object (slot, exists, plugin, database, active, active_pid,
    /// confirmed_lsn, server_wal_lsn, lag_bytes, wal_status, failover_ready, failover_missing).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

/// `status`: no such slot.
const EXIT_NO_SLOT: u8 = 3;

#[derive(Debug, clap::Args)]
pub struct SetupSqlArgs {
    /// Outbox table, SCHEMA.TABLE.
    #[arg(
        long,
        env = "OUTBOX_RELAY_TABLE",
        value_name = "SCHEMA.TABLE",
        default_value = "public.outbox"
    )]
    pub table: String,
    /// Replication slot to create.
    #[arg(
        long,
        env = "OUTBOX_RELAY_SLOT",
        value_name = "NAME",
        default_value = "outbox_relay"
    )]
    pub slot: String,
    /// Publication to create.
    #[arg(
        long,
        env = "OUTBOX_RELAY_PUBLICATION",
        value_name = "NAME",
        default_value = "outbox_relay"
    )]
    pub publication: String,
    /// Login role to create for the relay.
    #[arg(long, value_name = "NAME", default_value = "outbox_relay")]
    pub role: String,
    /// Also grant what `run --cleanup` needs: DELETE on the outbox table, and the ledger of
    /// relayed rows it keeps.
    #[arg(long)]
    pub cleanup: bool,
}

/// The command line: `signal`'s `--table` names the tables to snapshot, as a signal's
/// `data-collections`, so the outbox table option is `--outbox-table` there.
pub fn command_line() -> clap::Command {
    Cli::command().mut_subcommand("signal", |signal| {
        signal.mut_arg("table", |a| a.long("outbox-table"))
    })
}

/// Entry point of the binary; returns the process exit code.
pub fn main() -> ExitCode {
    // One TLS crypto provider for every rustls user in the process (both the SQL and the
    // replication connection): ring, the only one in the dependency graph (deny.toml).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let command = command_line().version(version());
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    init_logging(cli.log_format);
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
    };
    match cli.command {
        Command::Check(options) => {
            let settings = match settings(options) {
                Ok(s) => s,
                Err(e) => {
                    println!("FAIL configuration: {e}");
                    return ExitCode::from(2);
                }
            };
            if runtime().block_on(crate::ops::check::check(&settings)) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Health(args) => {
            let path = if args.ready { "/ready" } else { "/health" };
            match crate::ops::http::probe(&args.address, path) {
                Ok(200) => {
                    println!("{path} at {}: 200", args.address);
                    ExitCode::SUCCESS
                }
                Ok(status) => {
                    println!("{path} at {}: {status}", args.address);
                    ExitCode::FAILURE
                }
                Err(e) => {
                    println!("{path} at {}: {e}", args.address);
                    ExitCode::FAILURE
                }
            }
        }
        Command::Preview(args) => {
            let settings = match settings(args.run) {
                Ok(s) => s,
                Err(e) => {
                    report_error(&e);
                    return ExitCode::from(2);
                }
            };
            let json = args.output == OutputFormat::Json;
            match runtime().block_on(crate::ops::preview::preview(&settings, args.limit, json)) {
                Ok(Some(found)) => {
                    if !json {
                        println!(
                            "{} event(s), {} dead letter(s) pending (nothing produced, the slot did not move)",
                            found.events, found.dead_letters
                        );
                    }
                    ExitCode::SUCCESS
                }
                Ok(None) => {
                    let slot = settings.cdc().map_or("", |c| c.slot.as_str());
                    println!("slot {slot} does not exist: nothing is pending");
                    ExitCode::from(EXIT_NO_SLOT)
                }
                Err(e) => failed(&e),
            }
        }
        Command::Status(args) => {
            match runtime().block_on(crate::ops::status::status(
                args.postgres_url.expose(),
                &args.slot,
                args.output == OutputFormat::Json,
            )) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(EXIT_NO_SLOT),
                Err(e) => {
                    if args.output == OutputFormat::Json
                        && !matches!(e, crate::error::RelayError::Misconfiguration(_))
                    {
                        println!(
                            "{}",
                            serde_json::json!({ "slot": args.slot, "error": e.to_string() })
                        );
                    }
                    failed(&e)
                }
            }
        }
        Command::Signal(args) => {
            let signal = match crate::ops::signal::signal_of(&args) {
                Ok(s) => s,
                Err(why) => {
                    report_error(&why);
                    return ExitCode::from(2);
                }
            };
            let settings = match settings(args.run) {
                Ok(s) => s,
                Err(e) => {
                    report_error(&e);
                    return ExitCode::from(2);
                }
            };
            match runtime().block_on(crate::ops::signal::write(&settings, &signal, args.channel)) {
                Ok(place) => {
                    println!(
                        "signal {} ({}) written to {place}",
                        signal.id.as_deref().unwrap_or(""),
                        signal.kind
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => failed(&e),
            }
        }
        Command::SetupSql(args) => {
            let table = match outbox_router::TableName::parse(&args.table) {
                Ok(t) => t,
                Err(e) => {
                    report_error(&format_args!("table: {e}"));
                    return ExitCode::from(2);
                }
            };
            match crate::ops::setup_sql::setup_sql(
                &table,
                &args.publication,
                &args.slot,
                &args.role,
                args.cleanup,
            ) {
                Ok(sql) => {
                    print!("{sql}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    report_error(&e);
                    ExitCode::from(2)
                }
            }
        }
        Command::DeadLetters(args) => {
            let settings = match settings(args.run_options()) {
                Ok(s) => s,
                Err(e) => {
                    report_error(&format_args!("invalid configuration: {e}"));
                    return ExitCode::from(2);
                }
            };
            crate::ops::dead_letters::main(args, settings, runtime()).unwrap_or_else(|e| {
                report_error(&e);
                match e {
                    crate::error::RelayError::Misconfiguration(_) => ExitCode::from(2),
                    _ => ExitCode::FAILURE,
                }
            })
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command_line(), "outbox-relay", &mut script);
            write_stdout(&script)
        }
        Command::Man => {
            let mut page = Vec::new();
            let command = command_line().version(version());
            match clap_mangen::Man::new(command).render(&mut page) {
                Ok(()) => write_stdout(&page),
                Err(e) => {
                    report_error(&format_args!("rendering the man page: {e}"));
                    ExitCode::FAILURE
                }
            }
        }
        Command::Connect(args) => runtime().block_on(async {
            let (stop_tx, stop_rx) = watch::channel(false);
            tokio::spawn(async move {
                wait_for_signal().await;
                tracing::info!("signal received: stopping the connectors");
                let _ = stop_tx.send(true);
            });
            crate::connect::run(args, stop_rx).await
        }),
        Command::Run(options) => {
            let settings = match settings(options) {
                Ok(s) => s,
                Err(e) => {
                    report_error(&format_args!("invalid configuration: {e}"));
                    return ExitCode::from(2);
                }
            };
            skip_cyrus_plugins_unless_gssapi(&settings.kafka);
            // One thread drives the pipeline and the tasks it spawns (the replication
            // reader, the metrics endpoint): a message read from PostgreSQL reaches the
            // stage that routes it without waking another thread (librdkafka keeps its own).
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime")
                .block_on(run(settings))
        }
    }
}

/// librdkafka starts Cyrus SASL with its first client, and Cyrus loads every plugin installed
/// on the host (Debian's libsasl2-modules has ten, with Kerberos and Berkeley DB behind them:
/// about 2 MiB of the relay's memory) although librdkafka takes only GSSAPI from it. Without
/// GSSAPI in the configuration, Cyrus is pointed at no plugins (SASL_PATH=/dev/null, not a
/// directory). A SASL_PATH set by the user is left alone. Called before the runtime starts:
/// no other thread reads the environment yet.
fn skip_cyrus_plugins_unless_gssapi(kafka: &crate::config::KafkaSettings) {
    if !kafka.uses_gssapi() && std::env::var_os("SASL_PATH").is_none() {
        std::env::set_var("SASL_PATH", "/dev/null");
    }
}

/// Whether logs (and so error reports) are JSON lines.
static JSON_LOGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Reports an error that ends the command on stderr: `error: …` for a person, or with
/// `--log-format json` one JSON log line like every other (no stray plain-text line).
/// A command's failure, reported: exit code 2 for a bad setting, 1 otherwise.
fn failed(error: &crate::error::RelayError) -> ExitCode {
    report_error(error);
    match error {
        crate::error::RelayError::Misconfiguration(_) => ExitCode::from(2),
        _ => ExitCode::FAILURE,
    }
}

pub(crate) fn report_error(error: &dyn std::fmt::Display) {
    if JSON_LOGS.load(std::sync::atomic::Ordering::Relaxed) {
        // Written directly, not through the log filter: RUST_LOG must not hide why it stopped.
        let line = serde_json::json!({
            "level": "ERROR",
            "message": error.to_string(),
            "target": "outbox_relay_core::cli",
        });
        eprintln!("{line}");
    } else {
        eprintln!("error: {error}");
    }
}

/// Writes generated output; a closed pipe (`| head`) is not an error worth a panic.
fn write_stdout(bytes: &[u8]) -> ExitCode {
    use std::io::Write;
    match std::io::stdout().write_all(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            report_error(&e);
            ExitCode::FAILURE
        }
    }
}

/// `--version`: the release, the git commit it was built from, and the librdkafka it runs.
fn version() -> &'static str {
    let (_, librdkafka) = rdkafka::util::get_rdkafka_version();
    Box::leak(
        format!(
            "{} (git {}, librdkafka {librdkafka})",
            env!("CARGO_PKG_VERSION"),
            env!("OUTBOX_RELAY_GIT_SHA")
        )
        .into_boxed_str(),
    )
}

/// The options, their `--config` file and their `--debezium-config` preset, resolved.
pub fn settings(options: RunOptions) -> Result<Settings, ConfigError> {
    let options = options.merge_file()?;
    let preset = match &options.debezium_config {
        Some(path) => Some(crate::debezium::load(
            path,
            options.worker_config.as_deref(),
        )?),
        None => None,
    };
    Settings::resolve(options, preset)
}

async fn run(settings: Settings) -> ExitCode {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received: finishing in-flight deliveries");
        let _ = stop_tx.send(true);
    });
    let slot = match &settings.source {
        SourceSettings::Cdc(cdc) => Some(cdc.slot.as_str()),
        SourceSettings::Polling(_) => None,
    };
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::for_slot(slot));
    metrics.configure(&settings, true);
    match crate::ops::http::serve(&settings.metrics_address, metrics.clone() as _).await {
        Ok(address) => tracing::info!(%address, "serving /metrics, /health and /ready"),
        Err(e) => {
            report_error(&e);
            return ExitCode::from(2);
        }
    }
    if let Some(preset) = &settings.preset {
        log_preset(preset);
    }
    let _probe = match crate::ops::http::spawn_broker_probe(&settings.kafka, metrics.clone()) {
        Ok(probe) => crate::supervisor::AbortOnDrop(probe),
        Err(e) => {
            report_error(&e);
            return ExitCode::FAILURE;
        }
    };
    match crate::supervisor::relay(&settings, metrics, Default::default(), stop_rx).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !JSON_LOGS.load(std::sync::atomic::Ordering::Relaxed) {
                tracing::error!("{e}");
            }
            report_error(&e);
            ExitCode::FAILURE
        }
    }
}

fn log_preset(preset: &crate::config::PresetSummary) {
    tracing::info!(
        connector = preset.connector_name.as_deref().unwrap_or("(unnamed)"),
        "running Debezium connector configuration"
    );
    for note in &preset.notes {
        tracing::info!("in effect: {note}");
    }
    if !preset.unknown_options.is_empty() {
        tracing::warn!(
            options = %preset.unknown_options.join(", "),
            "these connector options are not known to outbox-relay and were ignored; check their spelling, or see docs/reference/options.md, \"Debezium connector options\""
        );
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let mut requested = std::env::var("RUST_LOG").unwrap_or_else(|_| "info,rdkafka=warn".into());
    if tracing_subscriber::EnvFilter::try_new(&requested).is_err() {
        requested = "info".into();
    }
    // pgwire-replication logs each session's end at ERROR; the relay reports every such
    // error itself, with what it does about it, so the library's copy is left out unless
    // asked for by name.
    if !requested.contains("pgwire_replication") {
        requested.push_str(",pgwire_replication=off");
    }
    // The levels `outbox-relay connect`'s /admin/loggers can change while running.
    let filter = crate::ops::loggers::layer(&requested);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(|| crate::secret::LogWriter)
        .with_ansi(std::io::stderr().is_terminal());
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry.with(fmt).init(),
        LogFormat::Json => {
            JSON_LOGS.store(true, std::sync::atomic::Ordering::Relaxed);
            registry.with(fmt.json().flatten_event(true)).init()
        }
    }
}
