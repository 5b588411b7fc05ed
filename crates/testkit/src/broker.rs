//! A tansu broker (Apache Kafka protocol, written in Rust) on a free loopback port.
//! See shared/docs/kafka-broker.md: no topic auto-creation, no transactions.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const INSTALL_HINT: &str = "install the tansu broker with `scripts/install-tansu.sh` \
     (cargo install tansu --version 0.6.0 --locked --features dynostore,libsql), \
     or point OUTBOX_RELAY_TANSU at the binary";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// Fast, lost on restart; its offset queries are wrong (see kafka-broker.md).
    Memory,
    /// Durable in a sqlite file: survives a restart or SIGKILL of the broker.
    Sqlite,
}

pub struct Broker {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
    storage: Storage,
}

/// Where the tansu binary is: OUTBOX_RELAY_TANSU, then PATH, then ~/.cargo/bin.
pub fn tansu_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("OUTBOX_RELAY_TANSU") {
        return Ok(PathBuf::from(p));
    }
    let candidates = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("tansu"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .chain(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin/tansu")));
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
    }
    bail!("tansu broker not found; {INSTALL_HINT}")
}

impl Broker {
    pub fn start(storage: Storage) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("outbox-relay-tansu-")
            .tempdir()?;
        let mut broker = Self {
            child: None,
            dir,
            port: crate::net::free_port(),
            storage,
        };
        broker.spawn()?;
        Ok(broker)
    }

    fn spawn(&mut self) -> Result<()> {
        let bin = tansu_binary()?;
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let engine = match self.storage {
            Storage::Memory => "memory://tansu/",
            // sqlite paths are relative to the working directory: we start it in our own.
            Storage::Sqlite => "sqlite://tansu.db",
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("tansu.log"))?;
        let child = Command::new(&bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", engine])
            .current_dir(self.dir.path())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}; {INSTALL_HINT}", bin.display()))?;
        self.child = Some(child);
        if !crate::net::wait_for_port(self.port, Duration::from_secs(20)) {
            bail!(
                "tansu did not listen on port {} within 20 s; its log:\n{}",
                self.port,
                self.log()
            );
        }
        Ok(())
    }

    pub fn bootstrap_servers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("tansu.log")).unwrap_or_default()
    }

    /// Stops the broker (SIGKILL: acked data survives with sqlite://).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the broker again on the same port with the same data.
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        self.spawn()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}
