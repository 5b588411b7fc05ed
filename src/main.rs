//! The `outbox-relay` binary. Everything lives in `crates/relay` (outbox-relay-core).

fn main() -> std::process::ExitCode {
    outbox_relay_core::main()
}
