//! A WAL position (`pg_lsn`): the one LSN type of the whole project — the decoder, the relay,
//! the tests and the benchmarks all use it, so an LSN cannot be mistaken for a count or a
//! sequence number, and its text form (`16/B374D848`, upper-case hex as PostgreSQL prints it)
//! is parsed and written in one place.

use std::fmt;
use std::str::FromStr;

/// A position in PostgreSQL's write-ahead log. Ordered like the log; `Lsn::ZERO` is "none yet"
/// (what `START_REPLICATION ... 0/0` means: the slot's own position).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(u64);

impl Lsn {
    pub const ZERO: Lsn = Lsn(0);

    pub const fn from_u64(value: u64) -> Self {
        Lsn(value)
    }

    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Parses PostgreSQL's text form `X/Y` (hex, either case); `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let (hi, lo) = text.trim().split_once('/')?;
        let valid =
            |s: &str| !s.is_empty() && s.len() <= 8 && s.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid(hi) || !valid(lo) {
            return None;
        }
        let hi = u64::from_str_radix(hi, 16).ok()?;
        let lo = u64::from_str_radix(lo, 16).ok()?;
        Some(Lsn((hi << 32) | lo))
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

/// The text is not an LSN (`X/Y`, hexadecimal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LsnParseError(pub String);

impl fmt::Display for LsnParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not an LSN; expected X/Y in hexadecimal, e.g. 16/B374D848",
            self.0
        )
    }
}

impl std::error::Error for LsnParseError {}

impl FromStr for Lsn {
    type Err = LsnParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Lsn::parse(s).ok_or_else(|| LsnParseError(s.to_owned()))
    }
}

impl From<u64> for Lsn {
    fn from(value: u64) -> Self {
        Lsn(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_as_postgres_prints_it() {
        assert_eq!(Lsn::parse("0/15313A8"), Some(Lsn(0x15313A8)));
        assert_eq!(Lsn::parse("1A/0"), Some(Lsn(0x1A_0000_0000)));
        assert_eq!(Lsn::parse("1a/ff"), Some(Lsn(0x1A_0000_00FF)));
        assert_eq!(Lsn(0x1A_0153_13A8).to_string(), "1A/15313A8");
        assert_eq!("FFFFFFFF/FFFFFFFF".parse::<Lsn>(), Ok(Lsn(u64::MAX)));
        for bad in [
            "nope",
            "",
            "/",
            "1/",
            "/1",
            "123456789/0",
            "1/-1",
            "+1/1",
            "g/0",
        ] {
            assert_eq!(Lsn::parse(bad), None, "{bad:?}");
        }
        assert!(Lsn(1) < Lsn(2) && Lsn::ZERO == Lsn::default());
    }
}
