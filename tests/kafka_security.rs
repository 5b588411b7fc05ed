//! Kafka security settings pass through to librdkafka (built with OpenSSL, Cyrus SASL and
//! curl: SSL, SASL_SSL, SASL_PLAINTEXT with PLAIN, SCRAM, GSSAPI (Kerberos) and OAUTHBEARER
//! with OIDC). tansu 0.6 cannot serve TLS (its --cert and --key
//! flags exclude each other) nor SASL with a mechanism librdkafka offers, so the proof here
//! is that the settings are accepted and take effect against a plaintext broker; a
//! handshake with a secured broker is not exercised on this machine.

mod common;

use outbox_relay_testkit::{Broker, Storage};
use std::process::Command;

/// `outbox-relay <command>` against an unreachable database and `bootstrap`, with `properties`
/// as `--producer-property` and `extra` after them.
fn relay_args<'a>(
    command: &'a str,
    bootstrap: &'a str,
    properties: &[&'a str],
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        command,
        "--postgres-url",
        "postgres://nobody@127.0.0.1:1/none",
        "--bootstrap-servers",
        bootstrap,
    ];
    for p in properties {
        args.extend(["--producer-property", p]);
    }
    args.extend(extra);
    args
}

fn check(bootstrap: &str, properties: &[&str]) -> (i32, String) {
    let args = relay_args("check", bootstrap, properties, &[]);
    let out = Command::new(common::RELAY).args(&args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn security_settings_reach_librdkafka_and_take_effect() {
    let broker = Broker::start(Storage::Memory)
        .unwrap_or_else(|e| panic!("cannot start Apache Kafka: {e:#}"));
    let bootstrap = broker.bootstrap_servers();

    let (_, plain) = check(&bootstrap, &[]);
    assert!(
        plain.contains(&format!("ok   Kafka at {bootstrap} answers")),
        "{plain}"
    );

    for settings in [
        &["security.protocol=SSL"][..],
        &[
            "security.protocol=SASL_SSL",
            "sasl.mechanism=SCRAM-SHA-512",
            "sasl.username=relay",
            "sasl.password=pw",
        ][..],
        &[
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanism=SCRAM-SHA-256",
            "sasl.username=relay",
            "sasl.password=pw",
        ][..],
        &[
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanism=PLAIN",
            "sasl.username=relay",
            "sasl.password=pw",
        ][..],
    ] {
        let (code, out) = check(&bootstrap, settings);
        assert_eq!(code, 1, "{settings:?}: {out}");
        // Accepted by this build of librdkafka, and applied: the plaintext broker no longer answers.
        assert!(!out.contains("settings rejected"), "{settings:?}: {out}");
        assert!(
            out.contains(&format!("FAIL Kafka at {bootstrap} does not answer")),
            "{settings:?}: {out}"
        );
        assert!(
            !out.contains("pw\n") && !out.contains("=pw"),
            "a password was printed: {out}"
        );
    }

    // Kerberos (GSSAPI, through Cyrus SASL): accepted, and librdkafka runs the kinit command
    // the settings give (a build without GSSAPI refuses the mechanism at start-up).
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("kinit-ran");
    let kinit = format!("sasl.kerberos.kinit.cmd=touch {}", ran.display());
    let (code, out) = check(
        &bootstrap,
        &[
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanism=GSSAPI",
            "sasl.kerberos.service.name=kafka",
            "sasl.kerberos.principal=relay@EXAMPLE.COM",
            &kinit,
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains("settings rejected"), "GSSAPI: {out}");
    assert!(ran.exists(), "librdkafka ran the kinit command: {out}");

    // OAUTHBEARER with OIDC (librdkafka's curl): accepted, and the client asks the token
    // endpoint for a token with its client credentials.
    let endpoint = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let token_url = format!(
        "sasl.oauthbearer.token.endpoint.url=http://{}/token",
        endpoint.local_addr().unwrap()
    );
    let asked = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut conn, _) = endpoint.accept().unwrap();
        conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut request = vec![0; 8192];
        let n = conn.read(&mut request).unwrap_or(0);
        let _ = conn.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n");
        String::from_utf8_lossy(&request[..n]).into_owned()
    });
    let (code, out) = check(
        &bootstrap,
        &[
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanism=OAUTHBEARER",
            "sasl.oauthbearer.method=oidc",
            "sasl.oauthbearer.client.id=relay",
            "sasl.oauthbearer.client.secret=pw",
            &token_url,
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains("settings rejected"), "OIDC: {out}");
    let request = asked.join().unwrap();
    assert!(
        request.starts_with("POST /token") && request.contains("grant_type=client_credentials"),
        "librdkafka asked the token endpoint: {request}"
    );

    let (code, out) = check(
        &bootstrap,
        &[
            "security.protocol=SASL_SSL",
            "sasl.mechanism=NOT-A-MECHANISM",
        ],
    );
    assert_eq!(code, 1);
    assert!(out.contains("Kafka client settings rejected"), "{out}");
}

/// The memory maps of `outbox-relay run` with these producer properties, read once its first
/// Kafka client exists (librdkafka's `rdk:main` thread). PostgreSQL and the broker are
/// unreachable: the relay keeps retrying, which is all this needs.
fn maps_of_a_running_relay(properties: &[&str]) -> String {
    let args = relay_args(
        "run",
        "127.0.0.1:1",
        properties,
        &["--metrics-address", "127.0.0.1:0"],
    );
    let mut relay = Command::new(common::RELAY)
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let proc = format!("/proc/{}", relay.id());
    let has_client = || {
        std::fs::read_dir(format!("{proc}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "rdk:main")
            })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !has_client() {
        assert!(
            std::time::Instant::now() < deadline,
            "no Kafka client in the relay after 20 s ({properties:?})"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let maps = std::fs::read_to_string(format!("{proc}/maps")).unwrap();
    let _ = relay.kill();
    let _ = relay.wait();
    maps
}

/// librdkafka starts Cyrus SASL with its first client, and Cyrus loads every plugin installed
/// on the host (Kerberos and Berkeley DB behind some), though librdkafka takes only GSSAPI from
/// it. A relay configured without GSSAPI maps none of them; one configured with it still gets
/// the GSSAPI plugin.
#[test]
fn cyrus_sasl_plugins_are_loaded_only_when_gssapi_is_configured() {
    let installed = std::fs::read_dir("/usr/lib")
        .unwrap()
        .flatten()
        .any(|d| d.path().join("sasl2/libgssapiv2.so.2").exists());
    assert!(
        installed,
        "Cyrus SASL's GSSAPI plugin is not installed: run scripts/install-deps.sh \
         (libsasl2-modules-gssapi-mit)"
    );
    let plain = maps_of_a_running_relay(&[]);
    assert!(
        !plain.contains("/sasl2/") && !plain.contains("libkrb5"),
        "SASL plugins or Kerberos loaded without GSSAPI configured:\n{plain}"
    );
    let gssapi = maps_of_a_running_relay(&[
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=GSSAPI",
        "sasl.kerberos.kinit.cmd=true",
    ]);
    assert!(
        gssapi.contains("/sasl2/libgssapiv2.so"),
        "the GSSAPI plugin was not loaded with GSSAPI configured:\n{gssapi}"
    );
}
