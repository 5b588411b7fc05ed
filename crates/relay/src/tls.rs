//! TLS to PostgreSQL with libpq's `sslmode` semantics, for the SQL connection
//! (tokio-postgres). The replication connection gets the same settings through
//! pgwire-replication's own `TlsConfig`.
//!
//! | sslmode | encrypted | chain verified | host name verified |
//! |---|---|---|---|
//! | disable | no | | |
//! | prefer (default) | if the server offers it | no | no |
//! | require | yes | no | no |
//! | verify-ca | yes | yes (`sslrootcert`) | no |
//! | verify-full | yes | yes | yes |

use pgwire_replication::{SslMode, TlsConfig};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The rustls client configuration for `tls`, or `None` for sslmode=disable.
pub fn client_config(tls: &TlsConfig) -> Result<Option<ClientConfig>, String> {
    if tls.mode == SslMode::Disable {
        return Ok(None);
    }
    let verify = matches!(tls.mode, SslMode::VerifyCa | SslMode::VerifyFull);
    let mut roots = RootCertStore::empty();
    match &tls.ca_pem_path {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!(
                    "sslrootcert {}: no certificate in it",
                    path.display()
                ));
            }
        }
        None if verify => {
            return Err(
                "sslmode=verify-ca and verify-full need sslrootcert=FILE (the CA certificate)"
                    .into(),
            )
        }
        None => {}
    }
    let roots = Arc::new(roots);
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if verify {
        builder.with_root_certificates(roots.clone())
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider())))
    };
    let mut config = match (&tls.client_cert_pem_path, &tls.client_key_pem_path) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("sslcert {}: {e}", cert.display()))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("sslkey {}: {e}", key.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("sslcert/sslkey: {e}"))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("sslcert and sslkey go together".into()),
    };
    if tls.mode == SslMode::VerifyCa {
        let inner = WebPkiServerVerifier::builder_with_provider(roots, provider())
            .build()
            .map_err(|e| e.to_string())?;
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(ChainOnly(inner)));
    }
    Ok(Some(config))
}

/// A Kafka client's rustls configuration (the worker's group membership): the chain must
/// lead to `trusted`, the host name checked when `verify_host`, and `key` presented for
/// mutual TLS.
pub fn kafka_client_config(
    trusted: Vec<CertificateDer<'static>>,
    key: Option<crate::keystore::KeyMaterial>,
    verify_host: bool,
) -> Result<ClientConfig, String> {
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(trusted);
    if added == 0 {
        return Err("ssl.truststore: no certificate in it".into());
    }
    let roots = Arc::new(roots);
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots.clone());
    let mut config = match key {
        Some(material) => builder
            .with_client_auth_cert(material.chain, material.key)
            .map_err(|e| format!("ssl.keystore: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    if !verify_host {
        let inner = WebPkiServerVerifier::builder_with_provider(roots, provider())
            .build()
            .map_err(|e| e.to_string())?;
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(ChainOnly(inner)));
    }
    Ok(config)
}

/// sslmode=prefer/require: encrypted, not authenticated (libpq's behaviour).
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// sslmode=verify-ca: the chain must lead to sslrootcert; the name is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
