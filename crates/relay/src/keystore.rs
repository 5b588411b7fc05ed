//! Kafka's TLS store settings (`ssl.keystore.*`, `ssl.truststore.*`, as Java clients and
//! Kafka Connect's REST server read them) turned into certificates and keys: for rustls (the
//! Connect REST listeners) and for librdkafka (the worker's own clients and the connectors'
//! producers, as inline PEM).
//!
//! | `ssl.*.type` | read |
//! |---|---|
//! | `PKCS12` | with OpenSSL (librdkafka links it already): Java's keytool and `openssl pkcs12` files |
//! | `JKS` (Kafka's default) | a PKCS12 file under this type is read as Java 9+ reads it; a real JKS file is refused with the keytool command that converts it (no maintained Rust crate reads JKS without a large ASN.1 stack) |
//! | `PEM` | `location` (key and chain in one file; an encrypted key with `ssl.key.password`), or the inline `ssl.keystore.key` + `ssl.keystore.certificate.chain` / `ssl.truststore.certificates` |
//!
//! Errors name the setting and the problem, never a password.

use openssl::pkcs12::Pkcs12;
use openssl::pkey::PKey;
use openssl::x509::X509;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::collections::BTreeMap;

/// The `ssl.*` settings that apply to one client or listener.
#[derive(Clone, Default)]
pub struct SslSettings(BTreeMap<String, String>);

impl std::fmt::Debug for SslSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys only: values hold passwords and inline keys.
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// A certificate chain and its private key.
pub struct KeyMaterial {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl SslSettings {
    /// The `ssl.*` entries of `entries`.
    pub fn plain(entries: &BTreeMap<String, String>) -> Self {
        Self::with_prefix(entries, "")
    }

    /// Kafka's `valuesWithPrefixAllOrNothing(prefix)`: when any `<prefix>ssl.*` key is set,
    /// those alone (the prefix taken off, unset ones at their defaults); else the plain
    /// `ssl.*` ones. `listeners.https.` and `admin.listeners.https.` are read so.
    pub fn all_or_nothing(entries: &BTreeMap<String, String>, prefix: &str) -> Self {
        let prefixed = Self::with_prefix(entries, prefix);
        if prefixed.0.is_empty() {
            Self::plain(entries)
        } else {
            prefixed
        }
    }

    fn with_prefix(entries: &BTreeMap<String, String>, prefix: &str) -> Self {
        Self(
            entries
                .iter()
                .filter_map(|(k, v)| {
                    let k = k.strip_prefix(prefix)?;
                    k.starts_with("ssl.").then(|| (k.to_owned(), v.clone()))
                })
                .collect(),
        )
    }

    /// A setting, trimmed; unset when empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// Whether `key` is given, even empty (Java reads an empty
    /// `ssl.endpoint.identification.algorithm` as "no host name check").
    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Whether any `ssl.*` setting is given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keystore's chain and key, if a keystore is configured.
    pub fn key_material(&self) -> Result<Option<KeyMaterial>, String> {
        let kind = self.store_type("ssl.keystore.type")?;
        let inline_key = self.get("ssl.keystore.key");
        let inline_chain = self.get("ssl.keystore.certificate.chain");
        let location = self.get("ssl.keystore.location");
        if inline_key.is_some() || inline_chain.is_some() {
            if kind != StoreType::Pem {
                return Err("ssl.keystore.key and ssl.keystore.certificate.chain need ssl.keystore.type=PEM".into());
            }
            if location.is_some() {
                return Err(
                    "ssl.keystore.location and ssl.keystore.key are both set: give one".into(),
                );
            }
            let (Some(key), Some(chain)) = (inline_key, inline_chain) else {
                return Err(
                    "ssl.keystore.key and ssl.keystore.certificate.chain go together".into(),
                );
            };
            return Ok(Some(KeyMaterial {
                chain: pem_certificates("ssl.keystore.certificate.chain", chain.as_bytes())?,
                key: pem_key(
                    "ssl.keystore.key",
                    key.as_bytes(),
                    self.get("ssl.key.password"),
                )?,
            }));
        }
        let Some(location) = location else {
            return Ok(None);
        };
        let bytes = std::fs::read(location)
            .map_err(|e| format!("ssl.keystore.location: cannot read {location}: {e}"))?;
        match kind {
            StoreType::Pem => Ok(Some(KeyMaterial {
                chain: pem_certificates("ssl.keystore.location", &bytes)?,
                key: pem_key(
                    "ssl.keystore.location",
                    &bytes,
                    self.get("ssl.key.password"),
                )?,
            })),
            StoreType::Pkcs12OrJks => {
                refuse_jks("ssl.keystore", location, &bytes)?;
                let password = self.get("ssl.keystore.password").ok_or(
                    "ssl.keystore.location is set but ssl.keystore.password is not (a PKCS12 store needs it)",
                )?;
                let parsed = parse_pkcs12("ssl.keystore", location, &bytes, password)?;
                let (Some(key), Some(cert)) = (parsed.pkey, parsed.cert) else {
                    return Err(format!(
                        "ssl.keystore.location: {location} holds no private key with its certificate"
                    ));
                };
                let mut chain = vec![der_of(&cert)?];
                for extra in parsed.ca.into_iter().flatten() {
                    chain.push(der_of(&extra)?);
                }
                let key = key
                    .private_key_to_pkcs8()
                    .map_err(|e| format!("ssl.keystore.location: the key in {location}: {e}"))?;
                Ok(Some(KeyMaterial {
                    chain,
                    key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
                }))
            }
        }
    }

    /// The truststore's certificates, if a truststore is configured.
    pub fn trusted(&self) -> Result<Option<Vec<CertificateDer<'static>>>, String> {
        let kind = self.store_type("ssl.truststore.type")?;
        let location = self.get("ssl.truststore.location");
        if let Some(inline) = self.get("ssl.truststore.certificates") {
            if kind != StoreType::Pem {
                return Err("ssl.truststore.certificates needs ssl.truststore.type=PEM".into());
            }
            if location.is_some() {
                return Err(
                    "ssl.truststore.location and ssl.truststore.certificates are both set: give one"
                        .into(),
                );
            }
            return pem_certificates("ssl.truststore.certificates", inline.as_bytes()).map(Some);
        }
        let Some(location) = location else {
            return Ok(None);
        };
        let bytes = std::fs::read(location)
            .map_err(|e| format!("ssl.truststore.location: cannot read {location}: {e}"))?;
        match kind {
            StoreType::Pem => pem_certificates("ssl.truststore.location", &bytes).map(Some),
            StoreType::Pkcs12OrJks => {
                refuse_jks("ssl.truststore", location, &bytes)?;
                // Kafka lets a truststore go without a password (no integrity check).
                let password = self.get("ssl.truststore.password").unwrap_or("");
                let parsed = parse_pkcs12("ssl.truststore", location, &bytes, password)?;
                let mut out = Vec::new();
                for cert in parsed
                    .cert
                    .iter()
                    .map(|c| &**c)
                    .chain(parsed.ca.iter().flatten())
                {
                    out.push(der_of(cert)?);
                }
                if out.is_empty() {
                    return Err(format!(
                        "ssl.truststore.location: {location} holds no certificate"
                    ));
                }
                Ok(Some(out))
            }
        }
    }

    fn store_type(&self, key: &str) -> Result<StoreType, String> {
        match self.get(key).map(str::to_ascii_uppercase).as_deref() {
            None | Some("JKS") | Some("PKCS12") => Ok(StoreType::Pkcs12OrJks),
            Some("PEM") => Ok(StoreType::Pem),
            Some(other) => Err(format!(
                "{key}: {other} is not a store type outbox-relay reads (PKCS12, PEM; JKS files converted to PKCS12)"
            )),
        }
    }

    /// These settings as librdkafka properties: stores become inline PEM (`ssl.ca.pem`,
    /// `ssl.certificate.pem`, `ssl.key.pem`), the rest keeps its name where librdkafka has it.
    pub fn librdkafka(&self) -> Result<Vec<(String, String)>, String> {
        let mut out = Vec::new();
        if let Some(certs) = self.trusted()? {
            out.push(("ssl.ca.pem".into(), pem_of_certificates(&certs)?));
        }
        let material = self.key_material()?;
        if material.is_none() {
            // For librdkafka's own ssl.key.location.
            if let Some(password) = self.get("ssl.key.password") {
                out.push(("ssl.key.password".into(), password.into()));
            }
        }
        if let Some(material) = material {
            out.push((
                "ssl.certificate.pem".into(),
                pem_of_certificates(&material.chain)?,
            ));
            let key = PKey::private_key_from_der(material.key.secret_der())
                .and_then(|k| k.private_key_to_pem_pkcs8())
                .map_err(|e| format!("ssl.keystore: the private key: {e}"))?;
            out.push((
                "ssl.key.pem".into(),
                String::from_utf8(key).map_err(|e| e.to_string())?,
            ));
        }
        for (key, value) in &self.0 {
            let value = value.trim();
            match key.as_str() {
                k if k.starts_with("ssl.keystore.")
                    || k.starts_with("ssl.truststore.")
                    || k == "ssl.key.password" => {}
                // Java's empty value turns host name checks off: librdkafka's `none`.
                "ssl.endpoint.identification.algorithm" if value.is_empty() => {
                    out.push((key.clone(), "none".into()))
                }
                "ssl.endpoint.identification.algorithm" => {
                    out.push((key.clone(), value.to_ascii_lowercase()))
                }
                "ssl.cipher.suites" | "ssl.sigalgs.list" => out.push((key.clone(), value.into())),
                // Java-only (the JSSE provider, the protocol of SSLContext, key managers):
                // librdkafka negotiates with OpenSSL's defaults.
                "ssl.protocol"
                | "ssl.enabled.protocols"
                | "ssl.provider"
                | "ssl.keymanager.algorithm"
                | "ssl.trustmanager.algorithm"
                | "ssl.secure.random.implementation"
                | "ssl.engine.factory.class"
                | "ssl.client.auth" => {}
                // librdkafka's own names (ssl.ca.location, ssl.certificate.location, …).
                _ => out.push((key.clone(), value.into())),
            }
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreType {
    /// Java 9+ reads a PKCS12 file under either type (`keystore.type.compat`).
    Pkcs12OrJks,
    Pem,
}

const JKS_MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];

fn refuse_jks(setting: &str, location: &str, bytes: &[u8]) -> Result<(), String> {
    if bytes.starts_with(&JKS_MAGIC) {
        return Err(format!(
            "{setting}.location: {location} is a JKS store, which outbox-relay does not read; convert it once \
             with `keytool -importkeystore -srckeystore {location} -destkeystore {location}.p12 -deststoretype PKCS12` \
             and set {setting}.location to the .p12 file and {setting}.type=PKCS12"
        ));
    }
    Ok(())
}

fn parse_pkcs12(
    setting: &str,
    location: &str,
    bytes: &[u8],
    password: &str,
) -> Result<openssl::pkcs12::ParsedPkcs12_2, String> {
    if password.contains('\0') {
        return Err(format!("{setting}.password: contains a NUL character"));
    }
    let store = Pkcs12::from_der(bytes)
        .map_err(|_| format!("{setting}.location: {location} is not a PKCS12 store (nor JKS)"))?;
    store.parse2(password).map_err(|_| {
        format!(
            "{setting}.location: {location} cannot be opened with {setting}.password (wrong password, or a \
             legacy cipher OpenSSL 3 no longer enables: re-export it with keytool or `openssl pkcs12 -export`)"
        )
    })
}

fn der_of(cert: &openssl::x509::X509Ref) -> Result<CertificateDer<'static>, String> {
    cert.to_der()
        .map(CertificateDer::from)
        .map_err(|e| e.to_string())
}

fn pem_certificates(setting: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{setting}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{setting}: no PEM certificate in it"));
    }
    Ok(certs)
}

/// The private key of a PEM text: plain (PKCS8, PKCS1, SEC1), or encrypted PKCS8 opened with
/// `ssl.key.password`.
fn pem_key(
    setting: &str,
    pem: &[u8],
    password: Option<&str>,
) -> Result<PrivateKeyDer<'static>, String> {
    let encrypted = std::str::from_utf8(pem)
        .map(|t| t.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        .unwrap_or(false);
    if encrypted {
        let password = password.ok_or_else(|| {
            format!("{setting}: the private key is encrypted and ssl.key.password is not set")
        })?;
        let key =
            PKey::private_key_from_pem_passphrase(pem, password.as_bytes()).map_err(|_| {
                format!("{setting}: the private key cannot be decrypted with ssl.key.password")
            })?;
        let der = key
            .private_key_to_pkcs8()
            .map_err(|e| format!("{setting}: {e}"))?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der)));
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|_| format!("{setting}: no PEM private key in it"))
}

fn pem_of_certificates(certs: &[CertificateDer<'_>]) -> Result<String, String> {
    let mut out = String::new();
    for cert in certs {
        let pem = X509::from_der(cert)
            .and_then(|c| c.to_pem())
            .map_err(|e| e.to_string())?;
        out.push_str(&String::from_utf8_lossy(&pem));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openssl::asn1::Asn1Time;
    use openssl::hash::MessageDigest;
    use openssl::rsa::Rsa;
    use openssl::x509::X509NameBuilder;

    fn self_signed() -> (PKey<openssl::pkey::Private>, X509) {
        let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "localhost").unwrap();
        let name = name.build();
        let mut cert = X509::builder().unwrap();
        cert.set_version(2).unwrap();
        cert.set_subject_name(&name).unwrap();
        cert.set_issuer_name(&name).unwrap();
        cert.set_pubkey(&key).unwrap();
        cert.set_not_before(&Asn1Time::days_from_now(0).unwrap())
            .unwrap();
        cert.set_not_after(&Asn1Time::days_from_now(1).unwrap())
            .unwrap();
        cert.sign(&key, MessageDigest::sha256()).unwrap();
        (key, cert.build())
    }

    fn settings(pairs: &[(&str, &str)]) -> SslSettings {
        SslSettings::plain(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn pkcs12_pem_and_inline_stores_give_the_same_material() {
        let dir = tempfile::tempdir().unwrap();
        let (key, cert) = self_signed();
        let p12 = Pkcs12::builder()
            .name("relay")
            .pkey(&key)
            .cert(&cert)
            .build2("store-pass")
            .unwrap();
        let p12_path = dir.path().join("k.p12");
        std::fs::write(&p12_path, p12.to_der().unwrap()).unwrap();
        let cert_pem = String::from_utf8(cert.to_pem().unwrap()).unwrap();
        let key_pem = String::from_utf8(key.private_key_to_pem_pkcs8().unwrap()).unwrap();
        let encrypted = String::from_utf8(
            key.private_key_to_pem_pkcs8_passphrase(
                openssl::symm::Cipher::aes_256_cbc(),
                b"key-pass",
            )
            .unwrap(),
        )
        .unwrap();
        let pem_path = dir.path().join("k.pem");
        std::fs::write(&pem_path, format!("{encrypted}{cert_pem}")).unwrap();
        let p12_path = p12_path.to_str().unwrap();
        let pem_path = pem_path.to_str().unwrap();

        let expected = cert.to_der().unwrap();
        for (what, s) in [
            (
                "PKCS12 under Kafka's default type",
                settings(&[
                    ("ssl.keystore.location", p12_path),
                    ("ssl.keystore.password", "store-pass"),
                ]),
            ),
            (
                "PKCS12",
                settings(&[
                    ("ssl.keystore.type", "pkcs12"),
                    ("ssl.keystore.location", p12_path),
                    ("ssl.keystore.password", "store-pass"),
                ]),
            ),
            (
                "PEM file, encrypted key",
                settings(&[
                    ("ssl.keystore.type", "PEM"),
                    ("ssl.keystore.location", pem_path),
                    ("ssl.key.password", "key-pass"),
                ]),
            ),
            (
                "inline PEM",
                settings(&[
                    ("ssl.keystore.type", "PEM"),
                    ("ssl.keystore.key", &key_pem),
                    ("ssl.keystore.certificate.chain", &cert_pem),
                ]),
            ),
        ] {
            let m = s
                .key_material()
                .unwrap()
                .unwrap_or_else(|| panic!("{what}"));
            assert_eq!(m.chain[0].as_ref(), expected.as_slice(), "{what}");
            let back = PKey::private_key_from_der(m.key.secret_der()).unwrap();
            assert!(back.public_eq(&key), "{what}");
        }

        let wrong = settings(&[
            ("ssl.keystore.location", p12_path),
            ("ssl.keystore.password", "nope"),
        ]);
        let err = wrong.key_material().err().unwrap();
        assert!(
            err.contains("ssl.keystore.password") && !err.contains("nope"),
            "{err}"
        );
        let err = settings(&[("ssl.keystore.location", p12_path)])
            .key_material()
            .err()
            .unwrap();
        assert!(err.contains("ssl.keystore.password is not"), "{err}");
        let err = settings(&[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", pem_path),
            ("ssl.key.password", "wrong-key-pass"),
        ])
        .key_material()
        .err()
        .unwrap();
        assert!(
            err.contains("cannot be decrypted") && !err.contains("wrong-key-pass"),
            "{err}"
        );

        // Truststores: the certificate, from PKCS12 and PEM.
        let trust = Pkcs12::builder()
            .ca({
                let mut s = openssl::stack::Stack::new().unwrap();
                s.push(cert.clone()).unwrap();
                s
            })
            .build2("trust-pass")
            .unwrap();
        let trust_path = dir.path().join("t.p12");
        std::fs::write(&trust_path, trust.to_der().unwrap()).unwrap();
        for s in [
            settings(&[
                ("ssl.truststore.type", "PKCS12"),
                ("ssl.truststore.location", trust_path.to_str().unwrap()),
                ("ssl.truststore.password", "trust-pass"),
            ]),
            settings(&[
                ("ssl.truststore.type", "PEM"),
                ("ssl.truststore.certificates", &cert_pem),
            ]),
        ] {
            assert_eq!(
                s.trusted().unwrap().unwrap()[0].as_ref(),
                expected.as_slice()
            );
        }
    }

    #[test]
    fn a_jks_file_is_refused_with_the_conversion() {
        let dir = tempfile::tempdir().unwrap();
        let jks = dir.path().join("k.jks");
        std::fs::write(&jks, [0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2]).unwrap();
        let err = settings(&[
            ("ssl.keystore.location", jks.to_str().unwrap()),
            ("ssl.keystore.password", "x"),
        ])
        .key_material()
        .err()
        .unwrap();
        assert!(
            err.contains("keytool -importkeystore") && err.contains("JKS"),
            "{err}"
        );
    }

    #[test]
    fn prefixed_settings_are_all_or_nothing_as_in_kafka() {
        let entries: BTreeMap<String, String> = [
            ("ssl.keystore.location", "/plain.p12"),
            ("ssl.keystore.password", "p"),
            ("listeners.https.ssl.keystore.location", "/https.p12"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let https = SslSettings::all_or_nothing(&entries, "listeners.https.");
        assert_eq!(https.get("ssl.keystore.location"), Some("/https.p12"));
        assert_eq!(https.get("ssl.keystore.password"), None);
        let admin = SslSettings::all_or_nothing(&entries, "admin.listeners.https.");
        assert_eq!(admin.get("ssl.keystore.location"), Some("/plain.p12"));
        assert_eq!(
            format!("{admin:?}"),
            r#"{"ssl.keystore.location", "ssl.keystore.password"}"#
        );
    }

    #[test]
    fn stores_become_librdkafka_inline_pem() {
        let (key, cert) = self_signed();
        let cert_pem = String::from_utf8(cert.to_pem().unwrap()).unwrap();
        let key_pem = String::from_utf8(key.private_key_to_pem_pkcs8().unwrap()).unwrap();
        let props = settings(&[
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.certificates", &cert_pem),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.key", &key_pem),
            ("ssl.keystore.certificate.chain", &cert_pem),
            ("ssl.endpoint.identification.algorithm", "HTTPS"),
            ("ssl.enabled.protocols", "TLSv1.2"),
        ])
        .librdkafka()
        .unwrap();
        let get = |k: &str| props.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("ssl.ca.pem"), Some(cert_pem.as_str()));
        assert_eq!(get("ssl.certificate.pem"), Some(cert_pem.as_str()));
        assert_eq!(get("ssl.key.pem"), Some(key_pem.as_str()));
        assert_eq!(get("ssl.endpoint.identification.algorithm"), Some("https"));
        assert_eq!(get("ssl.enabled.protocols"), None);
        assert_eq!(props.len(), 4);
    }
}
