//! `/metrics` (Prometheus text format), `/health` (the process is alive) and `/ready`
//! (streaming or standing by, and the broker reachable) on `--metrics-address`; the broker
//! probe that `/ready` uses.

use crate::config::{ClientRole, KafkaSettings};
use crate::error::RelayError;
use crate::metrics::Metrics;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Binds now (so a taken port is reported at start-up) and serves in the background.
pub async fn serve(address: &str, metrics: Arc<Metrics>) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(address).await.map_err(|e| {
        anyhow::anyhow!("metrics-address {address}: cannot listen ({e}); choose another HOST:PORT")
    })?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route(
            "/metrics",
            get({
                let m = metrics.clone();
                move || async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        m.encode(),
                    )
                }
            }),
        )
        .route("/health", get(|| async { "ok\n" }))
        .route(
            "/ready",
            get(move || async move {
                match metrics.readiness() {
                    Ok(text) => (StatusCode::OK, text).into_response(),
                    Err(text) => (StatusCode::SERVICE_UNAVAILABLE, text).into_response(),
                }
            }),
        );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("metrics endpoint stopped: {e}");
        }
    });
    Ok(bound)
}

/// Asks the broker for metadata every few seconds (every second while it does not answer)
/// and publishes the answer for `/ready`, for the life of the process: a standby probes too.
pub fn spawn_broker_probe(
    kafka: &KafkaSettings,
    metrics: Arc<Metrics>,
) -> Result<tokio::task::JoinHandle<()>, RelayError> {
    let admin: AdminClient<DefaultClientContext> = kafka
        .client_config(ClientRole::Admin)
        .create()
        .map_err(|e| {
            RelayError::misconfigured(format!("Kafka admin client settings rejected: {e}"))
        })?;
    let admin = Arc::new(admin);
    Ok(tokio::spawn(async move {
        loop {
            let client = admin.clone();
            let ok = tokio::task::spawn_blocking(move || {
                client
                    .inner()
                    .fetch_metadata(None, Duration::from_secs(3))
                    .is_ok()
            })
            .await
            .unwrap_or(false);
            metrics.set_broker_reachable(ok);
            tokio::time::sleep(Duration::from_secs(if ok { 5 } else { 1 })).await;
        }
    }))
}

/// `GET path` on a relay's metrics address: the HTTP status (`outbox-relay health`).
pub fn probe(address: &str, path: &str) -> std::io::Result<u16> {
    use std::io::{Read, Write};
    use std::net::ToSocketAddrs;
    let target = address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{address} names no address")))?;
    let timeout = std::time::Duration::from_secs(3);
    let mut stream = std::net::TcpStream::connect_timeout(&target, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP response"))
}
