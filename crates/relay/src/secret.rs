//! A value that must never appear in logs, errors or `--help` (passwords, URLs with them).

use serde::Deserialize;
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The real value, for the one place that needs it (a connection).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl Secret {
    /// Serialises the value itself: only for merging configuration layers in memory
    /// (`RunOptions::merge_file`), never for output; `Debug` stays redacted.
    pub fn serialize_for_merge<S: serde::Serializer>(
        value: &Option<Secret>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_some(&value.as_ref().map(|s| s.0.as_str()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}
