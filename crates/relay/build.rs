//! Records the git commit the binary is built from, for `--version` and
//! `outbox_relay_build_info`: `OUTBOX_RELAY_GIT_SHA` when the build sets it (the Dockerfile's
//! REVISION), else `git rev-parse`, else "unknown".

fn main() {
    println!("cargo:rerun-if-env-changed=OUTBOX_RELAY_GIT_SHA");
    let given = std::env::var("OUTBOX_RELAY_GIT_SHA")
        .ok()
        .map(|s| s.trim().chars().take(12).collect::<String>())
        .filter(|s| !s.is_empty() && s != "unknown");
    let sha = given
        .or_else(|| {
            std::process::Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=OUTBOX_RELAY_GIT_SHA={sha}");
    for path in ["../../.git/HEAD", "../../.git/refs/heads"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
