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

/// What the metrics address shows: one relay's metrics, or a `connect` worker's connectors.
pub trait Observed: Send + Sync + 'static {
    /// `/metrics`, OpenMetrics text.
    fn metrics_text(&self) -> String;
    /// `/ready`: 200 with the first text, 503 with the second.
    fn ready(&self) -> Result<String, String>;
}

impl Observed for Metrics {
    fn metrics_text(&self) -> String {
        self.encode()
    }

    fn ready(&self) -> Result<String, String> {
        self.readiness()
    }
}

/// Several relays' OpenMetrics texts as one: each family once (its `HELP`/`TYPE` lines from
/// the first text that has it), the samples of all of them, identical samples (the build's)
/// once, one `# EOF`.
pub fn merge_openmetrics<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    // (family name, HELP/TYPE/UNIT lines, samples), in the order first seen.
    let mut families: Vec<(&str, Vec<&str>, Vec<&str>)> = Vec::new();
    for text in texts {
        let mut current: Option<usize> = None;
        for line in text.lines().filter(|l| !l.is_empty() && *l != "# EOF") {
            let family = match line.strip_prefix("# ") {
                Some(meta) => meta.split_whitespace().nth(1).unwrap_or_default(),
                None => {
                    if let Some(i) = current {
                        let (_, _, samples) = &mut families[i];
                        if !samples.contains(&line) {
                            samples.push(line);
                        }
                    }
                    continue;
                }
            };
            let i = match families.iter().position(|(n, _, _)| *n == family) {
                Some(i) => i,
                None => {
                    families.push((family, Vec::new(), Vec::new()));
                    families.len() - 1
                }
            };
            if !families[i].1.contains(&line) {
                families[i].1.push(line);
            }
            current = Some(i);
        }
    }
    let mut out = String::new();
    for (_, meta, samples) in &families {
        for line in meta.iter().chain(samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

/// Binds now (so a taken port is reported at start-up) and serves in the background.
pub async fn serve(address: &str, observed: Arc<dyn Observed>) -> anyhow::Result<SocketAddr> {
    let metrics = observed;
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
                        m.metrics_text(),
                    )
                }
            }),
        )
        .route("/health", get(|| async { "ok\n" }))
        .route(
            "/ready",
            get(move || async move {
                match metrics.ready() {
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
            RelayError::misconfigured(format!(
                "Kafka admin client settings rejected: {}",
                crate::config::client_config_error(&e)
            ))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two relays' metrics as one valid exposition: each family once, both slots' samples,
    /// the build's sample once.
    #[test]
    fn two_relays_metrics_merge_into_one_exposition() {
        let a = Metrics::for_slot(Some("a"));
        let b = Metrics::for_slot(Some("b"));
        a.reconnects.inc();
        let merged = merge_openmetrics([a.encode().as_str(), b.encode().as_str()]);
        let count = |needle: &str| merged.lines().filter(|l| l.starts_with(needle)).count();
        assert_eq!(
            count("# TYPE outbox_relay_reconnects counter"),
            1,
            "{merged}"
        );
        assert_eq!(
            count("outbox_relay_reconnects_total{slot=\"a\"} 1"),
            1,
            "{merged}"
        );
        assert_eq!(
            count("outbox_relay_reconnects_total{slot=\"b\"} 0"),
            1,
            "{merged}"
        );
        assert_eq!(count("outbox_relay_build_info{"), 1, "{merged}");
        assert_eq!(count("# EOF"), 1);
        assert!(merged.ends_with("# EOF\n"));
        // Every sample follows its family's TYPE line.
        let type_at = merged.find("# TYPE outbox_relay_reconnects").unwrap();
        let sample_at = merged
            .find("outbox_relay_reconnects_total{slot=\"b\"}")
            .unwrap();
        assert!(type_at < sample_at);
    }
}
