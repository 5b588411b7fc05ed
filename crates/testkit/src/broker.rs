//! Apache Kafka (KRaft, one node as broker and controller) on free loopback ports, from the
//! jars `scripts/install-kafka.sh` fetches from Maven Central (`scripts/kafka/pom.xml`).
//!
//! A JVM takes seconds to start, so brokers are pooled per test process: `Broker::start`
//! hands out an idle one (or starts one), and dropping it deletes its topics and consumer
//! groups and gives it back. A broker a test stopped or restarted (chaos) is never given
//! back: it is killed. Every broker is killed when the test process ends (the parent-death
//! signal of a thread that lives as long as the process).

use anyhow::{bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The Kafka version `scripts/kafka/pom.xml` pins.
pub const KAFKA_VERSION: &str = "4.3.0";

const INSTALL_HINT: &str = "install Apache Kafka's jars with `scripts/install-kafka.sh` (Maven \
     Central, through scripts/kafka/pom.xml; scripts/install-deps.sh runs it), or point \
     OUTBOX_RELAY_KAFKA_LIBS at a directory of Kafka's jars";

/// Kept for the tests' own words: both kinds are Kafka, durable on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    Memory,
    Sqlite,
}

/// The directory of Kafka's jars: OUTBOX_RELAY_KAFKA_LIBS, else where install-kafka.sh puts
/// them.
pub fn kafka_libs() -> Result<PathBuf> {
    let dir = match std::env::var_os("OUTBOX_RELAY_KAFKA_LIBS") {
        Some(dir) => PathBuf::from(dir),
        None => tools_dir().join(format!("kafka-{KAFKA_VERSION}")),
    };
    if !dir
        .join(format!("kafka_2.13-{KAFKA_VERSION}.jar"))
        .is_file()
        && std::env::var_os("OUTBOX_RELAY_KAFKA_LIBS").is_none()
    {
        bail!(
            "Apache Kafka {KAFKA_VERSION} not found in {}; {INSTALL_HINT}",
            dir.display()
        );
    }
    Ok(dir)
}

/// `OUTBOX_RELAY_TOOLS`, else `~/.cache/outbox-relay`: where the scripts install test tools.
pub fn tools_dir() -> PathBuf {
    std::env::var_os("OUTBOX_RELAY_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/outbox-relay")
        })
}

/// One Kafka process and its data.
struct Node {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
    /// The log's length when the process was last started.
    log_from: u64,
}

/// A broker's data directory: `<prefix><pid>-<random>` in the temporary directory.
const DIR_PREFIX: &str = "outbox-relay-kafka-";

/// Removes the data directories of test processes that ended: the pool's brokers live in a
/// static, which is never dropped, so each test binary leaves its brokers' directories
/// behind (hundreds of megabytes each); the next binary that starts a broker removes them.
fn sweep_dead_processes_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(DIR_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Every test broker's cluster id (each broker is a cluster of its own).
const CLUSTER_ID: &str = "b3V0Ym94LXJlbGF5LXRzdA";

/// A broker for one test: exclusively its own while it holds it.
pub struct Broker {
    node: Option<Node>,
    /// Stopped or restarted by the test: killed at the end, not given back.
    tainted: bool,
    pub storage: Storage,
}

static POOL: Mutex<Vec<Node>> = Mutex::new(Vec::new());

impl Broker {
    /// An idle broker of this process's pool, or a new one.
    pub fn start(storage: Storage) -> Result<Self> {
        let pooled = POOL.lock().unwrap().pop();
        let node = match pooled {
            Some(node) => node,
            None => Node::start()?,
        };
        Ok(Self {
            node: Some(node),
            tainted: false,
            storage,
        })
    }

    /// A broker of its own, never pooled, with `extra` lines in its server.properties (a
    /// create-topic policy, say).
    pub fn start_private_with(extra: &str) -> Result<Self> {
        Self::start_private_with_scram(extra, &[])
    }

    /// A broker of its own with `extra` server.properties lines and SCRAM users (each as
    /// `kafka-storage format --add-scram` takes it: `SCRAM-SHA-256=[name=u,password=p]`).
    pub fn start_private_with_scram(extra: &str, scram: &[&str]) -> Result<Self> {
        let controller = crate::net::free_port();
        let node = Node::configure(&NodeConfig {
            id: 1,
            port: crate::net::free_port(),
            controller,
            voters: format!("1@127.0.0.1:{controller}"),
            extra: extra.to_owned(),
            scram: scram.iter().map(|s| (*s).to_owned()).collect(),
        })?;
        Ok(Self {
            node: Some(Node::launched(node)?),
            tainted: true,
            storage: Storage::Sqlite,
        })
    }

    fn node(&self) -> &Node {
        self.node.as_ref().expect("a broker")
    }

    pub fn bootstrap_servers(&self) -> String {
        format!("127.0.0.1:{}", self.node().port)
    }

    pub fn port(&self) -> u16 {
        self.node().port
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.node().dir.path().join("kafka.log")).unwrap_or_default()
    }

    /// Kills the broker (SIGKILL: what it acknowledged with acks=all is on disk).
    pub fn stop(&mut self) {
        self.tainted = true;
        if let Some(node) = self.node.as_mut() {
            node.kill();
        }
    }

    /// Starts the broker again on the same port with the same data.
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        let node = self.node.as_mut().expect("a broker");
        node.spawn()?;
        node.wait_started()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let Some(mut node) = self.node.take() else {
            return;
        };
        if !self.tainted && node.running() && node.clean().is_ok() {
            POOL.lock().unwrap().push(node);
        } else {
            node.kill();
        }
    }
}

/// Requests to the thread that starts every Kafka process: the parent-death signal is tied to
/// the thread that forks, and this one lives as long as the test process.
type Spawn = (Command, mpsc::Sender<std::io::Result<Child>>);

fn spawner() -> &'static Mutex<mpsc::Sender<Spawn>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Spawn>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Spawn>();
        std::thread::Builder::new()
            .name("kafka-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
                // The process is ending: this thread must not end before it.
                loop {
                    std::thread::park();
                }
            })
            .expect("the kafka spawner thread");
        Mutex::new(tx)
    })
}

pub(crate) fn spawn_tied_to_process(mut command: Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    spawner()
        .lock()
        .unwrap()
        .send((command, tx))
        .map_err(|_| std::io::Error::other("the kafka spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the kafka spawner thread is gone"))?
}

/// The JVM's options: a small heap; `OUTBOX_RELAY_KAFKA_OPTS` adds to them (benchmarks give
/// the broker the full JIT).
fn jvm_options(dir: &std::path::Path) -> Vec<String> {
    let mut options: Vec<String> = [
        "-Xmx512m",
        "-Xms64m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Xshare:auto",
        "-Djava.awt.headless=true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    options.push(format!(
        "-Dlog4j2.configurationFile={}",
        dir.join("log4j2.properties").display()
    ));
    if let Ok(extra) = std::env::var("OUTBOX_RELAY_KAFKA_OPTS") {
        options.extend(extra.split_whitespace().map(str::to_owned));
    }
    options
}

/// One KRaft node (broker and controller) of a cluster of `voters`.
struct NodeConfig {
    id: u32,
    port: u16,
    controller: u16,
    /// `controller.quorum.voters`.
    voters: String,
    /// Lines added to server.properties.
    extra: String,
    /// SCRAM credentials created with the storage (`--add-scram`, e.g.
    /// `SCRAM-SHA-256=[name=connect,password=pw]`).
    scram: Vec<String>,
}

impl Node {
    /// A single-node broker on free ports. Ports are free when chosen, but a test binary
    /// running beside this one may take one before the broker binds it: then on new ports.
    fn start() -> Result<Self> {
        let mut attempt = 0;
        loop {
            let port = crate::net::free_port();
            let controller = crate::net::free_port();
            let node = Self::configure(&NodeConfig {
                id: 1,
                port,
                controller,
                voters: format!("1@127.0.0.1:{controller}"),
                extra: String::new(),
                scram: Vec::new(),
            })?;
            match Self::launched(node) {
                Err(e) if attempt < 3 && format!("{e:#}").contains("Address already in use") => {
                    attempt += 1;
                }
                started => return started,
            }
        }
    }

    fn launched(mut node: Self) -> Result<Self> {
        node.spawn()?;
        node.wait_started()?;
        Ok(node)
    }

    /// Writes the node's configuration and formats its storage; not started.
    fn configure(config: &NodeConfig) -> Result<Self> {
        sweep_dead_processes_dirs();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
            .tempdir()?;
        let NodeConfig {
            id,
            port,
            controller,
            voters,
            extra,
            scram,
        } = config;
        let replicas = voters.split(',').count();
        let min_isr = replicas.min(2);
        let data = dir.path().join("data");
        std::fs::write(
            dir.path().join("server.properties"),
            format!(
                "process.roles=broker,controller\n\
                 node.id={id}\n\
                 controller.quorum.voters={voters}\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 controller.listener.names=CONTROLLER\n\
                 inter.broker.listener.name=PLAINTEXT\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
                 log.dirs={}\n\
                 num.partitions=1\n\
                 default.replication.factor={replicas}\n\
                 offsets.topic.replication.factor={replicas}\n\
                 offsets.topic.num.partitions=5\n\
                 transaction.state.log.replication.factor={replicas}\n\
                 transaction.state.log.min.isr={min_isr}\n\
                 transaction.state.log.num.partitions=5\n\
                 share.coordinator.state.topic.replication.factor={replicas}\n\
                 share.coordinator.state.topic.min.isr={min_isr}\n\
                 group.initial.rebalance.delay.ms=0\n\
                 auto.create.topics.enable=false\n\
                 unclean.leader.election.enable=false\n\
                 delete.topic.enable=true\n{extra}",
                data.display()
            ),
        )?;
        std::fs::write(
            dir.path().join("log4j2.properties"),
            "rootLogger.level=WARN\nrootLogger.appenderRef.out.ref=OUT\n\
             appender.out.type=Console\nappender.out.name=OUT\n\
             appender.out.layout.type=PatternLayout\n\
             appender.out.layout.pattern=[%d] %p %m (%c)%n\n\
             logger.started.name=kafka.server.KafkaRaftServer\nlogger.started.level=INFO\n",
        )?;
        let node = Self {
            child: None,
            dir,
            port: *port,
            log_from: 0,
        };
        let mut format = node.java("kafka.tools.StorageTool");
        format
            .args(["format", "--ignore-formatted", "-t", CLUSTER_ID])
            .arg("-c")
            .arg(node.dir.path().join("server.properties"));
        for credential in scram {
            format.arg("--add-scram").arg(credential);
        }
        let out = format
            .output()
            .with_context(|| format!("formatting Kafka's storage; {INSTALL_HINT}"))?;
        if !out.status.success() {
            bail!(
                "formatting Kafka's storage: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(node)
    }

    fn java(&self, main: &str) -> Command {
        let libs = kafka_libs().unwrap_or_default();
        let mut command = Command::new(java());
        command
            .args(jvm_options(self.dir.path()))
            .arg("-cp")
            .arg(format!("{}/*", libs.display()))
            .arg(main)
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        command
    }

    fn spawn(&mut self) -> Result<()> {
        kafka_libs()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("kafka.log"))?;
        // Each start's "started" line is looked for after what earlier starts wrote.
        self.log_from = log.metadata().map(|m| m.len()).unwrap_or(0);
        let mut command = self.java("kafka.Kafka");
        command
            .arg(self.dir.path().join("server.properties"))
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = spawn_tied_to_process(command)
            .with_context(|| format!("starting Apache Kafka with {}; {INSTALL_HINT}", java()))?;
        self.child = Some(child);
        Ok(())
    }

    fn wait_started(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let log = std::fs::read(self.dir.path().join("kafka.log")).unwrap_or_default();
            let new =
                String::from_utf8_lossy(log.get(self.log_from as usize..).unwrap_or_default());
            if new.contains("Kafka Server started") {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!("Apache Kafka exited ({status}) at start; its log:\n{new}");
            }
            if Instant::now() > deadline {
                bail!("Apache Kafka did not start within 90 s; its log:\n{new}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Deletes every topic but Kafka's own and every consumer group, and waits until the
    /// broker no longer lists them: the next test finds it empty.
    fn clean(&self) -> Result<()> {
        let bootstrap = format!("127.0.0.1:{}", self.port);
        let mut config = rdkafka::ClientConfig::new();
        config
            .set("bootstrap.servers", &bootstrap)
            .set("log_level", "3");
        let admin: AdminClient<DefaultClientContext> = config.create()?;
        let consumer: BaseConsumer = config.create()?;
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let groups: Vec<String> = consumer
            .fetch_group_list(None, Duration::from_secs(10))?
            .groups()
            .iter()
            .map(|g| g.name().to_owned())
            .collect();
        if !groups.is_empty() {
            let names: Vec<&str> = groups.iter().map(String::as_str).collect();
            futures::executor::block_on(admin.delete_groups(&names, &options))?;
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let topics: Vec<String> = consumer
                .fetch_metadata(None, Duration::from_secs(10))?
                .topics()
                .iter()
                .map(|t| t.name().to_owned())
                .filter(|t| !t.starts_with("__"))
                .collect();
            if topics.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("topics still listed after deletion: {topics:?}");
            }
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            futures::executor::block_on(admin.delete_topics(&names, &options))?;
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `JAVA_HOME/bin/java`, else `java` on PATH.
pub(crate) fn java() -> String {
    std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin/java"))
        .filter(|p| p.is_file())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "java".into())
}

/// A cluster of Kafka nodes (each a broker and a controller): replication factor and
/// `default.replication.factor` = the node count, `min.insync.replicas=2`, no unclean
/// leader election. For the failures only a real cluster shows: a leader killed, too few
/// replicas in sync for `acks=all`, a broker restarted.
pub struct Cluster {
    nodes: Vec<Node>,
}

impl Cluster {
    pub fn start(size: usize) -> Result<Self> {
        let ports: Vec<(u16, u16)> = (0..size)
            .map(|_| (crate::net::free_port(), crate::net::free_port()))
            .collect();
        let voters = ports
            .iter()
            .enumerate()
            .map(|(i, (_, controller))| format!("{}@127.0.0.1:{controller}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for (i, (port, controller)) in ports.iter().enumerate() {
            nodes.push(Node::configure(&NodeConfig {
                id: i as u32 + 1,
                port: *port,
                controller: *controller,
                voters: voters.clone(),
                // A replica that stops fetching leaves the in-sync set within seconds.
                extra: format!(
                    "min.insync.replicas={}\nreplica.lag.time.max.ms=3000\n",
                    size.min(2)
                ),
                scram: Vec::new(),
            })?);
        }
        // Together: a node waits for a quorum of controllers before it says it started.
        for node in &mut nodes {
            node.spawn()?;
        }
        for node in &mut nodes {
            node.wait_started()?;
        }
        Ok(Self { nodes })
    }

    pub fn bootstrap_servers(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `id` (1-based, as the broker ids) killed with SIGKILL.
    pub fn kill(&mut self, id: i32) {
        self.nodes[id as usize - 1].kill();
    }

    /// Node `id` started again with its data; returns once it serves.
    pub fn start_node(&mut self, id: i32) -> Result<()> {
        let node = &mut self.nodes[id as usize - 1];
        node.spawn()?;
        node.wait_started()
    }

    /// The broker id leading `topic`'s `partition` now, as metadata says.
    /// The partition's leader; waits (up to 30 s) while the topic is not created yet or its
    /// partition has no leader (a loaded machine: the relay creates topics as events come).
    pub fn leader(&self, topic: &str, partition: i32) -> Result<i32> {
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap_servers())
            .set("log_level", "3")
            .create()?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let leader = consumer
                .fetch_metadata(Some(topic), Duration::from_secs(10))
                .ok()
                .and_then(|md| {
                    md.topics()
                        .first()
                        .and_then(|t| t.partitions().iter().find(|p| p.id() == partition))
                        .map(|p| p.leader())
                        .filter(|l| *l >= 0)
                });
            match leader {
                Some(leader) => return Ok(leader),
                None if Instant::now() > deadline => {
                    bail!("{topic}/{partition} has no leader after 30 s")
                }
                None => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// Every node's log, for a failure message.
    pub fn log(&self) -> String {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                format!(
                    "--- node {} ---\n{}",
                    i + 1,
                    std::fs::read_to_string(n.dir.path().join("kafka.log")).unwrap_or_default()
                )
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
    }
}
