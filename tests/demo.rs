//! The README's demo (scripts/demo.sh runs this same binary) shows events arriving.

use std::process::Command;

#[test]
fn the_demo_shows_each_order_event_arriving_on_the_topic() {
    let demo = std::path::Path::new(env!("CARGO_BIN_EXE_outbox-relay"))
        .with_file_name("outbox-relay-demo");
    let status = Command::new("cargo")
        .args([
            "build",
            "--quiet",
            "-p",
            "outbox-relay-testkit",
            "--bin",
            "outbox-relay-demo",
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let out = Command::new(&demo)
        .arg(env!("CARGO_BIN_EXE_outbox-relay"))
        .args(["--orders", "3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("consumer: Order.events"))
        .collect();
    assert_eq!(events.len(), 3, "{stdout}");
    assert!(
        events[0].contains("eventType=OrderCreated")
            && events[0].contains("\"customer\": \"customer-1\""),
        "{}",
        events[0]
    );
}
