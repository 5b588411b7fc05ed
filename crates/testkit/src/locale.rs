//! Operating-system locales for tests that run PostgreSQL in another language (its
//! `lc_messages` must name a locale the system has).

use anyhow::{bail, Context, Result};
use std::process::Command;

const HINT: &str =
    "install Debian's `locales` package (scripts/install-deps.sh does) and run the tests as root, \
     or generate the locale once: `localedef -i fr_FR -f UTF-8 fr_FR.UTF-8`";

/// Makes sure locale `language_territory.UTF-8` (e.g. `fr_FR`) exists, generating it with
/// `localedef` when missing. Returns the locale name to put in `lc_messages`.
pub fn ensure(language_territory: &str) -> Result<String> {
    let name = format!("{language_territory}.UTF-8");
    if has(&name)? {
        return Ok(name);
    }
    let out = Command::new("localedef")
        .args(["-i", language_territory, "-f", "UTF-8", &name])
        .output()
        .with_context(|| format!("running localedef; {HINT}"))?;
    if !out.status.success() || !has(&name)? {
        bail!(
            "could not generate locale {name}: {}; {HINT}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(name)
}

fn has(name: &str) -> Result<bool> {
    let out = Command::new("locale")
        .arg("-a")
        .output()
        .with_context(|| format!("running `locale -a`; {HINT}"))?;
    let wanted = name.to_ascii_lowercase().replace("utf-8", "utf8");
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim().to_ascii_lowercase() == wanted))
}
