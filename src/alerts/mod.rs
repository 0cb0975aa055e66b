//! Alerts: rules read from a TOML file (`rules.rs`), evaluated over stored
//! attempts at an instant (`evaluate.rs`), turned into firing / resolved
//! transitions (`tracker.rs`) and sent to receivers (`notify.rs`). The
//! service runs them on a timer; `alerts --check` replays them over stored
//! data with the same code.

pub mod evaluate;
pub mod history;
pub mod notify;
pub mod tracker;

pub use tracker::{Tracker, Transition};
