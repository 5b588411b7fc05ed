//! What an operator probes on a running relay: its metrics address (from its log), plain
//! HTTP GETs of /metrics, /health and /ready, and one metric's value; POSTs to a registry.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// `GET path` on `address`: (status, body).
pub fn get(address: &str, path: &str) -> (u16, String) {
    exchange(
        address,
        &format!("GET {path} HTTP/1.0\r\nHost: relay\r\n\r\n"),
    )
}

/// `POST path` with `body` of `content_type` on `address`: (status, body).
pub fn post(address: &str, path: &str, content_type: &str, body: &str) -> (u16, String) {
    exchange(
        address,
        &format!(
            "POST {path} HTTP/1.0\r\nHost: relay\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// Sends one HTTP/1.0 request and reads the answer to its end: (status, body).
fn exchange(address: &str, request: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Polls `GET path` until it answers `want`; panics after `timeout`.
pub async fn wait_status(address: &str, path: &str, want: u16, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while get(address, path).0 != want {
        assert!(
            Instant::now() < deadline,
            "{path} at {address} never answered {want}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The address the relay logged for /metrics (it may have picked a free port).
pub fn metrics_address(relay: &crate::RelayProcess) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = relay.log();
        if let Some(line) = log.lines().find(|l| l.contains("serving /metrics")) {
            return line
                .split("address=")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no metrics address in the log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of the sample `name` (without labels) in a Prometheus text body.
pub fn metric(body: &str, name: &str) -> f64 {
    metric_opt(body, name).unwrap_or_else(|| panic!("{name} not in:\n{body}"))
}

/// The sum of the series `query` selects: `name` or `name{label="value",…}`, where the
/// labels given must be among the series' own (others, like `slot`, may be there too).
pub fn metric_opt(body: &str, query: &str) -> Option<f64> {
    let (name, wanted) = split_series(query);
    let mut found = None;
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (series_name, labels) = split_series(series);
        if series_name == name && wanted.iter().all(|w| labels.contains(w)) {
            *found.get_or_insert(0.0) += value.parse::<f64>().ok()?;
        }
    }
    found
}

fn split_series(series: &str) -> (&str, Vec<&str>) {
    match series.split_once('{') {
        Some((name, labels)) => (
            name,
            labels
                .trim_end_matches('}')
                .split(',')
                .filter(|l| !l.is_empty())
                .collect(),
        ),
        None => (series, Vec::new()),
    }
}
