//! Fewer wake-ups while the stream catches up (outbox-relay's change to the
//! vendored crate; see the manifest).
//!
//! The walsender writes each change to the socket as soon as it has decoded
//! it. A client that is faster than its walsender therefore wakes for every
//! few messages, and each wake-up (epoll, a `recv`, a round of the runtime)
//! costs more than decoding the messages it brings. While the stream is
//! behind the database, nothing is gained by waking that often: the changes
//! are already late by far more than a wake-up. So while the walsender sends
//! changes of transactions that committed more than [`LAG`] ago (both times
//! are the server's clock: no skew between hosts), the socket's receive low
//! water mark (`SO_RCVLOWAT`) is raised to [`LOW_WATER`]: the kernel wakes
//! the reader once that much is queued. A read that waits longer than
//! [`WAIT`] lowers it again (which wakes the reader if anything is queued),
//! so the tail of a catch-up is never held back by more than that.
//! A stream that is not behind is never batched: its latency is untouched.
//!
//! Whether the stream is behind is also published
//! ([`ReplicationMetrics::catching_up`](super::ReplicationMetrics::catching_up)),
//! on every connection (also those whose socket is not batched: Unix
//! sockets, other systems), so the consumer can treat late changes
//! differently (outbox-relay hands their events to Kafka in groups). TLS
//! connections are batched too: the mark is set on the TCP socket beneath.

use std::time::Duration;

/// How late (commit → sent by the walsender) a change must be for the stream
/// to count as catching up.
pub(crate) const LAG_MICROS: i64 = 100_000;
/// Bytes queued on the socket before the kernel wakes the reader while
/// catching up.
pub(crate) const LOW_WATER: usize = 64 * 1024;
/// The longest a read waits for [`LOW_WATER`] bytes before taking what is
/// there.
pub(crate) const WAIT: Duration = Duration::from_millis(5);

/// Whether reads are batched, decided from the stream's lag. Pure: the
/// socket option is set by the caller on the transitions this returns.
#[derive(Debug)]
pub(crate) struct CatchUp {
    /// The commit time of the transaction whose changes are arriving.
    commit_time_micros: Option<i64>,
    /// The last change seen was sent more than [`LAG_MICROS`] after its commit.
    behind: bool,
    batching: bool,
    /// [`WAIT`], longer in tests.
    wait: Duration,
}

impl Default for CatchUp {
    fn default() -> Self {
        Self::waiting(WAIT)
    }
}

impl CatchUp {
    pub(crate) fn waiting(wait: Duration) -> Self {
        Self {
            commit_time_micros: None,
            behind: false,
            batching: false,
            wait,
        }
    }

    pub(crate) fn batching(&self) -> bool {
        self.batching
    }

    /// Whether the last change seen was late (sent more than [`LAG_MICROS`]
    /// after its transaction committed). Unlike [`batching`](Self::batching),
    /// a read that waits does not clear it: only a change that is not late does.
    pub(crate) fn behind(&self) -> bool {
        self.behind
    }

    /// How long a batched read waits before taking what is queued.
    pub(crate) fn wait(&self) -> Duration {
        self.wait
    }

    /// A transaction began (pgoutput Begin) with this commit time.
    pub(crate) fn begin(&mut self, commit_time_micros: i64) {
        self.commit_time_micros = Some(commit_time_micros);
    }

    /// The transaction ended (pgoutput Commit): until the next Begin, a change
    /// (a non-transactional logical message) has no commit time to be late against.
    pub(crate) fn commit(&mut self) {
        self.commit_time_micros = None;
    }

    /// A change sent by the walsender at `server_time_micros`. `Some(low
    /// water)` when the socket's low water mark must change. A change outside a
    /// transaction is not known to be late: it counts as live.
    pub(crate) fn sent_at(&mut self, server_time_micros: i64) -> Option<usize> {
        let behind = self
            .commit_time_micros
            .is_some_and(|commit| server_time_micros.saturating_sub(commit) > LAG_MICROS);
        self.behind = behind;
        if behind == self.batching {
            return None;
        }
        self.batching = behind;
        Some(if behind { LOW_WATER } else { 1 })
    }

    /// A read waited [`wait`](Self::wait) while batching: take what is queued. Returns the
    /// low water mark to set.
    pub(crate) fn waited(&mut self) -> Option<usize> {
        if !self.batching {
            return None;
        }
        self.batching = false;
        Some(1)
    }
}

/// The socket whose low water mark is moved. Only TCP sockets on Linux have
/// one: the worker holds none for Unix sockets, in-memory streams in tests and
/// other systems.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LowWater {
    #[cfg(target_os = "linux")]
    fd: std::os::fd::RawFd,
}

impl LowWater {
    /// # Safety
    /// `fd` must stay an open TCP socket for as long as this value is used.
    #[cfg(target_os = "linux")]
    pub(crate) unsafe fn of_socket(fd: std::os::fd::RawFd) -> Self {
        Self { fd }
    }

    /// Set `SO_RCVLOWAT`. Lowering it wakes a reader if enough is queued
    /// (Linux ≥ 4.18, tcp_set_rcvlowat). A failure only costs wake-ups, so
    /// it is logged, never fatal.
    pub(crate) fn set(self, bytes: usize) {
        #[cfg(target_os = "linux")]
        {
            let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
            // SAFETY: `fd` is an open socket (the constructor's contract) and
            // the option value is a c_int that outlives the call.
            let rc = unsafe {
                libc::setsockopt(
                    self.fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVLOWAT,
                    (&value as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                tracing::debug!(
                    error = %std::io::Error::last_os_error(),
                    "could not set SO_RCVLOWAT"
                );
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = bytes;
    }
}

/// Both ends of a loopback TCP connection: (connecting, accepted).
#[cfg(test)]
pub(crate) async fn tcp_pair() -> (tokio::net::TcpStream, tokio::net::TcpStream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let connecting = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (accepted, _) = listener.accept().await.unwrap();
    (connecting, accepted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_only_while_changes_arrive_late_and_until_a_read_waits() {
        let mut c = CatchUp::default();
        // Nothing is known before the first Begin.
        assert_eq!(c.sent_at(1_000_000), None);
        c.begin(0);
        assert_eq!(c.sent_at(LAG_MICROS), None, "exactly LAG is not behind");
        assert!(!c.behind());
        assert_eq!(c.sent_at(LAG_MICROS + 1), Some(LOW_WATER));
        assert!(c.batching() && c.behind());
        assert_eq!(c.sent_at(LAG_MICROS + 2), None, "set once per transition");
        // A transaction that commits now: no longer behind.
        c.begin(5_000_000);
        assert_eq!(c.sent_at(5_000_100), Some(1));
        assert!(!c.batching() && !c.behind());
        assert_eq!(c.waited(), None, "a wait outside batching changes nothing");
        // Behind again, then a read waits: take what is there.
        assert_eq!(c.sent_at(6_000_000), Some(LOW_WATER));
        assert_eq!(c.waited(), Some(1));
        assert!(!c.batching());
        assert!(c.behind(), "a read that waited leaves the stream behind");
        // The next late change batches again.
        assert_eq!(c.sent_at(6_000_001), Some(LOW_WATER));
        // The transaction ends; a non-transactional message long after it is live.
        assert_eq!(c.sent_at(6_000_002), None, "its Commit, still late");
        c.commit();
        assert_eq!(c.sent_at(60_000_000), Some(1));
        assert!(!c.batching() && !c.behind());
    }

    /// The assumption the batching rests on, against the kernel: with the low
    /// water mark raised, a small write does not wake the reader; lowering
    /// the mark does, and the read gets the bytes.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn lowering_the_low_water_mark_wakes_a_waiting_reader() {
        use std::os::fd::AsRawFd;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let (mut writer, mut reader) = tcp_pair().await;
        // SAFETY: `reader` outlives every use of `low`.
        let low = unsafe { LowWater::of_socket(reader.as_raw_fd()) };
        // tokio counts a new socket as readable until a read finds it empty,
        // as the worker's socket is long before it catches up.
        let mut buf = [0u8; 1024];
        assert_eq!(
            reader.try_read(&mut buf).unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock
        );
        low.set(LOW_WATER);
        writer.write_all(&[7u8; 100]).await.unwrap();
        writer.flush().await.unwrap();

        let early = tokio::time::timeout(Duration::from_millis(200), reader.read(&mut buf)).await;
        assert!(
            early.is_err(),
            "100 bytes under a {LOW_WATER}-byte low water mark woke the reader: {early:?}"
        );
        low.set(1);
        let n = tokio::time::timeout(Duration::from_secs(5), reader.read(&mut buf))
            .await
            .expect("lowering the low water mark did not wake the reader")
            .unwrap();
        assert_eq!(n, 100);
    }
}
