//! What a source is to the supervisor: sessions run one after the other, with the
//! background tasks a session owns and a pause that a shutdown cuts short.

use crate::error::RelayError;
use std::time::Duration;
use tokio::sync::watch;

/// One way of relaying (CDC or polling), run session after session by [`supervise`].
pub trait Source {
    /// Runs one session until shutdown (Ok) or an error.
    fn session(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> impl std::future::Future<Output = Result<(), RelayError>>;
    /// What resuming means for this source's data, for the retry log line.
    fn resume_note(&self) -> String;
}

/// A background task (heartbeat, broker probe) that stops when its owner is dropped.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether the relay is asked to stop: told so, or whoever could tell it is gone (a
/// connector's pipeline its worker let go of stops; it never spins on a closed channel).
pub fn stop_requested(shutdown: &watch::Receiver<bool>) -> bool {
    *shutdown.borrow() || shutdown.has_changed().is_err()
}

/// Sleeps for `delay` unless a shutdown is requested first; returns whether it was.
pub async fn pause(delay: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    if stop_requested(shutdown) {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(delay) => false,
        _ = shutdown.changed() => true,
    }
}

#[cfg(test)]
mod stop_tests {
    use super::*;

    /// A pipeline whose owner is gone stops: a closed channel is a stop, and a pause ends
    /// at once instead of every later one returning at once into a busy loop.
    #[tokio::test]
    async fn a_closed_shutdown_channel_is_a_stop() {
        let (tx, mut rx) = watch::channel(false);
        assert!(!stop_requested(&rx));
        drop(tx);
        assert!(stop_requested(&rx));
        assert!(pause(Duration::from_secs(60), &mut rx).await);
        let (tx, rx) = watch::channel(false);
        tx.send(true).unwrap();
        assert!(stop_requested(&rx));
    }
}
