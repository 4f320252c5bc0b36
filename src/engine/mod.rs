//! (in progress)
pub mod call;
