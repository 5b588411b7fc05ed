//! The `outbox-relay` command line.

use crate::config::{RunOptions, Settings};
use clap::{Parser, Subcommand, ValueEnum};
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
}

/// Entry point of the binary; returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Command::Run(options) => {
            let settings = match Settings::resolve(options) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: invalid configuration: {e}");
                    return ExitCode::from(2);
                }
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio runtime");
            runtime.block_on(run(settings))
        }
    }
}

async fn run(settings: Settings) -> ExitCode {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received: finishing in-flight deliveries");
        let _ = stop_tx.send(true);
    });
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::new());
    match crate::http::serve(&settings.metrics_address, metrics.clone()).await {
        Ok(address) => tracing::info!(%address, "serving /metrics, /health and /ready"),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    match crate::pipeline::run(settings, metrics, stop_rx).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
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
    use tracing_subscriber::EnvFilter;
    let requested = std::env::var("RUST_LOG").unwrap_or_else(|_| "info,rdkafka=warn".into());
    let mut filter = EnvFilter::try_new(&requested).unwrap_or_else(|_| EnvFilter::new("info"));
    // pgwire-replication logs each session's end at ERROR; the relay reports every such
    // error itself, with what it does about it, so the library's copy is left out unless
    // asked for by name.
    if !requested.contains("pgwire_replication") {
        filter = filter.add_directive("pgwire_replication=off".parse().expect("static directive"));
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
