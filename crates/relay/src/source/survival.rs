//! Will the slot survive a failover? On PostgreSQL 17+ it does when all of these hold:
//! - the slot is a failover slot (`--slot-failover`);
//! - the primary's `synchronized_standby_slots` names physical slots that exist (logical
//!   decoding then never runs ahead of those standbys, so their copy is never behind what
//!   Kafka has);
//! - a standby holds a synchronized copy of the slot (`sync_replication_slots = on`), not
//!   invalidated.
//!
//! The standby is found among the hosts of the relay's URL (a multi-host URL names the
//! primary and its standbys). `check` prints what is missing with the SQL and settings that
//! fix it, `status` shows it, and `outbox_relay_slot_failover_ready` exports it.

use crate::config::{ConnectionInfo, SessionTarget};
use crate::error::RelayError;
use crate::metrics::Metrics;
use postgres_protocol::escape::escape_literal;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// One condition, and whether it holds; when it does not, what fixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub holds: bool,
    pub what: String,
    pub fix: String,
    /// It fails only for now, and clears by itself (a standby whose copy of the slot is not
    /// synchronized yet): the watch looks again soon.
    pub pending: bool,
}

impl Condition {
    fn holds(what: String) -> Self {
        Self {
            holds: true,
            what,
            fix: String::new(),
            pending: false,
        }
    }

    fn fails(what: String, fix: String) -> Self {
        Self {
            holds: false,
            what,
            fix,
            pending: false,
        }
    }

    fn pending(what: String, fix: String) -> Self {
        Self {
            pending: true,
            ..Self::fails(what, fix)
        }
    }
}

/// Whether `slot` survives a failover, condition by condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survival {
    pub conditions: Vec<Condition>,
}

impl Survival {
    pub fn survives(&self) -> bool {
        !self.conditions.is_empty() && self.conditions.iter().all(|c| c.holds)
    }

    /// It does not survive yet, but only for conditions that clear by themselves.
    pub fn only_pending(&self) -> bool {
        !self.survives() && self.conditions.iter().all(|c| c.holds || c.pending)
    }

    /// What is missing, in one line each.
    pub fn missing(&self) -> Vec<String> {
        self.conditions
            .iter()
            .filter(|c| !c.holds)
            .map(|c| format!("{} (fix: {})", c.what, c.fix))
            .collect()
    }
}

/// The names in a `synchronized_standby_slots` value (`a, "B"`).
fn slot_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Assesses `slot` on the primary `url` names (and its standbys among the URL's hosts).
pub async fn assess(url: &str, slot: &str) -> Result<Survival, RelayError> {
    let info = ConnectionInfo::parse(url).map_err(RelayError::misconfigured)?;
    let (primary, primary_host) =
        super::postgres::connect_to_target(url, None, SessionTarget::Primary).await?;
    let major: i32 = primary
        .query_one(
            "SELECT current_setting('server_version_num')::int / 10000",
            &[],
        )
        .await
        .map_err(|e| RelayError::postgres("reading server_version", e, String::new))?
        .get(0);
    if major < 17 {
        return Ok(Survival {
            conditions: vec![Condition::fails(
                format!("PostgreSQL {major} has no failover slots: a logical slot stays on the primary and is lost with it"),
                "PostgreSQL 17 or later, with --slot-failover".into(),
            )],
        });
    }
    let read = |e| {
        RelayError::postgres("reading the slot's failover settings", e, || {
            "the role needs the REPLICATION attribute or pg_monitor".into()
        })
    };
    let mut conditions = Vec::new();
    let failover: Option<bool> = primary
        .query_opt(
            "SELECT failover FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(read)?
        .map(|r| r.get(0));
    conditions.push(match failover {
        Some(true) => Condition::holds(format!("slot {slot} is a failover slot")),
        Some(false) => Condition::fails(
            format!("slot {slot} is not a failover slot"),
            "run the relay with --slot-failover (Debezium: slot.failover=true): it alters the slot"
                .into(),
        ),
        None => Condition::fails(
            format!("slot {slot} does not exist yet"),
            "start the relay with --slot-failover: it creates the slot as a failover slot".into(),
        ),
    });
    let named = slot_list(
        &primary
            .query_one("SELECT current_setting('synchronized_standby_slots')", &[])
            .await
            .map_err(read)?
            .get::<_, String>(0),
    );
    let physical: Vec<(String, bool)> = primary
        .query(
            "SELECT slot_name::text, active FROM pg_replication_slots WHERE slot_type = 'physical' ORDER BY slot_name",
            &[],
        )
        .await
        .map_err(read)?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let candidates = physical
        .iter()
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let set_it = format!(
        "on the primary: ALTER SYSTEM SET synchronized_standby_slots = {}; SELECT pg_reload_conf();{}",
        escape_literal(physical.first().map_or("<the standby's physical slot>", |(n, _)| n)),
        if physical.len() > 1 {
            format!(" (physical slots: {candidates})")
        } else {
            String::new()
        }
    );
    let unknown: Vec<&String> = named
        .iter()
        .filter(|n| !physical.iter().any(|(p, _)| p == *n))
        .collect();
    conditions.push(if named.is_empty() {
        Condition::fails(
            "synchronized_standby_slots is empty on the primary: logical decoding may run ahead of the standby, whose copy of the slot is then behind what was relayed".into(),
            set_it,
        )
    } else if !unknown.is_empty() {
        Condition::fails(
            format!(
                "synchronized_standby_slots names {} that is not a physical slot of the primary (logical decoding waits for it forever)",
                unknown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ),
            set_it,
        )
    } else {
        Condition::holds(format!(
            "synchronized_standby_slots = {} (physical slots of the primary)",
            named.join(", ")
        ))
    });
    // The standbys among the URL's hosts.
    let mut standbys = 0;
    for (i, (host, port)) in info.hosts.iter().enumerate() {
        if i == primary_host {
            continue;
        }
        let Ok((standby, _)) =
            super::postgres::connect_to_target(url, Some(i), SessionTarget::Standby).await
        else {
            continue;
        };
        standbys += 1;
        let row = standby
            .query_one(
                "SELECT current_setting('sync_replication_slots'), current_setting('hot_standby_feedback'), \
                        (SELECT synced AND NOT temporary FROM pg_replication_slots WHERE slot_name = $1), \
                        (SELECT invalidation_reason FROM pg_replication_slots WHERE slot_name = $1)",
                &[&slot],
            )
            .await
            .map_err(read)?;
        let (sync, feedback, synced, invalid): (String, String, Option<bool>, Option<String>) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let settings_fix = format!(
            "on {host}:{port}: ALTER SYSTEM SET sync_replication_slots = on; ALTER SYSTEM SET hot_standby_feedback = on; \
             a primary_conninfo with dbname=… and a primary_slot_name; SELECT pg_reload_conf();"
        );
        conditions.push(match (synced, invalid) {
            (_, Some(reason)) => Condition::fails(
                format!("the standby {host}:{port} has a copy of slot {slot}, invalidated ({reason})"),
                format!("the copy is recreated once the cause is gone; {settings_fix}"),
            ),
            (Some(true), None) => Condition::holds(format!(
                "the standby {host}:{port} holds a synchronized copy of slot {slot}"
            )),
            _ if sync != "on" || feedback != "on" => Condition::fails(
                format!(
                    "the standby {host}:{port} does not synchronize slots (sync_replication_slots = {sync}, hot_standby_feedback = {feedback})"
                ),
                settings_fix,
            ),
            _ => Condition::pending(
                format!("the standby {host}:{port} has no synchronized copy of slot {slot} yet"),
                "wait for the slot synchronization worker (or SELECT pg_sync_replication_slots(); on the standby); \
                 the slot must be a failover slot"
                    .into(),
            ),
        });
    }
    if standbys == 0 {
        conditions.push(Condition::fails(
            "no standby among the URL's hosts: its copy of the slot cannot be checked".into(),
            "list the standbys in the URL after the primary: postgres://USER@primary:5432,standby:5432/DB?target_session_attrs=read-write".into(),
        ));
    }
    Ok(Survival { conditions })
}

/// While only a synchronization still to come keeps the slot from surviving, it is
/// assessed every [`PENDING_EVERY`], for at most [`PENDING_FOR`] in a row (each assessment
/// opens connections to every host).
pub const PENDING_EVERY: Duration = Duration::from_secs(1);
pub const PENDING_FOR: Duration = Duration::from_secs(300);

/// Sets `outbox_relay_slot_failover_ready` every `every` while it runs (the session that
/// holds the slot runs it), and every [`PENDING_EVERY`] while the standby's copy is on its
/// way, so that the metric turns 1 within a second of the copy becoming persistent.
pub async fn watch(
    url: crate::secret::Secret,
    slot: String,
    metrics: Arc<Metrics>,
    every: Duration,
    warn: bool,
) {
    let assess_slot = || assess(url.expose(), &slot);
    watch_with(assess_slot, &slot, &metrics, every, warn).await
}

/// [`watch`], with `assess` as the check.
async fn watch_with<F: Future<Output = Result<Survival, RelayError>>>(
    mut assess: impl FnMut() -> F,
    slot: &str,
    metrics: &Metrics,
    every: Duration,
    warn: bool,
) {
    let mut said: Option<bool> = None;
    let mut pending_since: Option<tokio::time::Instant> = None;
    let mut next = tokio::time::Instant::now();
    loop {
        tokio::time::sleep_until(next).await;
        let now = tokio::time::Instant::now();
        next = now + every;
        let Ok(survival) = assess().await else {
            continue;
        };
        if survival.only_pending() {
            let since = *pending_since.get_or_insert(now);
            if now.duration_since(since) < PENDING_FOR {
                next = now + PENDING_EVERY.min(every);
            }
        } else {
            pending_since = None;
        }
        let survives = survival.survives();
        metrics.slot_failover_ready.set(i64::from(survives));
        if said != Some(survives) {
            if survives {
                tracing::info!(%slot, "the slot survives a failover");
            } else if warn {
                tracing::warn!(%slot, missing = %survival.missing().join("; "), "the slot would not survive a failover");
            }
            said = Some(survives);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The standby's copy turns persistent 2.5 s after the session starts: the metric says so
    /// within a second, not at the next 10 s round.
    #[tokio::test(start_paused = true)]
    async fn failover_readiness_is_seen_within_a_second_of_the_copy_becoming_persistent() {
        let start = tokio::time::Instant::now();
        let persistent_at = start + Duration::from_millis(2500);
        let assess = move || async move {
            let copy = if tokio::time::Instant::now() >= persistent_at {
                Condition::holds("the standby holds a synchronized copy".into())
            } else {
                Condition::pending("no synchronized copy yet".into(), "wait".into())
            };
            Ok(Survival {
                conditions: vec![Condition::holds("a failover slot".into()), copy],
            })
        };
        let metrics = Arc::new(Metrics::new());
        let watching = {
            let metrics = metrics.clone();
            tokio::spawn(async move {
                watch_with(assess, "s", &metrics, Duration::from_secs(10), true).await
            })
        };
        tokio::time::sleep(Duration::from_millis(3600)).await;
        assert_eq!(metrics.slot_failover_ready.get(), 1);
        watching.abort();
    }

    /// A condition that needs a person (a setting) is looked at every `every`, not every second.
    #[test]
    fn only_conditions_that_clear_by_themselves_are_pending() {
        let pending = Survival {
            conditions: vec![
                Condition::holds("ok".into()),
                Condition::pending("copy on its way".into(), "wait".into()),
            ],
        };
        assert!(pending.only_pending());
        let blocked = Survival {
            conditions: vec![
                Condition::fails("sync_replication_slots off".into(), "set it".into()),
                Condition::pending("copy on its way".into(), "wait".into()),
            ],
        };
        assert!(!blocked.only_pending());
        let ready = Survival {
            conditions: vec![Condition::holds("ok".into())],
        };
        assert!(!ready.only_pending() && ready.survives());
    }

    #[test]
    fn synchronized_standby_slots_lists_names() {
        assert_eq!(slot_list(""), Vec::<String>::new());
        assert_eq!(slot_list("sb1, \"Sb2\""), ["sb1", "Sb2"]);
    }

    #[test]
    fn it_survives_only_when_every_condition_holds() {
        let ok = Condition::holds("a".into());
        let bad = Condition::fails("b".into(), "do c".into());
        assert!(Survival {
            conditions: vec![ok.clone()]
        }
        .survives());
        let s = Survival {
            conditions: vec![ok, bad],
        };
        assert!(!s.survives());
        assert_eq!(s.missing(), ["b (fix: do c)"]);
        assert!(!Survival { conditions: vec![] }.survives());
    }
}
