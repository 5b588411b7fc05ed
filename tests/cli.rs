//! What a user sees when the configuration is wrong: the key named, a non-zero exit.

mod common;

use std::process::Command;

fn relay(args: &[&str]) -> (i32, String) {
    let out = Command::new(common::RELAY)
        .args(args)
        .env_remove("OUTBOX_RELAY_POSTGRES_URL")
        .env_remove("OUTBOX_RELAY_BOOTSTRAP_SERVERS")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const OK: [&str; 5] = [
    "run",
    "--postgres-url",
    "postgres://relay:hunter2@127.0.0.1:1/app",
    "--bootstrap-servers",
    "127.0.0.1:1",
];

#[test]
fn an_invalid_option_is_named_and_exits_2() {
    let (code, err) = relay(&[&OK[..], &["--slot", "Not-Valid"]].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("slot:") && err.contains("lower-case"), "{err}");
    let (code, err) = relay(
        &[
            &OK[..],
            &["--producer-property", "enable.idempotence=false"],
        ]
        .concat(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("enable.idempotence=false"), "{err}");
}

#[test]
fn a_missing_option_says_where_to_set_it() {
    let (code, err) = relay(&["run", "--bootstrap-servers", "k:9092"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--postgres-url") && err.contains("OUTBOX_RELAY_POSTGRES_URL"),
        "{err}"
    );
}

#[test]
fn an_unknown_config_file_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relay.toml");
    std::fs::write(
        &path,
        "bootstrap-servers = \"k:9092\"\npostgres-url = \"postgres://u@h/d\"\npublicaton = \"x\"\n",
    )
    .unwrap();
    let (code, err) = relay(&["run", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown field `publicaton`") && err.contains("relay.toml"),
        "{err}"
    );
}

#[test]
fn environment_variables_configure_run() {
    let out = Command::new(common::RELAY)
        .args(["run", "--bootstrap-servers", "k:9092"])
        .env("OUTBOX_RELAY_POSTGRES_URL", "postgres://u:pw@h/d")
        .env("OUTBOX_RELAY_SLOT", "BAD SLOT")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("slot:") && err.contains("BAD SLOT"),
        "the variable was read: {err}"
    );
}

#[test]
fn help_explains_every_option_and_hides_secrets() {
    let out = Command::new(common::RELAY)
        .args(["run", "--help"])
        .env("OUTBOX_RELAY_POSTGRES_URL", "postgres://u:hunter2@h/d")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for option in [
        "--postgres-url",
        "--bootstrap-servers",
        "--table",
        "--slot",
        "--publication",
        "--config",
        "--topic-template",
        "--dead-letter-topic",
    ] {
        assert!(help.contains(option), "{option} missing from run --help");
    }
    assert!(
        !help.contains("hunter2"),
        "a secret from the environment appeared in --help"
    );
}

#[test]
fn connection_errors_never_print_the_password() {
    // Nothing listens on port 1: the relay keeps retrying (transient) until stopped, so
    // run it with a deadline through `timeout`.
    let out = Command::new("timeout")
        .args(["--preserve-status", "-s", "TERM", "3", common::RELAY])
        .args(OK)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("127.0.0.1") && err.contains("refused"),
        "the connection problem is reported: {err}"
    );
    assert!(!err.contains("hunter2"), "the password leaked: {err}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "SIGTERM while reconnecting exits 0: {err}"
    );
}

#[test]
fn version_names_the_commit_and_librdkafka() {
    let out = Command::new(common::RELAY)
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.starts_with(&format!("outbox-relay {} (git ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    assert!(text.contains("librdkafka 2."), "{text}");
}

#[test]
fn health_fails_when_nothing_answers() {
    let out = Command::new(common::RELAY)
        .args(["health", "--address", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("/health at 127.0.0.1:1"));
}

#[test]
fn run_help_groups_its_options_and_the_binary_writes_completions_and_a_man_page() {
    let stdout = |args: &[&str]| {
        let out = Command::new(common::RELAY).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let help = stdout(&["run", "--help"]);
    for heading in [
        "Source (PostgreSQL):",
        "Routing (EventRouter):",
        "Kafka:",
        "Operations:",
    ] {
        assert!(
            help.lines().any(|l| l == heading),
            "{heading} missing:\n{help}"
        );
    }
    let bash = stdout(&["completions", "bash"]);
    assert!(
        bash.contains("complete -F _outbox__relay") && bash.contains("--postgres-url"),
        "{bash}"
    );
    let zsh = stdout(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef outbox-relay"), "{zsh}");
    let man = stdout(&["man"]);
    assert!(man.contains(".TH outbox-relay 1"), "{man}");
    assert!(man.contains("setup\\-sql"), "subcommands are listed: {man}");
}
