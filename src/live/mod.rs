//! Watching a live cluster: its webhook configurations, the apiserver's `/metrics`, and its audit
//! events. Each part runs as a task that sends messages over a bounded channel; the console turns
//! them into state changes. Read-only unless the user asks otherwise.

pub mod audit;
pub mod cluster;
pub mod metrics;
