//! Operating the relay: the `check`, `status` and `setup-sql` commands, and what a running
//! relay exposes (`/metrics`, `/health`, `/ready` in `http.rs`, the metrics in `metrics.rs`).

pub mod check;
pub mod http;
pub mod metrics;
pub mod setup_sql;
pub mod status;
