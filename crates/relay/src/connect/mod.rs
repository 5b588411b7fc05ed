//! `outbox-relay connect`: a Kafka Connect worker as far as deploy scripts, UIs and health
//! checks can tell. It speaks the part of Connect's REST API they use and runs each
//! registered Debezium PostgreSQL connector (with its Outbox EventRouter) as a relay
//! pipeline in this process: several connectors, several slots, one process.

pub mod herder;
pub mod rest;
pub mod store;

use crate::debezium::{read_file, RawConfig};
use herder::{Herder, Target};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct ConnectArgs {
    /// The Kafka Connect worker configuration (`connect-distributed.properties` or
    /// `connect-standalone.properties`): bootstrap.servers, converters, producer.*,
    /// config providers, listeners.
    #[arg(long, value_name = "FILE")]
    pub worker_config: Option<PathBuf>,
    /// Where the REST API listens [default: the worker's `listeners`, else 0.0.0.0:8083].
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// Where /metrics (every connector's series, labelled by slot), /health and /ready (every
    /// started connector streaming or standing by, none failed) are served.
    #[arg(long, value_name = "HOST:PORT", default_value = crate::config::defaults::METRICS_ADDRESS)]
    pub metrics_address: String,
    /// Connector configurations (JSON as POSTed to Connect, or .properties) to run from the
    /// start, as `connect-standalone worker.properties connector.properties…` does.
    #[arg(value_name = "CONNECTOR_CONFIG")]
    pub connectors: Vec<PathBuf>,
}

/// The address the worker's `listeners` (first one) or `rest.port` name.
fn worker_listen(worker: &RawConfig) -> Option<String> {
    if let Some(listeners) = worker.entries.get("listeners") {
        let first = listeners.split(',').next()?.trim();
        let address = first
            .strip_prefix("http://")
            .or_else(|| first.strip_prefix("https://"))
            .unwrap_or(first);
        let (host, port) = address.rsplit_once(':')?;
        let host = if host.is_empty() { "0.0.0.0" } else { host };
        return Some(format!("{host}:{port}"));
    }
    worker
        .entries
        .get("rest.port")
        .map(|port| format!("0.0.0.0:{}", port.trim()))
}

/// Serves until `shutdown` turns true, then stops every connector.
pub async fn run(args: ConnectArgs, mut shutdown: tokio::sync::watch::Receiver<bool>) -> ExitCode {
    let worker = match &args.worker_config {
        Some(path) => match read_file(path) {
            Ok(w) => Some(w),
            Err(e) => {
                eprintln!("error: worker-config: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let listen = args
        .listen
        .clone()
        .or_else(|| worker.as_ref().and_then(worker_listen))
        .unwrap_or_else(|| "0.0.0.0:8083".into());
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: listen {listen}: {e}");
            return ExitCode::from(2);
        }
    };
    let bound = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or(listen);
    let store = match &worker {
        Some(w) => match store::ConfigTopic::open(w).await {
            Ok(store) => store,
            Err(e) => {
                eprintln!("error: worker-config: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let herder = Arc::new(Herder::new(worker, bound.clone(), store));
    match crate::ops::http::serve(&args.metrics_address, herder.clone() as _).await {
        Ok(address) => tracing::info!(%address, "serving /metrics, /health and /ready"),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    match herder.restore().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(connectors = n, "restored from the config topic"),
        Err(e) => {
            eprintln!("error: reading the config topic: {e}");
            return ExitCode::FAILURE;
        }
    }
    for path in &args.connectors {
        let created = read_file(path).and_then(|raw| {
            let name = raw
                .name
                .clone()
                .or_else(|| raw.entries.get("name").cloned())
                .ok_or_else(|| format!("{}: the connector has no name", path.display()))?;
            herder
                .create(&name, raw.entries, Target::Started)
                .map_err(|r| format!("{}: {}", path.display(), r.message))
        });
        if let Err(e) = created {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    tracing::info!(address = %bound, "Kafka Connect REST API listening");
    let app = rest::routes(herder.clone());
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        })
        .await;
    herder.shutdown().await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: REST API: {e}");
            ExitCode::FAILURE
        }
    }
}
