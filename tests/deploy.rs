//! The deployment files users install: the systemd unit is valid for systemd, and the
//! command it runs works with what it gives the relay (a config file and the password as a
//! systemd credential file).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn the_systemd_unit_is_valid_and_its_command_line_runs() {
    let unit =
        std::fs::read_to_string(format!("{ROOT}/deploy/systemd/outbox-relay.service")).unwrap();
    assert!(unit.contains("LoadCredential=postgres-password:"), "{unit}");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    assert!(exec.contains("--postgres-password-file ${CREDENTIALS_DIRECTORY}/postgres-password"));

    // systemd itself accepts the unit (with the binary path pointed at the built one).
    let dir = tempfile::tempdir().unwrap();
    let checked = dir.path().join("outbox-relay.service");
    std::fs::write(
        &checked,
        unit.replace("/usr/local/bin/outbox-relay", common::RELAY),
    )
    .unwrap();
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&checked)
        .output()
        .unwrap_or_else(|e| {
            panic!("systemd-analyze is needed to check the unit ({e}); apt-get install systemd")
        });
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success() && said.trim().is_empty(), "{said}");

    // The command line as systemd runs it: options from the config file, the password from
    // the credential file (never in the URL, the environment or the unit).
    let credentials = dir.path().join("credentials");
    std::fs::create_dir(&credentials).unwrap();
    std::fs::write(
        credentials.join("postgres-password"),
        "s3cret-from-credential\n",
    )
    .unwrap();
    let config = dir.path().join("relay.toml");
    std::fs::write(
        &config,
        "postgres-url = \"postgres://relay@127.0.0.1:1/app\"\nbootstrap-servers = \"127.0.0.1:1\"\nmetrics-address = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let args: Vec<String> = exec
        .split_whitespace()
        .skip(1)
        .map(|a| {
            a.replace("${CREDENTIALS_DIRECTORY}", credentials.to_str().unwrap())
                .replace("/etc/outbox-relay/relay.toml", config.to_str().unwrap())
        })
        .collect();
    let log = dir.path().join("relay.log");
    let mut child = Command::new(common::RELAY)
        .args(&args)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("reconnecting") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(text.contains("serving /metrics"), "{text}");
    assert!(
        text.contains("127.0.0.1:1"),
        "it runs and tries PostgreSQL: {text}"
    );
    assert!(
        !text.contains("s3cret"),
        "the password never reaches the log: {text}"
    );
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("--log-format json from the unit ({e}): {line}"));
    }
}
