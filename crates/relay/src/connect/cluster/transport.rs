//! The group membership's connection to a broker, secured as the worker's own clients are
//! (`security.protocol`, `ssl.*`, `sasl.*`): TLS through rustls with the worker's trust and
//! key stores, then SASL PLAIN or SCRAM-SHA-256/512 (Kafka's SaslHandshake and
//! SaslAuthenticate). GSSAPI and OAUTHBEARER are not spoken here: such a worker is told why.
//!
//! SCRAM (RFC 5802) is written out here, on ring's HMAC and PBKDF2: Kafka's exchange puts
//! the user name in the client's first message, which PostgreSQL's SCRAM (the only other in
//! the dependency tree) leaves empty.

use crate::keystore::SslSettings;
use base64::Engine;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};

/// A byte stream to a broker, plain or under TLS.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// How the worker's group membership reaches the brokers.
#[derive(Clone, Default)]
pub struct Security {
    tls: Option<Arc<rustls::ClientConfig>>,
    pub sasl: Option<Sasl>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl.as_ref().map(|s| s.mechanism))
            .finish()
    }
}

#[derive(Clone)]
pub struct Sasl {
    pub mechanism: Mechanism,
    user: String,
    password: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Sasl {
    pub fn credentials(&self) -> (&str, &str) {
        (&self.user, &self.password)
    }
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

impl Security {
    /// From the worker's settings (`worker`) and its own client's (`client`, where the JAAS
    /// configuration became `sasl.username` / `sasl.password`). `Err`: why the membership
    /// cannot be held over them.
    pub fn of_worker(
        worker: &BTreeMap<String, String>,
        client: &rdkafka::ClientConfig,
    ) -> Result<Self, String> {
        let protocol = worker
            .get("security.protocol")
            .map(|p| p.trim().to_ascii_uppercase())
            .unwrap_or_else(|| "PLAINTEXT".into());
        let (tls, sasl) = match protocol.as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => return Err(format!("security.protocol: {other} is not one Kafka knows")),
        };
        let tls = if tls {
            Some(Arc::new(tls_config(&SslSettings::plain(worker))?))
        } else {
            None
        };
        let sasl = if sasl {
            let mechanism = match worker
                .get("sasl.mechanism")
                .map(|m| m.trim().to_ascii_uppercase())
                .as_deref()
                .unwrap_or("GSSAPI")
            {
                "PLAIN" => Mechanism::Plain,
                "SCRAM-SHA-256" => Mechanism::ScramSha256,
                "SCRAM-SHA-512" => Mechanism::ScramSha512,
                other => {
                    return Err(format!(
                        "sasl.mechanism={other}: the group membership of outbox-relay's workers speaks PLAIN and \
                         SCRAM-SHA-256/512"
                    ))
                }
            };
            let (Some(user), Some(password)) =
                (client.get("sasl.username"), client.get("sasl.password"))
            else {
                return Err(
                    "sasl.jaas.config: no username and password for the group membership".into(),
                );
            };
            Some(Sasl {
                mechanism,
                user: user.to_owned(),
                password: password.to_owned(),
            })
        } else {
            None
        };
        Ok(Self { tls, sasl })
    }

    /// A connection to `address` (`host:port`), under TLS when the worker's protocol says so.
    pub async fn connect(&self, address: &str) -> Result<Box<dyn Stream>, String> {
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| format!("connecting to {address}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let host = address
            .rsplit_once(':')
            .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']'))
            .unwrap_or(address);
        let name = rustls::pki_types::ServerName::try_from(host.to_owned())
            .map_err(|e| format!("{address}: {e}"))?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| {
                format!("TLS with {address}: {e} (check the worker's ssl.truststore.* settings)")
            })?;
        Ok(Box::new(stream))
    }
}

/// The rustls configuration of the worker's `ssl.*`: its truststore (else the system's CA
/// bundle), its keystore for mutual TLS, and the host name checked unless
/// `ssl.endpoint.identification.algorithm` is empty, as Java's clients do.
fn tls_config(ssl: &SslSettings) -> Result<rustls::ClientConfig, String> {
    let trusted = match ssl.trusted()? {
        Some(t) => t,
        None => system_roots()?,
    };
    let key = "ssl.endpoint.identification.algorithm";
    let verify_host = !ssl.contains(key) || ssl.get(key).is_some();
    crate::tls::kafka_client_config(trusted, ssl.key_material()?, verify_host)
}

fn system_roots() -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    for bundle in [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ] {
        if let Ok(iter) = rustls::pki_types::CertificateDer::pem_file_iter(bundle) {
            let certs: Vec<_> = iter.filter_map(Result::ok).collect();
            if !certs.is_empty() {
                return Ok(certs);
            }
        }
    }
    Err("ssl.truststore.location: not set, and no system CA bundle found".into())
}

/// One SCRAM exchange (RFC 5802) as Kafka's `ScramSaslClient` runs it: no channel binding,
/// the user name in the first message.
pub struct Scram {
    mechanism: Mechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    expected_server_signature: Option<Vec<u8>>,
}

impl Scram {
    pub fn new(mechanism: Mechanism, user: &str, password: &str, nonce: String) -> Self {
        // saslname: ',' and '=' escaped.
        let user = user.replace('=', "=3D").replace(',', "=2C");
        Self {
            mechanism,
            password: password.to_owned(),
            client_first_bare: format!("n={user},r={nonce}"),
            nonce,
            expected_server_signature: None,
        }
    }

    pub fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// The client's final message for the server's first.
    pub fn client_final(&mut self, server_first: &str) -> Result<String, String> {
        let field = |name: &str| {
            server_first
                .split(',')
                .find_map(|f| f.strip_prefix(name))
                .ok_or_else(|| format!("SCRAM: the server's first message has no {name}"))
        };
        let nonce = field("r=")?;
        if !nonce.starts_with(&self.nonce) {
            return Err("SCRAM: the server's nonce does not extend ours".into());
        }
        let salt = base64::engine::general_purpose::STANDARD
            .decode(field("s=")?)
            .map_err(|e| format!("SCRAM: salt: {e}"))?;
        let iterations: u32 = field("i=")?
            .parse()
            .map_err(|_| "SCRAM: iteration count".to_owned())?;
        // Kafka's bounds (ScramMechanism): fewer is a downgrade, more a stall.
        if !(4096..=16384).contains(&iterations) {
            return Err(format!(
                "SCRAM: the broker asked for {iterations} iterations, outside Kafka's 4096..=16384"
            ));
        }
        let iterations = std::num::NonZeroU32::new(iterations).ok_or("SCRAM: 0 iterations")?;
        let (pbkdf2, hmac, digest, len) = match self.mechanism {
            Mechanism::ScramSha256 => (
                ring::pbkdf2::PBKDF2_HMAC_SHA256,
                ring::hmac::HMAC_SHA256,
                &ring::digest::SHA256,
                32,
            ),
            _ => (
                ring::pbkdf2::PBKDF2_HMAC_SHA512,
                ring::hmac::HMAC_SHA512,
                &ring::digest::SHA512,
                64,
            ),
        };
        let mut salted = vec![0u8; len];
        ring::pbkdf2::derive(
            pbkdf2,
            iterations,
            &salt,
            self.password.as_bytes(),
            &mut salted,
        );
        let mac = |key: &[u8], data: &[u8]| -> Vec<u8> {
            ring::hmac::sign(&ring::hmac::Key::new(hmac, key), data)
                .as_ref()
                .to_vec()
        };
        let client_key = mac(&salted, b"Client Key");
        let stored_key = ring::digest::digest(digest, &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let signature = mac(stored_key.as_ref(), auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = mac(&salted, b"Server Key");
        self.expected_server_signature = Some(mac(&server_key, auth_message.as_bytes()));
        Ok(format!(
            "{without_proof},p={}",
            base64::engine::general_purpose::STANDARD.encode(proof)
        ))
    }

    /// Whether the server proved it knows the password.
    pub fn verify_server_final(&self, server_final: &str) -> Result<(), String> {
        if let Some(error) = server_final.strip_prefix("e=") {
            return Err(format!("SCRAM: the broker refused: {error}"));
        }
        let signature = server_final
            .strip_prefix("v=")
            .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
            .ok_or("SCRAM: the server's final message has no signature")?;
        if Some(signature) == self.expected_server_signature {
            Ok(())
        } else {
            Err("SCRAM: the broker's signature is wrong".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example, byte for byte.
    #[test]
    fn scram_sha_256_as_rfc_7677() {
        let mut scram = Scram::new(
            Mechanism::ScramSha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        assert_eq!(scram.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        assert_eq!(
            scram.client_final(server_first).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        scram
            .verify_server_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(scram.verify_server_final("v=AAAA").is_err());
        assert!(scram.verify_server_final("e=invalid-proof").is_err());
    }

    #[test]
    fn a_nonce_the_server_did_not_extend_is_refused() {
        let mut scram = Scram::new(Mechanism::ScramSha512, "a,b=c", "pw", "abc".into());
        assert_eq!(scram.client_first(), "n,,n=a=2Cb=3Dc,r=abc");
        assert!(scram.client_final("r=xyz,s=AAAA,i=4096").is_err());
        assert!(
            scram.client_final("r=abcdef,s=AAAA,i=1").is_err(),
            "a downgrade"
        );
    }

    #[test]
    fn mechanisms_the_membership_does_not_speak_say_so() {
        let worker: BTreeMap<String, String> = [
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "GSSAPI"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let err = Security::of_worker(&worker, &rdkafka::ClientConfig::new()).unwrap_err();
        assert!(err.starts_with("sasl.mechanism=GSSAPI"), "{err}");
    }
}
