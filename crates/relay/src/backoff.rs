//! How long to wait before the next attempt after a transient failure (CDC sessions and
//! polling alike).

use rand::Rng;
use std::time::Duration;

/// Exponential backoff with jitter: 200 ms doubling to 30 s, ±25 %, so that instances
/// restarted together do not retry in step.
#[derive(Debug, Default)]
pub struct Backoff {
    attempt: u32,
}

impl Backoff {
    pub fn next_delay(&mut self) -> Duration {
        let base = 200u64.saturating_mul(1 << self.attempt.min(8)).min(30_000);
        self.attempt += 1;
        let jitter = rand::thread_rng().gen_range(0.75..1.25);
        Duration::from_millis((base as f64 * jitter) as u64)
    }

    /// After a session that ran long enough to count as healthy.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// The delay after a session that failed having run for `ran_for`: a session that
    /// lasted over 30 s was healthy, so the backoff starts again from 200 ms.
    pub fn after_session(&mut self, ran_for: Duration) -> Duration {
        if ran_for > Duration::from_secs(30) {
            self.reset();
        }
        self.next_delay()
    }
}

/// Sleeps for `delay` unless a shutdown is requested first; returns whether it was.
pub async fn pause(delay: Duration, shutdown: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(delay) => false,
        _ = shutdown.changed() => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_with_jitter_up_to_thirty_seconds() {
        let mut b = Backoff::default();
        let first = b.next_delay().as_millis();
        assert!((150..=250).contains(&first), "{first}");
        let second = b.next_delay().as_millis();
        assert!((300..=500).contains(&second), "{second}");
        for _ in 0..20 {
            assert!(b.next_delay() <= Duration::from_millis(37_500));
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(250));
    }
}
