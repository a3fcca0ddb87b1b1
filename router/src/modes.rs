//! The routing modes, each a pure function of [`crate::Inputs`]: ours
//! ([`scoring`]) and the published schemes we measure it against.

pub mod c3;
pub mod hwlb;
pub mod p2c;
pub mod plain;
pub mod scoring;
pub mod snitch;
