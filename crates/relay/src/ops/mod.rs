//! Operating the relay: the `check`, `status`, `preview`, `setup-sql`, `signal` and `dead-letters` commands, the generated option reference (`reference.rs`), and what a running
//! relay exposes (`/metrics`, `/health`, `/ready` in `http.rs`; the metrics themselves are
//! `crate::metrics`, shared by every step).

pub mod check;
pub mod dead_letters;
pub mod http;
pub mod loggers;
pub mod preview;
pub mod reference;
pub mod setup_sql;
pub mod signal;
pub mod status;
