//! The README's first command, `scripts/demo.sh`, run as it is: it shows each order event
//! arriving on the topic, says which broker it uses, and needs no broker installed.
//! (The script's install and build steps run when the test runs alone; see below.)

use std::process::Command;

#[test]
fn the_readme_demo_shows_each_order_event_arriving_on_the_topic() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut demo = Command::new("bash");
    demo.arg("scripts/demo.sh")
        .current_dir(root)
        .env("ORDERS", "3");
    // Under scripts/test.sh (scripts/run-tests.py sets OUTBOX_RELAY_WORKSPACE_BUILT) the demo's
    // two binaries are built already (`cargo build --workspace --bins --tests`), with the
    // features the tests unify; the script's own `cargo build` would compile the relay a second
    // time. Run alone (`cargo test --test demo`), the script installs and builds as a user's
    // run does.
    if std::env::var_os("OUTBOX_RELAY_WORKSPACE_BUILT").is_some() {
        let bins = std::path::Path::new(env!("CARGO_BIN_EXE_outbox-relay"))
            .parent()
            .unwrap();
        demo.env("OUTBOX_RELAY_DEMO_BIN_DIR", bins);
    }
    let out = demo.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("embedded Kafka-protocol broker: librdkafka's mock cluster")
            && stdout.contains("--bootstrap-servers HOST:PORT"),
        "the demo says which broker it uses and how to use a real one:\n{stdout}"
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
