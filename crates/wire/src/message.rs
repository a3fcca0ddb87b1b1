//! Messages: what clients ask nodes ([`client`]), what nodes ask each other
//! ([`peer`]), the answers, and the operator reports ([`report`]).
//!
//! One request per QUIC stream, one answer back; a request id travels with
//! each request for tracing and for telling retries apart, and every answer
//! carries the ring version of the node that gave it. Adding or changing a
//! field is an incompatible change of the codec's encoding: bump
//! [`crate::PROTOCOL_VERSION`]. A new variant at the end of an enum is not:
//! an older reader refuses that one message (it does not decode; a node
//! answers it as an invalid request) and misreads nothing, so a new
//! request may be added that way when an older node may refuse it (e.g.
//! [`RequestBody::Certs`]).

pub mod client;
pub mod peer;
pub mod report;
pub mod ring;
#[cfg(test)]
mod tests;

pub use client::{ClientReply, ErrorKind, GetReply, Op, Request, RequestBody, Response, WireError};
pub use peer::{Feedback, PeerCall, PeerReply, PeerRequest, PeerResponse};
pub use report::{
    CertsReport, ExplainReplica, ExplainReport, NodeCert, NodeReport, PlanReport, PlannedMove,
    RepairReport, StatusReport,
};
pub use ring::{MemberLoad, RingMember, RingReport, RingReportV2};
