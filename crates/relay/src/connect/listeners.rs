//! Where the REST API listens, as Kafka Connect's `RestServerConfig` says: `listeners`
//! (`http://` and `https://` URLs; an empty host binds every interface), `admin.listeners`
//! (unset: the `/admin` endpoints on every listener; empty: nowhere; URLs: on those alone),
//! TLS from `listeners.https.ssl.*` / `admin.listeners.https.ssl.*` (all or nothing, as Kafka
//! reads a prefix) or else `ssl.*`, and the advertised address (`rest.advertised.*`) that the
//! API reports as the worker's id.
//!
//! An `https` listener without a keystore refuses to start, naming the settings: it never
//! falls back to plain HTTP.

use crate::keystore::SslSettings;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// Which endpoints a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serves {
    /// The API and the `/admin` endpoints (`admin.listeners` unset).
    Everything,
    /// The API without `/admin`.
    Api,
    /// `/admin` alone (a listener of `admin.listeners`).
    Admin,
}

/// One configured listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub scheme: Scheme,
    /// `host:port` to bind (an empty host: every interface).
    pub address: String,
    pub serves: Serves,
}

/// `listeners` (or `--listen`) and `admin.listeners`, parsed.
pub fn configured(
    worker: &BTreeMap<String, String>,
    listen: Option<&str>,
) -> Result<Vec<Listener>, String> {
    let admin = worker.get("admin.listeners").map(|v| v.trim().to_owned());
    let regular = match admin.as_deref() {
        None => Serves::Everything,
        Some(_) => Serves::Api,
    };
    let mut out = Vec::new();
    match (listen, worker.get("listeners")) {
        (Some(listen), _) => out.push(parse("--listen", listen, regular)?),
        (None, Some(list)) => {
            for url in list.split(',').map(str::trim).filter(|u| !u.is_empty()) {
                out.push(parse("listeners", url, regular)?);
            }
            if out.is_empty() {
                return Err("listeners: empty; give at least one URL such as http://:8083".into());
            }
        }
        // Before `listeners`, Connect had rest.host.name and rest.port.
        (None, None) => {
            let host = worker.get("rest.host.name").map_or("", |h| h.trim());
            let port = worker.get("rest.port").map_or("8083", |p| p.trim());
            out.push(parse(
                "rest.port",
                &format!("http://{host}:{port}"),
                regular,
            )?);
        }
    }
    for url in admin
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
    {
        out.push(parse("admin.listeners", url, Serves::Admin)?);
    }
    Ok(out)
}

fn parse(key: &str, url: &str, serves: Serves) -> Result<Listener, String> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (Scheme::Https, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (Scheme::Http, rest)
    } else if key == "--listen" && !url.contains("://") {
        (Scheme::Http, url)
    } else {
        return Err(format!(
            "{key}: {url} is not a listener URL (http://HOST:PORT or https://HOST:PORT)"
        ));
    };
    let rest = rest.trim_end_matches('/');
    let Some((host, port)) = rest.rsplit_once(':') else {
        return Err(format!("{key}: {url} has no port"));
    };
    port.parse::<u16>()
        .map_err(|_| format!("{key}: {url}: {port} is not a port"))?;
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    Ok(Listener {
        scheme,
        address: format!("{host}:{port}"),
        serves,
    })
}

/// The rustls configuration of an `https` listener: its keystore, and for `ssl.client.auth`
/// its truststore, with the protocols and cipher suites `ssl.*` allows.
pub fn tls_config(
    worker: &BTreeMap<String, String>,
    serves: Serves,
) -> Result<Arc<ServerConfig>, String> {
    let prefix = match serves {
        Serves::Admin => "admin.listeners.https.",
        _ => "listeners.https.",
    };
    let ssl = SslSettings::all_or_nothing(worker, prefix);
    let named = |key: &str| format!("{prefix}{key} (or {key})");
    let material = ssl.key_material()?.ok_or_else(|| {
        format!(
            "an https listener needs a keystore: set {} with {}, or ssl.keystore.type=PEM with \
             ssl.keystore.key and ssl.keystore.certificate.chain; it is never served as plain HTTP",
            named("ssl.keystore.location"),
            named("ssl.keystore.password"),
        )
    })?;
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(list) = ssl.get("ssl.cipher.suites") {
        let wanted: Vec<String> = list
            .split(',')
            .map(|s| s.trim().to_ascii_uppercase())
            .filter(|s| !s.is_empty())
            .collect();
        provider
            .cipher_suites
            .retain(|suite| wanted.contains(&java_name(suite)));
        if provider.cipher_suites.is_empty() {
            return Err(format!(
                "ssl.cipher.suites: none of {list} is a suite this TLS stack has ({})",
                rustls::crypto::ring::default_provider()
                    .cipher_suites
                    .iter()
                    .map(java_name)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
    }
    let versions = protocol_versions(&ssl)?;
    let provider = Arc::new(provider);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("ssl.enabled.protocols / ssl.cipher.suites: {e}"))?;
    let client_auth = ssl
        .get("ssl.client.auth")
        .unwrap_or("none")
        .to_ascii_lowercase();
    let builder = match client_auth.as_str() {
        "none" => builder.with_no_client_auth(),
        "requested" | "required" => {
            let trusted = ssl.trusted()?.ok_or_else(|| {
                format!(
                    "ssl.client.auth={client_auth} needs a truststore with the clients' CA: set {} \
                     (and its password), or ssl.truststore.type=PEM with ssl.truststore.certificates",
                    named("ssl.truststore.location")
                )
            })?;
            let mut roots = RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(trusted);
            if added == 0 {
                return Err("ssl.truststore: no usable certificate in it".into());
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if client_auth == "requested" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("ssl.truststore: {e}"))?,
            )
        }
        other => {
            return Err(format!(
                "ssl.client.auth: {other} is not one of none, requested, required"
            ))
        }
    };
    let mut config = builder
        .with_single_cert(material.chain, material.key)
        .map_err(|e| format!("ssl.keystore: the key does not go with the certificate: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A suite's name as Java and Kafka write it (`TLS_AES_128_GCM_SHA256`,
/// `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`).
fn java_name(suite: &rustls::SupportedCipherSuite) -> String {
    let name = suite.suite().as_str().unwrap_or_default();
    name.strip_prefix("TLS13_")
        .map(|rest| format!("TLS_{rest}"))
        .unwrap_or_else(|| name.to_owned())
}

/// `ssl.enabled.protocols` (default `TLSv1.2,TLSv1.3`) up to `ssl.protocol` (default
/// `TLSv1.3`), as Java's SSLContext narrows them; versions before 1.2 are not offered.
fn protocol_versions(ssl: &SslSettings) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let rank = |name: &str| match name.trim().to_ascii_uppercase().as_str() {
        "TLSV1.3" | "TLS" => Some(3),
        "TLSV1.2" => Some(2),
        _ => None,
    };
    let ceiling = match ssl.get("ssl.protocol") {
        None => 3,
        Some(p) => rank(p)
            .ok_or_else(|| format!("ssl.protocol: {p} is not offered (TLSv1.2 and TLSv1.3 are)"))?,
    };
    let enabled = ssl
        .get("ssl.enabled.protocols")
        .unwrap_or("TLSv1.2,TLSv1.3");
    let mut out = Vec::new();
    for name in enabled.split(',') {
        match rank(name) {
            Some(3) if ceiling >= 3 => out.push(&rustls::version::TLS13),
            Some(2) => out.push(&rustls::version::TLS12),
            _ => {}
        }
    }
    out.dedup();
    if out.is_empty() {
        return Err(format!(
            "ssl.enabled.protocols: {enabled} (with ssl.protocol) leaves no protocol this TLS stack offers (TLSv1.2, TLSv1.3)"
        ));
    }
    Ok(out)
}

/// A TLS listener for `axum::serve`: connections are accepted and their handshakes run
/// apart (each with a time limit), so a slow or silent client holds up no other.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = tcp.accept() => accepted,
                    () = tx.closed() => return,
                };
                let (stream, peer) = match accepted {
                    Ok(connection) => connection,
                    Err(e) => {
                        tracing::warn!("REST listener {local}: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// The worker's id as the API reports it (`worker_id` in statuses): Connect's advertised
/// URL's `host:port`, from `rest.advertised.host.name`, `rest.advertised.port` and
/// `rest.advertised.listener` (which listener's scheme and port), else the bound address.
pub fn advertised(worker: &BTreeMap<String, String>, bound: &[(Listener, SocketAddr)]) -> String {
    let wanted = worker
        .get("rest.advertised.listener")
        .map(|l| l.trim().to_ascii_lowercase());
    let chosen = bound
        .iter()
        .filter(|(l, _)| l.serves != Serves::Admin)
        .find(|(l, _)| match wanted.as_deref() {
            Some("https") => l.scheme == Scheme::Https,
            Some("http") => l.scheme == Scheme::Http,
            _ => true,
        })
        .or_else(|| bound.first());
    // A listener on every address (Connect's usual `listeners=http://:8083`) is advertised
    // under the host's name, as Connect advertises it: each worker of a cluster is told
    // apart by its id.
    let (host, port) = match chosen {
        Some((_, addr)) if addr.ip().is_unspecified() => (host_name(), addr.port()),
        Some((_, addr)) => (addr.ip().to_string(), addr.port()),
        None => (host_name(), 8083),
    };
    let host = worker
        .get("rest.advertised.host.name")
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or(host);
    let port = worker
        .get("rest.advertised.port")
        .and_then(|p| p.trim().parse::<u16>().ok())
        .unwrap_or(port);
    format!("{host}:{port}")
}

/// This host's name (`gethostname`), else `localhost`.
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is passed.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    if ok && !name.is_empty() {
        name
    } else {
        "localhost".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn listeners_and_admin_listeners_as_connect_reads_them() {
        let l = configured(&worker(&[]), None).unwrap();
        assert_eq!(
            l,
            [Listener {
                scheme: Scheme::Http,
                address: "0.0.0.0:8083".into(),
                serves: Serves::Everything
            }]
        );
        let l = configured(
            &worker(&[
                ("listeners", "http://127.0.0.1:8083, https://:8443"),
                ("admin.listeners", "https://localhost:9443"),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!((l[0].scheme, l[0].serves), (Scheme::Http, Serves::Api));
        assert_eq!(l[1].address, "0.0.0.0:8443");
        assert_eq!(
            (l[2].scheme, l[2].address.as_str(), l[2].serves),
            (Scheme::Https, "localhost:9443", Serves::Admin)
        );
        // admin.listeners empty: the admin endpoints are served nowhere.
        let l = configured(&worker(&[("admin.listeners", "")]), None).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].serves, Serves::Api);
        // --listen wins over listeners.
        let l = configured(
            &worker(&[("listeners", "https://:8443")]),
            Some("127.0.0.1:0"),
        )
        .unwrap();
        assert_eq!(
            (l[0].scheme, l[0].address.as_str()),
            (Scheme::Http, "127.0.0.1:0")
        );
        let err = configured(&worker(&[("listeners", "ftp://:21")]), None).unwrap_err();
        assert!(err.starts_with("listeners: ftp://:21"), "{err}");
    }

    #[test]
    fn an_https_listener_without_a_keystore_names_the_settings() {
        let err = tls_config(
            &worker(&[("listeners", "https://:8443")]),
            Serves::Everything,
        )
        .unwrap_err();
        assert!(
            err.contains("listeners.https.ssl.keystore.location (or ssl.keystore.location)")
                && err.contains("never served as plain HTTP"),
            "{err}"
        );
        let err = tls_config(&worker(&[]), Serves::Admin).unwrap_err();
        assert!(
            err.contains("admin.listeners.https.ssl.keystore.location"),
            "{err}"
        );
    }

    #[test]
    fn protocols_and_suites_use_javas_names() {
        let ssl = |pairs: &[(&str, &str)]| SslSettings::plain(&worker(pairs));
        assert_eq!(protocol_versions(&ssl(&[])).unwrap().len(), 2);
        assert_eq!(
            protocol_versions(&ssl(&[("ssl.enabled.protocols", "TLSv1.3")])).unwrap(),
            [&rustls::version::TLS13]
        );
        assert_eq!(
            protocol_versions(&ssl(&[("ssl.protocol", "TLSv1.2")])).unwrap(),
            [&rustls::version::TLS12]
        );
        assert!(
            protocol_versions(&ssl(&[("ssl.enabled.protocols", "TLSv1.1")]))
                .unwrap_err()
                .contains("TLSv1.1")
        );
        let names: Vec<String> = rustls::crypto::ring::default_provider()
            .cipher_suites
            .iter()
            .map(java_name)
            .collect();
        assert!(
            names.contains(&"TLS_AES_128_GCM_SHA256".to_owned()),
            "{names:?}"
        );
        assert!(
            names.contains(&"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_owned()),
            "{names:?}"
        );
    }

    #[test]
    fn the_advertised_address_is_the_workers_id() {
        let http = Listener {
            scheme: Scheme::Http,
            address: "0.0.0.0:8083".into(),
            serves: Serves::Everything,
        };
        let https = Listener {
            scheme: Scheme::Https,
            ..http.clone()
        };
        let bound = [
            (http, "127.0.0.1:8083".parse().unwrap()),
            (https, "127.0.0.1:8443".parse().unwrap()),
        ];
        assert_eq!(advertised(&worker(&[]), &bound), "127.0.0.1:8083");
        assert_eq!(
            advertised(
                &worker(&[
                    ("rest.advertised.listener", "https"),
                    ("rest.advertised.host.name", "connect-0.connect"),
                ]),
                &bound
            ),
            "connect-0.connect:8443"
        );
        assert_eq!(
            advertised(&worker(&[("rest.advertised.port", "30083")]), &bound),
            "127.0.0.1:30083"
        );
        // Bound to every address: the host's name, not 0.0.0.0.
        let every = [(
            Listener {
                scheme: Scheme::Http,
                address: "0.0.0.0:8083".into(),
                serves: Serves::Everything,
            },
            "0.0.0.0:8083".parse().unwrap(),
        )];
        assert_eq!(
            advertised(&worker(&[]), &every),
            format!("{}:8083", host_name())
        );
        assert!(!host_name().is_empty() && host_name() != "0.0.0.0");
    }
}
