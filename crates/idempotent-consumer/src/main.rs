//! idempotent-consumer BOOTSTRAP POSTGRES_URL [GROUP] [TOPIC]: applies Order.events to the
//! order_totals projection exactly once. See lib.rs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: idempotent-consumer BOOTSTRAP_SERVERS POSTGRES_URL [GROUP] [TOPIC]";
    let config = idempotent_consumer::Config {
        bootstrap_servers: args.next().ok_or_else(|| anyhow::anyhow!(usage))?,
        postgres_url: args.next().ok_or_else(|| anyhow::anyhow!(usage))?,
        group_id: args.next().unwrap_or_else(|| "order-projection".into()),
        topics: vec![args.next().unwrap_or_else(|| "Order.events".into())],
        dead_letter_topic: "order-projection.dlq".into(),
        max_attempts: 3,
        stop_when_idle: None,
    };
    let stats = idempotent_consumer::run(&config).await?;
    println!("{stats:?}");
    Ok(())
}
