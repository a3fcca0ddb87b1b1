//! Messages: what clients ask nodes ([`client`]), what nodes ask each other
//! ([`peer`]), the answers, and the operator reports ([`report`]).
//!
//! One request per QUIC stream, one answer back; a request id travels with
//! each request for tracing and for telling retries apart, and every answer
//! carries the ring version of the node that gave it. Adding or changing a
//! field is an incompatible change of the codec's encoding: bump
//! [`crate::PROTOCOL_VERSION`].

pub mod client;
pub mod peer;
pub mod report;
pub mod ring;
#[cfg(test)]
mod tests;

pub use client::{ClientReply, ErrorKind, GetReply, Op, Request, RequestBody, Response, WireError};
pub use peer::{Feedback, PeerCall, PeerReply, PeerRequest, PeerResponse};
pub use report::{
    ExplainReplica, ExplainReport, NodeReport, PlanReport, PlannedMove, RepairReport, StatusReport,
};
pub use ring::{MemberLoad, RingMember, RingReport};
