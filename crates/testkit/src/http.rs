//! What an operator probes on a running relay: its metrics address (from its log), plain
//! HTTP GETs of /metrics, /health and /ready, and one metric's value.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// `GET path` on `address`: (status, body).
pub fn get(address: &str, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: relay\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
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
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("{name} not in:\n{body}"))
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}
