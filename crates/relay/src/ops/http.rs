//! `/metrics` (Prometheus text format), `/health` (the process is alive) and `/ready`
//! (streaming and the broker reachable) on `--metrics-address`.

use crate::metrics::Metrics;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;

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
                if metrics.is_ready() {
                    (StatusCode::OK, "ready\n").into_response()
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "not ready: not streaming or the broker is unreachable\n",
                    )
                        .into_response()
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
