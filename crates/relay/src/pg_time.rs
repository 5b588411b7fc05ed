//! PostgreSQL's clock: its epoch is 2000-01-01 UTC, and pgoutput's commit times and the
//! replication protocol's timestamps count microseconds from it.

/// 2000-01-01 UTC in microseconds since the Unix epoch.
const PG_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;

/// Now, in microseconds since 2000-01-01 UTC (to compare with commit times).
pub fn now_micros() -> i64 {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    unix - PG_EPOCH_UNIX_MICROS
}

/// A commit time (microseconds since 2000-01-01) in Unix epoch microseconds.
pub fn epoch_micros(micros_since_2000: i64) -> i64 {
    micros_since_2000 + PG_EPOCH_UNIX_MICROS
}

/// A commit time (microseconds since 2000-01-01) in Unix epoch milliseconds.
pub fn epoch_millis(micros_since_2000: i64) -> i64 {
    (micros_since_2000 + PG_EPOCH_UNIX_MICROS).div_euclid(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epochs_are_thirty_years_apart() {
        assert_eq!(epoch_millis(0), 946_684_800_000);
        assert_eq!(epoch_millis(1_999), 946_684_800_001);
        assert_eq!(epoch_millis(-1), 946_684_799_999);
        assert!(now_micros() > 26 * 365 * 86_400 * 1_000_000);
    }
}
