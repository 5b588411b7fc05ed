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

/// Sleeps for `delay` unless a shutdown is requested first; returns whether it was.
pub async fn pause(delay: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    if *shutdown.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(delay) => false,
        _ = shutdown.changed() => true,
    }
}
