//! Apicurio Registry 2.6 (in-memory storage) on a free loopback port, from the distribution
//! `scripts/install-apicurio.sh` fetches from Maven Central: the schema registry of the Avro
//! converter tests. Confluent's clients use [`Registry::ccompat_url`], Apicurio's converter
//! [`Registry::apicurio_url`]. Killed on drop (and with the test process).

use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const APICURIO_VERSION: &str = "2.6.13.Final";

const INSTALL_HINT: &str = "install it with `scripts/install-apicurio.sh` (Maven Central; \
     scripts/install-deps.sh runs it) and Java 17, or point OUTBOX_RELAY_APICURIO at the \
     unpacked apicurio-registry-app distribution";

pub struct Registry {
    port: u16,
    child: Option<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// The runner jar: OUTBOX_RELAY_APICURIO, else where install-apicurio.sh unpacks it.
fn runner() -> Result<PathBuf> {
    let dir = match std::env::var_os("OUTBOX_RELAY_APICURIO") {
        Some(dir) => PathBuf::from(dir),
        None => crate::broker::tools_dir().join(format!("apicurio-registry-{APICURIO_VERSION}")),
    };
    let jar = dir.join(format!(
        "apicurio-registry-app-{APICURIO_VERSION}-runner.jar"
    ));
    if !jar.is_file() {
        bail!(
            "Apicurio Registry {APICURIO_VERSION} not found in {}; {INSTALL_HINT}",
            dir.display()
        );
    }
    Ok(jar)
}

/// `GET path` on loopback `port`: the status, if anything answered.
fn status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: registry\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

impl Registry {
    /// Starts a registry on a free loopback port and waits until it answers.
    pub fn start() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut registry = Registry {
            port: crate::net::free_port(),
            child: None,
            log: dir.path().join("registry.log"),
            _dir: dir,
        };
        registry.spawn()?;
        Ok(registry)
    }

    fn spawn(&mut self) -> Result<()> {
        let jar = runner()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut command = Command::new(crate::broker::java());
        command
            .args(["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .arg("-Dquarkus.http.host=127.0.0.1")
            .arg(format!("-Dquarkus.http.port={}", self.port))
            .arg("-jar")
            .arg(&jar)
            .current_dir(self._dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = crate::broker::spawn_tied_to_process(command).with_context(|| {
            format!(
                "starting Apicurio Registry with `{}`; {INSTALL_HINT}",
                crate::broker::java()
            )
        })?;
        self.child = Some(child);
        // Seconds on an idle machine; much longer on a loaded one.
        let deadline = Instant::now() + Duration::from_secs(180);
        while status(self.port, "/apis/ccompat/v7/subjects") != Some(200) {
            if let Some(Ok(Some(exit))) = self.child.as_mut().map(Child::try_wait) {
                bail!(
                    "Apicurio Registry exited ({exit}) before it answered:\n{}",
                    self.log()
                );
            }
            if Instant::now() > deadline {
                bail!("Apicurio Registry did not answer in 180 s:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The base URL of Confluent's REST API (`schema.registry.url`).
    pub fn ccompat_url(&self) -> String {
        format!("http://127.0.0.1:{}/apis/ccompat/v7", self.port)
    }

    /// The base URL of Apicurio's own API (`apicurio.registry.url`).
    pub fn apicurio_url(&self) -> String {
        format!("http://127.0.0.1:{}/apis/registry/v2", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kills the registry (its schemas are lost: in-memory storage).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        self.spawn()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An HTTP front that lets through only requests with the given basic credentials and
/// answers 401 to the others: a registry that checks passwords, in front of one that does not.
pub struct BasicAuthGate {
    port: u16,
}

impl BasicAuthGate {
    pub fn start(upstream: u16, user: &str, password: &str) -> Result<Self> {
        use std::io::BufRead;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let expected = format!(
            "basic {}",
            base64_encode(format!("{user}:{password}").as_bytes())
        );
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let expected = expected.clone();
                std::thread::spawn(move || -> std::io::Result<()> {
                    let mut reader = std::io::BufReader::new(client.try_clone()?);
                    let mut head = Vec::new();
                    let (mut length, mut authorized) = (0usize, false);
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line)? == 0 {
                            return Ok(());
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if let Some(v) = lower.strip_prefix("authorization:") {
                            authorized = v.trim() == expected.to_ascii_lowercase();
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if !lower.starts_with("connection:") {
                            head.extend_from_slice(line.as_bytes());
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body)?;
                    let mut client = client;
                    if !authorized {
                        let msg = r#"{"error_code":401,"message":"Unauthorized"}"#;
                        write!(
                            client,
                            "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
                            msg.len()
                        )?;
                        return Ok(());
                    }
                    let mut server = TcpStream::connect(("127.0.0.1", upstream))?;
                    server.write_all(&head)?;
                    server.write_all(b"Connection: close\r\n\r\n")?;
                    server.write_all(&body)?;
                    let mut response = Vec::new();
                    server.read_to_end(&mut response)?;
                    client.write_all(&response)?;
                    Ok(())
                });
            }
        });
        Ok(Self { port })
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

/// A request a [`RecordingProxy`] forwarded: its method, path (with the query), headers
/// (names in lower case) and body.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP front that forwards every request to a registry and keeps a copy of each: what a
/// client registered, looked up and fetched, in order. One request per connection (it
/// answers `Connection: close`), which every registry client handles. The fronts of a process
/// forward one request at a time: two clients registering a new subject at once meet
/// Apicurio's race (the second creation is refused with 409, "already exists"), which no
/// deployment of one writer meets.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// See [`ONE_AT_A_TIME`].
pub struct RecordingProxy {
    port: u16,
    requests: std::sync::Arc<std::sync::Mutex<Vec<RecordedRequest>>>,
}

impl RecordingProxy {
    pub fn start(upstream: u16) -> Result<Self> {
        use std::io::BufRead;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = requests.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let recorded = recorded.clone();
                std::thread::spawn(move || -> std::io::Result<()> {
                    let mut reader = std::io::BufReader::new(client.try_clone()?);
                    let mut head = Vec::new();
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line)? == 0 {
                        return Ok(());
                    }
                    head.extend_from_slice(request_line.as_bytes());
                    let mut headers = Vec::new();
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line)? == 0 {
                            return Ok(());
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':') {
                            let name = name.trim().to_ascii_lowercase();
                            let value = value.trim().to_owned();
                            if name == "content-length" {
                                length = value.parse().unwrap_or(0);
                            }
                            if name == "connection" {
                                continue;
                            }
                            headers.push((name, value));
                        }
                        head.extend_from_slice(line.as_bytes());
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body)?;
                    let mut parts = request_line.split_whitespace();
                    recorded
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(RecordedRequest {
                            method: parts.next().unwrap_or_default().to_owned(),
                            path: parts.next().unwrap_or_default().to_owned(),
                            headers,
                            body: body.clone(),
                        });
                    let response = {
                        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
                        let mut server = TcpStream::connect(("127.0.0.1", upstream))?;
                        server.write_all(&head)?;
                        server.write_all(b"Connection: close\r\n\r\n")?;
                        server.write_all(&body)?;
                        let mut response = Vec::new();
                        server.read_to_end(&mut response)?;
                        response
                    };
                    let mut client = client;
                    client.write_all(&response)?;
                    Ok(())
                });
            }
        });
        Ok(Self { port, requests })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The requests forwarded so far, in the order they arrived.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn base64_encode(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}
