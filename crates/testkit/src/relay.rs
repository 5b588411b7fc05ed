//! The outbox-relay binary as a child process, its output kept in a log file.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub struct RelayProcess {
    child: Child,
    log_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl RelayProcess {
    pub fn spawn(binary: &Path, args: &[String], env: &[(&str, &str)]) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("outbox-relay-run-")
            .tempdir()?;
        let log_path = dir.path().join("relay.log");
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = Command::new(binary);
        cmd.args(args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Self {
            child,
            log_path,
            _dir: dir,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The relay's threads as the kernel sees them: name, state (R running, S sleeping, D
    /// blocked), CPU ticks (user + system) and what a sleeping thread waits in (wchan). For a
    /// failure message: a relay that stopped talking is either spinning or blocked.
    pub fn threads(&self) -> String {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid())) else {
            return "no longer running".into();
        };
        let read = |path: std::path::PathBuf| std::fs::read_to_string(path).unwrap_or_default();
        let mut threads: Vec<String> = tasks
            .flatten()
            .map(|task| {
                let dir = task.path();
                let stat = read(dir.join("stat"));
                // The fields after the name: state first, then utime and stime as 12th and 13th.
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or("", |(_, rest)| rest)
                    .split_whitespace()
                    .collect();
                let field = |i: usize| fields.get(i).copied().unwrap_or("?");
                format!(
                    "{} {} cpu {}+{} wchan {}",
                    read(dir.join("comm")).trim(),
                    field(0),
                    field(11),
                    field(12),
                    read(dir.join("wchan")).trim()
                )
            })
            .collect();
        threads.sort();
        threads.join("; ")
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.wait_timeout(timeout)
    }

    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() > deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the log contains `needle`; panics with the log after `timeout`.
    /// Replayed events this relay reported skipping with `--exactly-once` (its
    /// "not produced again … skipped=N" lines; a partition is counted once it passed its tail).
    pub fn exactly_once_skipped(&self) -> u64 {
        self.log()
            .lines()
            .filter(|l| l.contains("not produced again"))
            .filter_map(|l| {
                l.split("skipped=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    }

    pub async fn wait_for_log(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.log().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in the relay's log within {timeout:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A `kB` field of a process's `/proc/<pid>/status` (`VmRSS:`, `VmHWM:` …), in KiB: what
/// the benchmarks report of memory.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
