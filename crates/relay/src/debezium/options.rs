//! A flat option map that remembers which options were read, so that the ones nobody read
//! can be listed in one start-up warning; and the readers of a true/false or enumerated
//! option that every parser (connector, converters, CloudEvents) shares.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

pub struct Options<'a> {
    entries: &'a BTreeMap<String, String>,
    used: RefCell<BTreeSet<String>>,
}

impl<'a> Options<'a> {
    pub fn new(entries: &'a BTreeMap<String, String>) -> Self {
        Self {
            entries,
            used: RefCell::default(),
        }
    }

    /// The value of `key` (trimmed), marking it used.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        let value = self.entries.get(key)?;
        self.used.borrow_mut().insert(key.to_owned());
        Some(value.trim())
    }

    pub fn keys_with_prefix<'s>(
        &'s self,
        prefix: &'s str,
    ) -> impl Iterator<Item = &'a String> + 's {
        self.entries.keys().filter(move |k| k.starts_with(prefix))
    }

    /// `(key without prefix, value)` for every key with `prefix`, marking them used.
    pub fn with_prefix(&self, prefix: &str) -> Vec<(String, &'a str)> {
        let found: Vec<(String, &'a str)> = self
            .entries
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix(prefix)
                    .map(|rest| (rest.to_owned(), v.trim()))
            })
            .collect();
        let mut used = self.used.borrow_mut();
        for (rest, _) in &found {
            used.insert(format!("{prefix}{rest}"));
        }
        found
    }

    /// Marks options known to have no effect on outbox-relay's output.
    pub fn accept(&self, keys: &[&str]) {
        let mut used = self.used.borrow_mut();
        for key in keys {
            if self.entries.contains_key(*key) {
                used.insert((*key).to_owned());
            }
        }
    }

    /// Marks every option with `prefix` as known (after the meaningful ones were read).
    pub fn accept_prefix(&self, prefix: &str) {
        let keys: Vec<String> = self.keys_with_prefix(prefix).cloned().collect();
        self.used.borrow_mut().extend(keys);
    }

    /// Options never read, sorted.
    pub fn unused(&self) -> Vec<String> {
        let used = self.used.borrow();
        self.entries
            .keys()
            .filter(|k| !used.contains(*k))
            .cloned()
            .collect()
    }
}

/// A true/false option (any case), `default` when absent.
pub(super) fn flag(o: &Options, key: &str, default: bool) -> Result<bool, String> {
    choice(o, key, &[("true", true), ("false", false)], default)
}

/// One of an option's values, matched without regard to case as Debezium's
/// `EnumeratedValue.parse` does.
pub(super) fn choice<T: Copy>(
    o: &Options,
    key: &str,
    choices: &[(&str, T)],
    default: T,
) -> Result<T, String> {
    let Some(value) = o.get(key) else {
        return Ok(default);
    };
    let value = value.trim();
    choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(value))
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            format!("{key}: {value:?} is not one of {}", names.join(", "))
        })
}

/// `<prefix>.schemas.enable`, when set.
pub(super) fn schemas_enable(o: &Options, prefix: &str) -> Result<Option<bool>, String> {
    let key = format!("{prefix}.schemas.enable");
    match o.get(&key) {
        None => Ok(None),
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            _ => Err(format!("{key}: {v:?} is not true or false")),
        },
    }
}
