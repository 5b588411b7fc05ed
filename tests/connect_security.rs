//! The Connect worker's REST API as something reachable over a network: no secret leaves the
//! process (config providers come from the worker configuration only, expanded values are
//! never echoed), `https` listeners with PKCS12 and PEM keystores and mutual TLS, Kafka
//! Connect's basic authentication from the JAAS file `KAFKA_OPTS` names, and Connect's error
//! shape for every bad request (with a schemathesis run against the served OpenAPI document).
//!
//! These workers run no pipeline, so they need neither PostgreSQL nor a broker; their
//! `bootstrap.servers` is a closed port.

use outbox_relay_testkit::net::{free_port, wait_for_port};
use outbox_relay_testkit::RelayProcess;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const RELAY: &str = env!("CARGO_BIN_EXE_outbox-relay");
const FILE: &str = "org.apache.kafka.common.config.provider.FileConfigProvider";
const DIRECTORY: &str = "org.apache.kafka.common.config.provider.DirectoryConfigProvider";
const ENV: &str = "org.apache.kafka.common.config.provider.EnvVarConfigProvider";
const BASIC_AUTH: &str =
    "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension";
const SECRET: &str = "TOP-SECRET-7f3a";

/// A curl answer: HTTP status (0 when there was none: no connection, a refused handshake),
/// body.
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

fn curl(args: &[&str]) -> Answer {
    let out = Command::new("curl")
        .args(["-s", "-S", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl is needed by this test: apt-get install curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    Answer {
        status: code.trim().parse().unwrap_or(0),
        body: body.to_owned(),
    }
}

fn send(method: &str, url: &str, body: &str) -> Answer {
    curl(&[
        "-X",
        method,
        "-H",
        "Content-Type: application/json",
        url,
        "--data-binary",
        body,
    ])
}

struct Worker {
    process: RelayProcess,
    url: String,
}

/// A worker with these properties (after a closed `bootstrap.servers`), `--listen` when
/// given, and environment variables; `port` is waited for.
fn worker(
    dir: &Path,
    properties: &str,
    listen: Option<u16>,
    env: &[(&str, &str)],
    port: u16,
) -> Worker {
    let path = dir.join(format!("connect-{}.properties", free_port()));
    std::fs::write(
        &path,
        format!("bootstrap.servers=127.0.0.1:1\n{properties}"),
    )
    .unwrap();
    let mut args = vec![
        "connect".to_owned(),
        "--worker-config".into(),
        path.display().to_string(),
        "--metrics-address".into(),
        "127.0.0.1:0".into(),
    ];
    if let Some(listen) = listen {
        args.extend(["--listen".into(), format!("127.0.0.1:{listen}")]);
    }
    let process = RelayProcess::spawn(Path::new(RELAY), &args, env).unwrap();
    assert!(
        wait_for_port(port, Duration::from_secs(20)),
        "the REST API never listened on {port}:\n{}",
        process.log()
    );
    Worker {
        process,
        url: format!("http://127.0.0.1:{port}"),
    }
}

fn http_worker(dir: &Path, properties: &str, env: &[(&str, &str)]) -> Worker {
    let port = free_port();
    worker(dir, properties, Some(port), env, port)
}

/// `outbox-relay connect` that must refuse to start: its exit status and what it said.
fn refused(dir: &Path, properties: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let path = dir.join(format!("refused-{}.properties", free_port()));
    std::fs::write(
        &path,
        format!("bootstrap.servers=127.0.0.1:1\n{properties}"),
    )
    .unwrap();
    let mut command = Command::new(RELAY);
    command.args([
        "connect",
        "--worker-config",
        path.to_str().unwrap(),
        "--metrics-address",
        "127.0.0.1:0",
    ]);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A connector configuration the relay accepts (it never connects: the connector is created
/// STOPPED), with `extra` entries.
fn connector_config(extra: Value) -> Value {
    let mut config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1",
        "database.port": "1",
        "database.user": "postgres",
        "database.dbname": "postgres",
        "topic.prefix": "app",
        "table.include.list": "public.outbox",
        "plugin.name": "pgoutput",
        "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"
    });
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    config
}

fn secrets(dir: &Path) -> (PathBuf, PathBuf) {
    let props = dir.join("secret.properties");
    std::fs::write(&props, format!("password={SECRET}\n")).unwrap();
    let secret_dir = dir.join("secrets");
    std::fs::create_dir_all(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("password"), SECRET).unwrap();
    (props, secret_dir)
}

/// A connector configuration that declares a provider of its own (each kind Kafka has) is
/// refused with the reason, through POST, PUT and validate, and nothing in it is expanded or
/// echoed: the request that reads the worker's files and environment is the one to refuse.
#[test]
fn a_connector_config_cannot_declare_config_providers() {
    let dir = tempfile::tempdir().unwrap();
    let (props, secret_dir) = secrets(dir.path());
    let w = http_worker(dir.path(), "", &[("OUTBOX_TEST_SECRET", SECRET)]);
    let cases = [
        (FILE, format!("${{f:{}:password}}", props.display())),
        (
            DIRECTORY,
            format!("${{f:{}:password}}", secret_dir.display()),
        ),
        (ENV, "${f:OUTBOX_TEST_SECRET}".to_owned()),
    ];
    for (class, reference) in cases {
        let config = connector_config(json!({
            "config.providers": "f",
            "config.providers.f.class": class,
            "connector.class": reference,
            "database.password": reference,
        }));
        let body = json!({"name": "c", "config": config}).to_string();
        for answer in [
            send("POST", &format!("{}/connectors", w.url), &body),
            send(
                "PUT",
                &format!("{}/connectors/c/config", w.url),
                &config.to_string(),
            ),
        ] {
            assert_eq!(answer.status, 400, "{class}: {}", answer.body);
            let message = answer.json()["message"].as_str().unwrap().to_owned();
            assert!(
                message.contains("config.providers")
                    && message.contains("worker configuration only"),
                "{class}: {message}"
            );
            assert!(!answer.body.contains(SECRET), "{class}: {}", answer.body);
        }
        let validate = send(
            "PUT",
            &format!(
                "{}/connector-plugins/PostgresConnector/config/validate",
                w.url
            ),
            &config.to_string(),
        );
        assert!(
            !validate.body.contains(SECRET),
            "{class}: {}",
            validate.body
        );
        assert_eq!(
            curl(&[&format!("{}/connectors/c", w.url)]).status,
            404,
            "{class}: nothing was registered"
        );
    }
    assert!(!w.process.log().contains(SECRET), "{}", w.process.log());
}

/// With the worker's providers, an expanded value never appears in an answer, an error or the
/// log: the error names the option and the problem. `GET …/config` shows what was submitted,
/// as Connect does; validate shows a password option as `[hidden]`.
#[test]
fn an_expanded_value_never_leaves_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let (props, secret_dir) = secrets(dir.path());
    let w = http_worker(
        dir.path(),
        &format!(
            "config.providers=file,dir,env\n\
             config.providers.file.class={FILE}\n\
             config.providers.dir.class={DIRECTORY}\n\
             config.providers.dir.param.allowed.paths={}\n\
             config.providers.env.class={ENV}\n\
             config.providers.env.param.allowlist.pattern=OUTBOX_TEST_.*\n",
            secret_dir.display()
        ),
        &[("OUTBOX_TEST_SECRET", SECRET)],
    );
    let references = [
        format!("${{file:{}:password}}", props.display()),
        format!("${{dir:{}:password}}", secret_dir.display()),
        "${env:OUTBOX_TEST_SECRET}".to_owned(),
    ];
    for reference in &references {
        // Expanded into an option whose error would quote its value.
        // (option, its value, the name the error gives it)
        for (key, value, named) in [
            ("connector.class", reference.clone(), "connector.class"),
            ("slot.name", format!("bad-{reference}"), "slot"),
            ("snapshot.mode", reference.clone(), "snapshot.mode"),
        ] {
            let config = connector_config(json!({ key: value }));
            let body = json!({"name": "leak", "config": config}).to_string();
            for answer in [
                send("POST", &format!("{}/connectors", w.url), &body),
                send(
                    "PUT",
                    &format!("{}/connectors/leak/config", w.url),
                    &config.to_string(),
                ),
                send(
                    "PUT",
                    &format!(
                        "{}/connector-plugins/PostgresConnector/config/validate",
                        w.url
                    ),
                    &config.to_string(),
                ),
            ] {
                assert!(
                    !answer.body.contains(SECRET),
                    "{key}={reference}: {}",
                    answer.body
                );
                // Refused: a 400, or validate's 200 with the error counted.
                let refused = answer.status == 400
                    || (answer.status == 200 && answer.json()["error_count"].as_u64() >= Some(1));
                assert!(
                    refused,
                    "{key}={reference}: {} {}",
                    answer.status, answer.body
                );
                // The option is named (validate compares the class as submitted).
                assert!(
                    answer.body.contains(named) || answer.body.contains("connector type"),
                    "{key}: {}",
                    answer.body
                );
            }
        }
    }
    // The env provider's allowlist and the directory provider's allowed.paths hold.
    let outside = connector_config(json!({"database.password": "${env:HOME}"}));
    let answer = send(
        "POST",
        &format!("{}/connectors", w.url),
        &json!({"name": "env", "config": outside}).to_string(),
    );
    assert_eq!(answer.status, 400);
    assert!(answer.body.contains("allowlist.pattern"), "{}", answer.body);
    let outside = connector_config(json!({"database.password": "${dir:/etc:hostname}"}));
    let answer = send(
        "POST",
        &format!("{}/connectors", w.url),
        &json!({"name": "dir", "config": outside}).to_string(),
    );
    assert_eq!(answer.status, 400);
    assert!(
        answer.body.contains("outside allowed.paths"),
        "{}",
        answer.body
    );

    // A valid registration keeps its references; validate hides a literal password.
    let config = connector_config(json!({"database.password": references[0]}));
    let created = send(
        "POST",
        &format!("{}/connectors", w.url),
        &json!({"name": "ok", "config": config, "initial_state": "STOPPED"}).to_string(),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    assert!(!created.body.contains(SECRET), "{}", created.body);
    let shown = curl(&[&format!("{}/connectors/ok/config", w.url)]);
    assert_eq!(shown.json()["database.password"], references[0].as_str());
    for path in ["", "?expand=info", "?expand=status"] {
        let listed = curl(&[&format!("{}/connectors{path}", w.url)]);
        assert!(!listed.body.contains(SECRET), "{}", listed.body);
    }
    let tasks = curl(&[&format!("{}/connectors/ok/tasks", w.url)]);
    assert!(!tasks.body.contains(SECRET), "{}", tasks.body);
    let literal = connector_config(json!({"database.password": "literal-pw"}));
    let validate = send(
        "PUT",
        &format!(
            "{}/connector-plugins/PostgresConnector/config/validate",
            w.url
        ),
        &literal.to_string(),
    );
    let configs = validate.json()["configs"].as_array().unwrap().clone();
    let password = configs
        .iter()
        .find(|c| c["value"]["name"] == "database.password")
        .unwrap();
    assert_eq!(password["value"]["value"], "[hidden]");
    assert!(!validate.body.contains("literal-pw"), "{}", validate.body);
    assert!(!w.process.log().contains(SECRET), "{}", w.process.log());
}

/// A connector that runs with a host and a slot a config provider supplied: while it retries a
/// host that does not resolve, neither value reaches a log line, a metric (the slot label),
/// the status, /ready, or validate's database findings.
#[test]
fn a_running_connector_never_shows_an_expanded_value() {
    let dir = tempfile::tempdir().unwrap();
    let props = dir.path().join("db.properties");
    let host = format!("db-{}.invalid", SECRET.to_lowercase());
    let slot = "slot_top_secret_7f3a";
    std::fs::write(&props, format!("host={host}\nslot={slot}\n")).unwrap();
    let w = http_worker(
        dir.path(),
        &format!("config.providers=file\nconfig.providers.file.class={FILE}\n"),
        &[],
    );
    let config = connector_config(json!({
        "database.hostname": format!("${{file:{}:host}}", props.display()),
        "database.port": "5432",
        "slot.name": format!("${{file:{}:slot}}", props.display()),
    }));
    let created = send(
        "POST",
        &format!("{}/connectors", w.url),
        &json!({"name": "running", "config": config}).to_string(),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    // Its pipeline tries the host and backs off, logging why, a few times.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while w.process.log().matches("[hidden]").count() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));
    let metrics_at = outbox_relay_testkit::http::metrics_address(&w.process);
    let (_, metrics) = outbox_relay_testkit::http::get(&metrics_at, "/metrics");
    let (_, ready) = outbox_relay_testkit::http::get(&metrics_at, "/ready");
    let status = curl(&[&format!("{}/connectors/running/status", w.url)]);
    let validate = send(
        "PUT",
        &format!(
            "{}/connector-plugins/PostgresConnector/config/validate",
            w.url
        ),
        &config.to_string(),
    );
    assert!(
        validate.json()["error_count"].as_u64() >= Some(1),
        "{}",
        validate.body
    );
    let log = w.process.log();
    for (what, text) in [
        ("log", &log),
        ("metrics", &metrics),
        ("ready", &ready),
        ("status", &status.body),
        ("validate", &validate.body),
    ] {
        assert!(!text.contains(&host), "{what}: {text}");
        assert!(!text.contains(slot), "{what}: {text}");
    }
    assert!(metrics.contains("slot=\"[hidden]\""), "{metrics}");
    assert!(
        log.matches("[hidden]").count() >= 2,
        "the pipeline logged its attempts: {log}"
    );
}

/// Certificates made as their users make them: a CA and a server and client certificate
/// signed by it (openssl), the server's as PEM (key encrypted) and as PKCS12, and a Java
/// truststore (keytool).
struct Pki {
    dir: PathBuf,
}

fn run(program: &str, args: &[&str], dir: &Path) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("{program} is needed by this test ({e}): scripts/install-deps.sh installs it")
        });
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Pki {
    fn new(dir: &Path) -> Self {
        let dir = dir.join("pki");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("san.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )
        .unwrap();
        let openssl = |args: &[&str]| run("openssl", args, &dir);
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=outbox-relay test CA",
            "-days",
            "2",
        ]);
        for name in ["server", "client"] {
            openssl(&[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                "/CN=localhost",
            ]);
            openssl(&[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &format!("{name}.crt"),
                "-days",
                "2",
                "-extfile",
                "san.ext",
            ]);
        }
        // A client certificate no trusted CA signed.
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "stranger.key",
            "-out",
            "stranger.crt",
            "-subj",
            "/CN=stranger",
            "-days",
            "2",
        ]);
        openssl(&[
            "pkcs12",
            "-export",
            "-in",
            "server.crt",
            "-inkey",
            "server.key",
            "-certfile",
            "ca.crt",
            "-out",
            "server.p12",
            "-passout",
            "pass:store-pw",
        ]);
        openssl(&[
            "pkcs8",
            "-topk8",
            "-in",
            "server.key",
            "-out",
            "server-encrypted.key",
            "-v2",
            "aes-256-cbc",
            "-passout",
            "pass:key-pw",
        ]);
        let pem = std::fs::read_to_string(dir.join("server-encrypted.key")).unwrap()
            + &std::fs::read_to_string(dir.join("server.crt")).unwrap();
        std::fs::write(dir.join("server.pem"), pem).unwrap();
        run(
            "keytool",
            &[
                "-importcert",
                "-noprompt",
                "-alias",
                "ca",
                "-file",
                "ca.crt",
                "-keystore",
                "truststore.p12",
                "-storetype",
                "PKCS12",
                "-storepass",
                "trust-pw",
            ],
            &dir,
        );
        Self { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

/// `curl https://localhost:PORT/` trusting the test CA, with a client certificate if given.
fn https_get(port: u16, pki: &Pki, client: Option<&str>, path: &str) -> Answer {
    let url = format!("https://localhost:{port}{path}");
    let ca = pki.path("ca.crt");
    let (cert, key) = client
        .map(|c| (pki.path(&format!("{c}.crt")), pki.path(&format!("{c}.key"))))
        .unwrap_or_default();
    let mut args = vec!["--cacert", &ca, url.as_str()];
    if client.is_some() {
        args.extend(["--cert", &cert, "--key", &key]);
    }
    curl(&args)
}

/// `listeners=https://…` is served with TLS from a PKCS12 keystore (Kafka's `ssl.*`) or a PEM
/// one (`listeners.https.ssl.*`, its key encrypted), never as plain HTTP; a keystore made by
/// Java's keytool is read too.
#[test]
fn https_listeners_with_pkcs12_and_pem_keystores() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());

    let port = free_port();
    let plain = free_port();
    let w = worker(
        dir.path(),
        &format!(
            "listeners=https://localhost:{port},http://127.0.0.1:{plain}\n\
             ssl.keystore.type=PKCS12\n\
             ssl.keystore.location={}\n\
             ssl.keystore.password=store-pw\n",
            pki.path("server.p12")
        ),
        None,
        &[],
        port,
    );
    let answer = https_get(port, &pki, None, "/connectors");
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (200, "[]"),
        "{}",
        w.process.log()
    );
    // The same port in plain HTTP gets no API.
    let answer = curl(&[&format!("http://127.0.0.1:{port}/connectors")]);
    assert_ne!(answer.status, 200, "{}", answer.body);
    // The http listener beside it serves the API.
    assert_eq!(
        curl(&[&format!("http://127.0.0.1:{plain}/connectors")]).status,
        200
    );
    drop(w);

    let port = free_port();
    let w = worker(
        dir.path(),
        &format!(
            "listeners=https://127.0.0.1:{port}\n\
             ssl.keystore.location=/nonexistent/ignored.jks\n\
             listeners.https.ssl.keystore.type=PEM\n\
             listeners.https.ssl.keystore.location={}\n\
             listeners.https.ssl.key.password=key-pw\n",
            pki.path("server.pem")
        ),
        None,
        &[],
        port,
    );
    let answer = https_get(port, &pki, None, "/");
    assert_eq!(answer.status, 200, "{} {}", answer.body, w.process.log());
    assert!(answer.json()["version"].is_string());
    drop(w);

    // ssl.enabled.protocols as Kafka names them: TLSv1.3 only refuses a TLS 1.2 client.
    let port = free_port();
    let w = worker(
        dir.path(),
        &format!(
            "listeners=https://localhost:{port}\n\
             ssl.keystore.type=PKCS12\n\
             ssl.keystore.location={}\n\
             ssl.keystore.password=store-pw\n\
             ssl.enabled.protocols=TLSv1.3\n",
            pki.path("server.p12")
        ),
        None,
        &[],
        port,
    );
    let url = format!("https://localhost:{port}/connectors");
    let ca = pki.path("ca.crt");
    let tls12 = curl(&["--cacert", &ca, "--tlsv1.2", "--tls-max", "1.2", &url]);
    assert_eq!(
        tls12.status, 0,
        "a TLS 1.2 handshake is refused: {}",
        tls12.body
    );
    let tls13 = curl(&["--cacert", &ca, "--tlsv1.3", &url]);
    assert_eq!(tls13.status, 200, "{} {}", tls13.body, w.process.log());
    drop(w);

    // A keystore from Java's keytool, under Kafka's default type (JKS: Java 9+ reads PKCS12
    // under it, and so does the relay).
    let keytool_store = dir.path().join("keytool.p12");
    run(
        "keytool",
        &[
            "-genkeypair",
            "-alias",
            "connect",
            "-keyalg",
            "RSA",
            "-keysize",
            "2048",
            "-dname",
            "CN=localhost",
            "-ext",
            "SAN=dns:localhost,ip:127.0.0.1",
            "-validity",
            "2",
            "-storetype",
            "PKCS12",
            "-keystore",
            keytool_store.to_str().unwrap(),
            "-storepass",
            "changeit",
            "-keypass",
            "changeit",
        ],
        dir.path(),
    );
    let port = free_port();
    let w = worker(
        dir.path(),
        &format!(
            "listeners=https://localhost:{port}\n\
             ssl.keystore.location={}\n\
             ssl.keystore.password=changeit\n",
            keytool_store.display()
        ),
        None,
        &[],
        port,
    );
    let answer = curl(&["-k", &format!("https://localhost:{port}/health")]);
    assert_eq!(answer.status, 200, "{} {}", answer.body, w.process.log());
    drop(w);

    // No keystore: refused at start, naming the settings; never plain HTTP.
    let (code, said) = refused(
        dir.path(),
        &format!("listeners=https://127.0.0.1:{}\n", free_port()),
        &[],
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("listeners.https.ssl.keystore.location (or ssl.keystore.location)")
            && said.contains("never served as plain HTTP"),
        "{said}"
    );
    // A wrong password names the setting and not the password.
    let (code, said) = refused(
        dir.path(),
        &format!(
            "listeners=https://127.0.0.1:{}\nssl.keystore.location={}\nssl.keystore.password=wrong-pw-123\n",
            free_port(),
            pki.path("server.p12")
        ),
        &[],
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("ssl.keystore.password") && !said.contains("wrong-pw-123"),
        "{said}"
    );
}

/// `ssl.client.auth=required` admits only clients whose certificate the truststore (a Java
/// PKCS12 truststore from keytool) vouches for; `requested` admits clients without one too,
/// but never with a certificate it cannot verify.
#[test]
fn mutual_tls_with_ssl_client_auth() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let stores = format!(
        "ssl.keystore.type=PKCS12\n\
         ssl.keystore.location={}\n\
         ssl.keystore.password=store-pw\n\
         ssl.truststore.type=PKCS12\n\
         ssl.truststore.location={}\n\
         ssl.truststore.password=trust-pw\n",
        pki.path("server.p12"),
        pki.path("truststore.p12")
    );
    let port = free_port();
    let w = worker(
        dir.path(),
        &format!("listeners=https://localhost:{port}\nssl.client.auth=required\n{stores}"),
        None,
        &[],
        port,
    );
    let with = https_get(port, &pki, Some("client"), "/connectors");
    assert_eq!(with.status, 200, "{} {}", with.body, w.process.log());
    let without = https_get(port, &pki, None, "/connectors");
    assert_ne!(
        without.status, 200,
        "no client certificate: {}",
        without.body
    );
    let stranger = https_get(port, &pki, Some("stranger"), "/connectors");
    assert_ne!(
        stranger.status, 200,
        "an untrusted certificate: {}",
        stranger.body
    );
    drop(w);

    let port = free_port();
    let w = worker(
        dir.path(),
        &format!("listeners=https://localhost:{port}\nssl.client.auth=requested\n{stores}"),
        None,
        &[],
        port,
    );
    assert_eq!(
        https_get(port, &pki, None, "/connectors").status,
        200,
        "{}",
        w.process.log()
    );
    assert_eq!(
        https_get(port, &pki, Some("client"), "/connectors").status,
        200
    );
    assert_ne!(
        https_get(port, &pki, Some("stranger"), "/connectors").status,
        200
    );
    drop(w);

    // Client authentication without a truststore: refused at start.
    let (code, said) = refused(
        dir.path(),
        &format!(
            "listeners=https://127.0.0.1:{}\nssl.client.auth=required\nssl.keystore.location={}\nssl.keystore.password=store-pw\n",
            free_port(),
            pki.path("server.p12")
        ),
        &[],
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("ssl.client.auth=required needs a truststore"),
        "{said}"
    );
}

/// `admin.listeners`: the `/admin` endpoints on their own (here https) listener and not on
/// the API's; empty, nowhere. `rest.advertised.*` is the worker id statuses report.
#[test]
fn admin_listeners_and_the_advertised_address() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let api = free_port();
    let admin = free_port();
    let w = worker(
        dir.path(),
        &format!(
            "listeners=http://127.0.0.1:{api}\n\
             admin.listeners=https://localhost:{admin}\n\
             admin.listeners.https.ssl.keystore.type=PKCS12\n\
             admin.listeners.https.ssl.keystore.location={}\n\
             admin.listeners.https.ssl.keystore.password=store-pw\n\
             rest.advertised.host.name=connect-0.connect.svc\n\
             rest.advertised.port=30083\n",
            pki.path("server.p12")
        ),
        None,
        &[],
        api,
    );
    assert!(wait_for_port(admin, Duration::from_secs(10)));
    let api_url = format!("http://127.0.0.1:{api}");
    assert_eq!(curl(&[&format!("{api_url}/admin/loggers")]).status, 404);
    assert_eq!(curl(&[&format!("{api_url}/connectors")]).status, 200);
    let loggers = https_get(admin, &pki, None, "/admin/loggers");
    assert_eq!(loggers.status, 200, "{} {}", loggers.body, w.process.log());
    assert_eq!(https_get(admin, &pki, None, "/connectors").status, 404);

    let config = connector_config(json!({}));
    let created = send(
        "POST",
        &format!("{api_url}/connectors"),
        &json!({"name": "c", "config": config, "initial_state": "PAUSED"}).to_string(),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let status = curl(&[&format!("{api_url}/connectors/c/status")]).json();
    assert_eq!(
        status["connector"]["worker_id"],
        "connect-0.connect.svc:30083"
    );
    drop(w);

    let w = http_worker(dir.path(), "admin.listeners=\n", &[]);
    assert_eq!(curl(&[&format!("{}/admin/loggers", w.url)]).status, 404);
    assert_eq!(curl(&[&format!("{}/connectors", w.url)]).status, 200);
}

/// `rest.extension.classes=…BasicAuthSecurityRestExtension` with the JAAS file from
/// `KAFKA_OPTS`, as deployments set it: 401 with Connect's text without credentials or with
/// a wrong password, 200 with them; nothing can be stopped or moved unauthenticated.
#[test]
fn basic_auth_from_the_jaas_file_in_kafka_opts() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("connect.password");
    std::fs::write(&users, "admin=adm1n-pw\nops=ops-pw\n").unwrap();
    let jaas = dir.path().join("connect_jaas.conf");
    std::fs::write(
        &jaas,
        format!(
            "KafkaConnect {{\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n  file=\"{}\";\n}};\n",
            users.display()
        ),
    )
    .unwrap();
    let opts = format!(
        "-Xms256m -Djava.security.auth.login.config={}",
        jaas.display()
    );
    let w = http_worker(
        dir.path(),
        &format!("rest.extension.classes={BASIC_AUTH}\n"),
        &[("KAFKA_OPTS", &opts)],
    );
    let url = format!("{}/connectors", w.url);
    let none = curl(&[&url]);
    assert_eq!(
        (none.status, none.body.as_str()),
        (401, "User cannot access the resource.")
    );
    assert_eq!(curl(&["-u", "admin:wrong", &url]).status, 401);
    assert_eq!(curl(&["-u", "nobody:adm1n-pw", &url]).status, 401);
    assert_eq!(curl(&["-H", "Authorization: Basic !!!", &url]).status, 401);
    let ok = curl(&["-u", "admin:adm1n-pw", &url]);
    assert_eq!((ok.status, ok.body.as_str()), (200, "[]"));
    assert_eq!(
        curl(&["-u", "ops:ops-pw", &format!("{}/", w.url)]).status,
        200
    );
    // What could skip events is refused before it is looked at.
    for (method, path) in [
        ("PUT", "/connectors/c/stop"),
        ("PATCH", "/connectors/c/offsets"),
        ("DELETE", "/connectors/c"),
        ("PUT", "/admin/loggers/root"),
    ] {
        let answer = send(method, &format!("{}{path}", w.url), "{}");
        assert_eq!(answer.status, 401, "{method} {path}: {}", answer.body);
    }
    let config = connector_config(json!({}));
    let body = json!({"name": "c", "config": config, "initial_state": "STOPPED"}).to_string();
    let created = curl(&[
        "-u",
        "admin:adm1n-pw",
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        &url,
        "--data-binary",
        &body,
    ]);
    assert_eq!(created.status, 201, "{}", created.body);
    assert!(!w.process.log().contains("adm1n-pw"));
    drop(w);

    // What cannot protect the API stops the worker, naming it.
    let (code, said) = refused(
        dir.path(),
        "rest.extension.classes=com.example.SsoExtension\n",
        &[("KAFKA_OPTS", &opts)],
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("com.example.SsoExtension") && said.contains(BASIC_AUTH),
        "{said}"
    );
    let (code, said) = refused(
        dir.path(),
        &format!("rest.extension.classes={BASIC_AUTH}\n"),
        &[],
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("KAFKA_OPTS"), "{said}");
}

/// Malformed JSON, wrong types, huge bodies, unknown paths and methods: Connect's error shape
/// with a 4xx, never a 5xx, and the worker keeps serving.
#[test]
fn bad_requests_get_connects_error_shape() {
    let dir = tempfile::tempdir().unwrap();
    let w = http_worker(dir.path(), "", &[]);
    let huge = format!(
        "{{\"name\":\"c\",\"config\":{{\"x\":\"{}\"}}}}",
        "a".repeat(2 << 20)
    );
    let huge_path = dir.path().join("huge.json");
    std::fs::write(&huge_path, &huge).unwrap();
    let huge_arg = format!("@{}", huge_path.display());
    let cases: Vec<(&str, &str, &str, u16)> = vec![
        ("POST", "/connectors", "{bad", 400),
        ("POST", "/connectors", " ", 400),
        ("POST", "/connectors", "[1,2]", 400),
        ("POST", "/connectors", "{\"name\": 7}", 400),
        (
            "POST",
            "/connectors",
            "{\"name\": \"c\", \"config\": [1]}",
            400,
        ),
        (
            "POST",
            "/connectors",
            "{\"name\": \"c\", \"initial_state\": \"NOPE\"}",
            400,
        ),
        ("POST", "/connectors", &huge_arg, 413),
        ("PUT", "/connectors/c/config", "\"text\"", 400),
        (
            "PUT",
            "/connectors/c/config",
            "{\"a\": {\"nested\": true}}",
            400,
        ),
        ("PATCH", "/connectors/c/config", "{\"a\": null}", 404),
        (
            "PUT",
            "/connector-plugins/PostgresConnector/config/validate",
            "{}",
            400,
        ),
        (
            "PUT",
            "/connector-plugins/PostgresConnector/config/validate",
            "null",
            400,
        ),
        ("PATCH", "/connectors/c/offsets", "{\"offsets\": 5}", 404),
        ("PUT", "/admin/loggers/root", "{\"level\": 5}", 400),
        ("PUT", "/admin/loggers/root", "{\"level\": \"LOUD\"}", 404),
        ("GET", "/connectors/c/tasks/not-a-number/status", "", 400),
        ("GET", "/connectors/c/tasks/99999999999999/status", "", 400),
        ("GET", "/no/such/path", "", 404),
        ("DELETE", "/", "", 405),
        ("POST", "/connectors/c/pause", "", 405),
        ("GET", "/connectors/%ff%fe/status", "", 400),
    ];
    for (method, path, body, want) in cases {
        let url = format!("{}{path}", w.url);
        let answer = if body.is_empty() {
            curl(&["-X", method, &url])
        } else {
            send(method, &url, body)
        };
        assert_eq!(answer.status, want, "{method} {path}: {}", answer.body);
        let error = answer.json();
        assert_eq!(error["error_code"], want, "{method} {path}: {error}");
        assert!(error["message"].is_string(), "{method} {path}: {error}");
    }
    // A body that is not declared JSON.
    let answer = curl(&["-X", "POST", &format!("{}/connectors", w.url), "-d", "{}"]);
    assert_eq!(answer.status, 415);
    assert_eq!(answer.json()["message"], "HTTP 415 Unsupported Media Type");
    assert_eq!(curl(&[&format!("{}/connectors", w.url)]).status, 200);
    let openapi = curl(&[&format!("{}/openapi.json", w.url)]).json();
    assert_eq!(openapi["openapi"], "3.0.3");
    assert!(openapi["paths"]["/connectors/{name}/offsets"].is_object());
    assert!(!w.process.log().contains("panicked"), "{}", w.process.log());
}

/// schemathesis (PyPI) against the served OpenAPI document, behind basic authentication: no
/// request it generates gets a server error.
#[test]
fn schemathesis_finds_no_server_error() {
    // Where scripts/install-deps.sh puts it.
    let tools = std::env::var("OUTBOX_RELAY_TOOLS").unwrap_or_else(|_| {
        format!(
            "{}/.cache/outbox-relay",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let st = std::env::var("OUTBOX_RELAY_SCHEMATHESIS")
        .unwrap_or_else(|_| format!("{tools}/schemathesis/bin/st"));
    assert!(
        Path::new(&st).exists(),
        "schemathesis is not installed at {st}: run scripts/install-deps.sh (it installs it from PyPI into a venv), \
         or point OUTBOX_RELAY_SCHEMATHESIS at its `st`"
    );
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, "fuzzer=fuzz-pw\n").unwrap();
    let jaas = dir.path().join("jaas.conf");
    std::fs::write(
        &jaas,
        format!(
            "KafkaConnect {{ org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required file=\"{}\"; }};",
            users.display()
        ),
    )
    .unwrap();
    let opts = format!("-Djava.security.auth.login.config={}", jaas.display());
    let w = http_worker(
        dir.path(),
        &format!("rest.extension.classes={BASIC_AUTH}\n"),
        &[("KAFKA_OPTS", &opts)],
    );
    let examples =
        std::env::var("OUTBOX_RELAY_SCHEMATHESIS_EXAMPLES").unwrap_or_else(|_| "40".into());
    let out = Command::new(&st)
        .current_dir(dir.path())
        .args([
            "run",
            &format!("{}/openapi.json", w.url),
            "--url",
            &w.url,
            "--max-examples",
            &examples,
            "--checks",
            "not_a_server_error",
            "--seed",
            "20261125",
            "--no-color",
            "--workers",
            "1",
            "--generation-database",
            "none",
            "--auth",
            "fuzzer:fuzz-pw",
        ])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "schemathesis: {said}\nworker log:\n{}",
        w.process.log()
    );
    assert!(said.contains("passed") || said.contains("Passed"), "{said}");
    assert!(!w.process.log().contains("panicked"), "{}", w.process.log());
}

/// The worker's own clients (the config topic's producer and consumer, the cluster-id lookup)
/// use its `security.protocol`, `sasl.*`: against an Apache Kafka broker that only speaks
/// SASL/PLAIN, a registration is kept in the config topic and a restarted worker brings it back;
/// a wrong password is refused.
#[test]
fn the_config_topic_and_the_cluster_id_go_through_the_workers_sasl_settings() {
    config_topic_through("SASL_PLAINTEXT", "PLAIN");
}

/// The same with SCRAM-SHA-256: the worker's group membership runs Kafka's SCRAM exchange.
#[test]
fn the_config_topic_and_the_group_go_through_the_workers_scram_settings() {
    config_topic_through("SASL_PLAINTEXT", "SCRAM-SHA-256");
}

/// The same over TLS (`SASL_SSL`): the broker's certificate is checked against the worker's
/// PKCS12 truststore (`ssl.truststore.*`), host name included.
#[test]
fn the_config_topic_and_the_cluster_id_go_through_the_workers_tls_settings() {
    config_topic_through("SASL_SSL", "PLAIN");
}

fn config_topic_through(protocol: &str, mechanism: &str) {
    let port = free_port();
    let controller = free_port();
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let (broker_tls, worker_tls) = if protocol == "SASL_SSL" {
        (
            format!(
                "ssl.keystore.location={}\nssl.keystore.type=PKCS12\nssl.keystore.password=store-pw\n\
                 ssl.key.password=store-pw\nssl.truststore.location={}\nssl.truststore.type=PKCS12\n\
                 ssl.truststore.password=trust-pw\n",
                pki.path("server.p12"),
                pki.path("truststore.p12")
            ),
            format!(
                "ssl.truststore.location={}\nssl.truststore.type=PKCS12\nssl.truststore.password=trust-pw\n",
                pki.path("truststore.p12")
            ),
        )
    } else {
        (String::new(), String::new())
    };
    let listener = protocol.to_lowercase();
    let broker = outbox_relay_testkit::Broker::start_private_with_scram(&format!(
        "listeners={protocol}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
         advertised.listeners={protocol}://127.0.0.1:{port}\n\
         listener.security.protocol.map={protocol}:{protocol},CONTROLLER:PLAINTEXT\n\
         inter.broker.listener.name={protocol}\n\
         controller.quorum.voters=1@127.0.0.1:{controller}\n\
         sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n\
         sasl.mechanism.inter.broker.protocol=PLAIN\n\
         {broker_tls}\
         listener.name.{listener}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"admin\" password=\"admin-pw\" user_admin=\"admin-pw\" user_connect=\"connect-pw\";\n\
         listener.name.{listener}.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
    ), &["SCRAM-SHA-256=[name=connect,password=connect-pw]"])
    .unwrap_or_else(|e| panic!("a {protocol} broker: {e:#}"));
    let module = if mechanism == "PLAIN" {
        "plain.PlainLoginModule"
    } else {
        "scram.ScramLoginModule"
    };
    let sasl = |password: &str| {
        format!(
            "bootstrap.servers=127.0.0.1:{port}\n\
             group.id=secured\n\
             config.storage.topic=connect-configs\n\
             config.storage.replication.factor=1\n\
             status.storage.topic=connect-status\n\
             status.storage.replication.factor=1\n\
             security.protocol={protocol}\n\
             sasl.mechanism={mechanism}\n\
             {worker_tls}\
             sasl.jaas.config=org.apache.kafka.common.security.{module} required username=\"connect\" password=\"{password}\";\n"
        )
    };
    let start = |properties: String| {
        let path = dir
            .path()
            .join(format!("worker-{}.properties", free_port()));
        std::fs::write(&path, properties).unwrap();
        let rest = free_port();
        let args: Vec<String> = [
            "connect",
            "--worker-config",
            path.to_str().unwrap(),
            "--listen",
            &format!("127.0.0.1:{rest}"),
            "--metrics-address",
            "127.0.0.1:0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        (
            RelayProcess::spawn(Path::new(RELAY), &args, &[]).unwrap(),
            rest,
        )
    };
    let (mut first, rest) = start(sasl("connect-pw"));
    assert!(
        wait_for_port(rest, Duration::from_secs(60)),
        "{}\n{}",
        first.log(),
        broker.log()
    );
    let url = format!("http://127.0.0.1:{rest}");
    let config = connector_config(json!({}));
    let created = send(
        "POST",
        &format!("{url}/connectors"),
        &json!({"name": "over-sasl", "config": config, "initial_state": "STOPPED"}).to_string(),
    );
    assert_eq!(created.status, 201, "{} {}", created.body, first.log());
    // A worker of a cluster (group.id): its group membership speaks the same SASL (and TLS).
    // The connector is assigned to it, and its state is written to the status topic and read
    // back from there.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = curl(&[&format!("{url}/connectors/over-sasl/status")]).json();
        if status["connector"]["state"] == "STOPPED"
            && status["connector"]["worker_id"] == format!("127.0.0.1:{rest}")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{status}\n{}",
            first.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // The cluster id, asked of the broker over SASL.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if curl(&[&format!("{url}/")]).json()["kafka_cluster_id"].is_string() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no cluster id: {}",
            first.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    first.terminate(Duration::from_secs(20)).unwrap();

    let (second, rest) = start(sasl("connect-pw"));
    assert!(
        wait_for_port(rest, Duration::from_secs(60)),
        "{}",
        second.log()
    );
    let listed = curl(&[&format!("http://127.0.0.1:{rest}/connectors")]);
    assert_eq!(listed.json(), json!(["over-sasl"]), "{}", second.log());
    drop(second);

    // A wrong password: the worker does not start.
    let (mut wrong, _) = start(sasl("wrong-pw"));
    let status = wrong
        .wait_timeout(Duration::from_secs(60))
        .unwrap()
        .unwrap_or_else(|| {
            panic!(
                "a worker with a wrong SASL password kept running:\n{}",
                wrong.log()
            )
        });
    assert!(!status.success(), "{}", wrong.log());
    let said = wrong.log();
    assert!(
        said.contains("Authentication") && said.contains("sasl.*"),
        "the refusal says why and what to check: {said}"
    );
    assert!(!said.contains("wrong-pw"), "{said}");
}
