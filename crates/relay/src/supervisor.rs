//! The one retry loop of every mode. A source runs in *sessions* (one replication connection,
//! or one polling connection, plus one producer); when a session ends with an error, the
//! error's [`Consequence`] decides what happens next: stand by for a busy slot (retry about
//! every second, to take over within seconds once the active instance is gone), back off
//! and resume from the last confirmed position, or exit non-zero with the fix.

use crate::error::{Consequence, RelayError};
use crate::metrics::Metrics;
pub use crate::source::session::{pause, stop_requested, AbortOnDrop, Source};
use rand::RngExt;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Runs the source `settings` name (replication or polling) under [`supervise`]: what
/// `run` does, and what `connect` does for each connector.
pub async fn relay(
    settings: &crate::config::Settings,
    metrics: std::sync::Arc<Metrics>,
    written: std::sync::Arc<crate::deliver::WrittenTopics>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), RelayError> {
    use crate::config::SourceSettings;
    match &settings.source {
        SourceSettings::Cdc(cdc) => {
            let source = crate::source::replication::Replication::new(
                settings,
                cdc,
                metrics.clone(),
                written,
            )?;
            supervise(source, &metrics, shutdown).await
        }
        SourceSettings::Polling(polling) => {
            let source = crate::source::polling::Polling {
                settings,
                polling,
                metrics: metrics.clone(),
                written,
            };
            supervise(source, &metrics, shutdown).await
        }
    }
}

/// Runs `source` until shutdown (Ok) or an error it must exit for.
pub async fn supervise(
    mut source: impl Source,
    metrics: &Metrics,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), RelayError> {
    let mut backoff = Backoff::default();
    let mut repeats = Repeats::default();
    loop {
        let started = Instant::now();
        let result = source.session(&mut shutdown).await;
        metrics.streaming.set(0);
        let error = match result {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let stopping = stop_requested(&shutdown);
        match error.consequence() {
            Consequence::Exit => return Err(error),
            _ if stopping => return Ok(()),
            Consequence::StandBy => {
                metrics.active.set(0);
                metrics.set_standing_by(true);
                tracing::info!("{error}; standing by until the slot is free");
                let delay = Duration::from_millis(rand::rng().random_range(800..1200));
                if pause(delay, &mut shutdown).await {
                    return Ok(());
                }
            }
            Consequence::Resume => {
                let position = metrics.confirmed_lsn.get();
                if let RelayError::ServerError { code, .. } = &error {
                    if let Some((times, during)) =
                        repeats.failed(code, position, tokio::time::Instant::now())
                    {
                        return Err(RelayError::misconfigured(format!(
                            "PostgreSQL failed {times} times in {} s with the same error (SQLSTATE {code}) at \
                             confirmed position {}: {error}; retrying does not help: see the server's log \
                             for that position",
                            during.as_secs(),
                            pgoutput::Lsn::from_u64(position.max(0) as u64)
                        )));
                    }
                } else {
                    repeats = Repeats::default();
                }
                metrics.set_standing_by(false);
                metrics.reconnects.inc();
                let delay = backoff.after_session(started.elapsed());
                tracing::warn!(
                    retry_in_ms = delay.as_millis() as u64,
                    "{error}; {}",
                    source.resume_note()
                );
                if pause(delay, &mut shutdown).await {
                    return Ok(());
                }
            }
        }
    }
}

/// Sessions the same PostgreSQL error (SQLSTATE) may end at the same confirmed position,
/// and for how long at least, before the relay stops retrying it.
pub const REPEAT_BUDGET: u32 = 10;
pub const REPEAT_AT_LEAST: Duration = Duration::from_secs(300);

/// The same error at the same position, counted: a different error or a moved position
/// starts again.
#[derive(Debug, Default)]
pub struct Repeats {
    last: Option<(String, i64, tokio::time::Instant)>,
    times: u32,
}

impl Repeats {
    /// Records a session that ended with `code` at `position`; when the budget is spent
    /// (`REPEAT_BUDGET` times over at least `REPEAT_AT_LEAST`), how many times and for how long.
    pub fn failed(
        &mut self,
        code: &str,
        position: i64,
        now: tokio::time::Instant,
    ) -> Option<(u32, Duration)> {
        match &self.last {
            Some((c, p, _)) if c == code && *p == position => self.times += 1,
            _ => {
                self.last = Some((code.to_owned(), position, now));
                self.times = 1;
            }
        }
        let since = self.last.as_ref().map_or(now, |(_, _, since)| *since);
        let during = now.duration_since(since);
        (self.times >= REPEAT_BUDGET && during >= REPEAT_AT_LEAST).then_some((self.times, during))
    }
}

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
        let jitter = rand::rng().random_range(0.75..1.25);
        Duration::from_millis((base as f64 * jitter) as u64)
    }

    /// The delay after a session that failed having run for `ran_for`: a session that
    /// lasted over 30 s was healthy, so the backoff starts again from 200 ms.
    pub fn after_session(&mut self, ran_for: Duration) -> Duration {
        if ran_for > Duration::from_secs(30) {
            self.attempt = 0;
        }
        self.next_delay()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::anyhow;
    use std::collections::VecDeque;

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
        assert!(b.after_session(Duration::from_secs(31)) <= Duration::from_millis(250));
    }

    /// Sessions that end with the given errors, then a clean stop.
    struct Scripted {
        results: VecDeque<Result<(), RelayError>>,
        sessions: usize,
    }

    impl Source for Scripted {
        async fn session(&mut self, _: &mut watch::Receiver<bool>) -> Result<(), RelayError> {
            self.sessions += 1;
            self.results.pop_front().unwrap_or(Ok(()))
        }
        fn resume_note(&self) -> String {
            "resuming".into()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_kind_of_error_gets_its_consequence() {
        let metrics = Metrics::new();
        let (_tx, rx) = watch::channel(false);
        let source = Scripted {
            results: VecDeque::from([
                Err(RelayError::SlotBusy {
                    slot: "s".into(),
                    detail: "x".into(),
                }),
                Err(RelayError::ConnectionLost(anyhow!("reset"))),
                Err(RelayError::BrokerUnavailable(anyhow!("down"))),
                Err(RelayError::misconfigured("table missing")),
                Ok(()),
            ]),
            sessions: 0,
        };
        let started = tokio::time::Instant::now();
        let err = supervise(source, &metrics, rx).await.unwrap_err();
        assert!(err.to_string().contains("table missing"), "{err}");
        assert_eq!(metrics.reconnects.get(), 2, "two resumed sessions");
        // Stand-by waits about a second, resuming 200 ms then 400 ms (±25 %).
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(800 + 150 + 300),
            "{waited:?}"
        );
        assert!(
            waited <= Duration::from_millis(1200 + 250 + 500),
            "{waited:?}"
        );
    }

    /// The same PostgreSQL error at the same position (a walsender failing on one huge
    /// row) is retried within a budget, then the relay exits naming the code and the
    /// position; a lost connection is retried for ever, and progress starts the count again.
    #[tokio::test(start_paused = true)]
    async fn the_same_server_error_at_the_same_position_is_not_retried_for_ever() {
        let metrics = Metrics::new();
        metrics.confirmed_lsn.set(0x1_0000_0010);
        let (_tx, rx) = watch::channel(false);
        let source = Scripted {
            results: (0..1000)
                .map(|_| {
                    Err(RelayError::ServerError {
                        code: "XX000".into(),
                        error: anyhow!("invalid memory alloc request size 1073741824"),
                    })
                })
                .collect(),
            sessions: 0,
        };
        let started = tokio::time::Instant::now();
        let err = supervise(source, &metrics, rx).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("SQLSTATE XX000"), "{text}");
        assert!(text.contains("1/10"), "the position: {text}");
        assert!(text.contains("invalid memory alloc"), "{text}");
        assert!(started.elapsed() >= REPEAT_AT_LEAST);
        assert_eq!(err.consequence(), Consequence::Exit);

        let mut repeats = Repeats::default();
        let t0 = tokio::time::Instant::now();
        let at = |s: i64| t0 + Duration::from_secs(s as u64);
        for i in 0..20 {
            // The position moves every other session: never spent.
            assert_eq!(repeats.failed("XX000", i / 2, at(i * 60)), None);
        }
        for i in 0..9 {
            assert_eq!(repeats.failed("55P03", 7, at(i * 60)), None);
        }
        assert_eq!(
            repeats.failed("55P03", 7, at(9 * 60)),
            Some((10, Duration::from_secs(540)))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_shutdown_during_a_pause_stops_cleanly() {
        let metrics = Metrics::new();
        let (tx, rx) = watch::channel(false);
        let source = Scripted {
            results: (0..100)
                .map(|_| Err(RelayError::ConnectionLost(anyhow!("down"))))
                .collect(),
            sessions: 0,
        };
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            tx.send(true).unwrap();
        });
        supervise(source, &metrics, rx).await.unwrap();
    }
}
