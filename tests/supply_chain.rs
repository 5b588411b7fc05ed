//! What the workspace promises about its toolchain: `rust-version` (the MSRV) is one every
//! dependency builds with. Only one toolchain can be installed on these machines, so the
//! promise is checked from both ends: each locked dependency's own `rust-version` is at or
//! below ours (here), and the workspace's own code uses no std API newer than it (clippy's
//! `incompatible_msrv`, on in `cargo clippy -D warnings`, which reads the same field).
//! Licenses, duplicate versions, sources and advisories: `cargo deny check` (deny.toml) in
//! scripts/test.sh.

use serde_json::Value;
use std::process::Command;

fn version(v: &str) -> (u64, u64, u64) {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

#[test]
fn every_locked_dependency_builds_with_the_workspace_rust_version() {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let ours = packages
        .iter()
        .find(|p| p["name"] == "outbox-relay")
        .and_then(|p| p["rust_version"].as_str())
        .expect("the workspace declares rust-version");
    // Dependencies of the shipped code and of the tests alike (cargo metadata lists every
    // package of the lock file for this platform).
    let resolved: Vec<&str> = metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    let mut newer = Vec::new();
    for p in packages {
        if !resolved.contains(&p["id"].as_str().unwrap()) {
            continue;
        }
        if let Some(theirs) = p["rust_version"].as_str() {
            if version(theirs) > version(ours) {
                newer.push(format!("{} {} needs {theirs}", p["name"], p["version"]));
            }
        }
    }
    assert!(
        newer.is_empty(),
        "rust-version {ours} in Cargo.toml, but: {newer:#?}\n\
         raise rust-version or pin the dependency (cargo update -p NAME --precise VERSION)"
    );
    assert!(
        version(ours) >= (1, 85, 0),
        "resolver = \"3\" (rust-version aware) needs 1.84+"
    );
}
