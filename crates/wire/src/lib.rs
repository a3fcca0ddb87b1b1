//! The wire protocol between clients and nodes and between nodes: message
//! types, and frames that carry them.
//!
//! A frame is `[protocol version: u8][kind: u8][payload length: u32 LE]
//! [payload]`, the payload being one message encoded by `kv_types::codec`:
//! a client [`Request`] and its [`ClientReply`], or a node's [`PeerCall`]
//! and its [`PeerReply`] (frames of their own kinds, so neither side ever
//! decodes the other's answers).
//! Every frame is checked against [`frame::MAX_FRAME_BYTES`] before anything
//! is allocated, and every decoded message is validated (key and value
//! bounds, causal clock invariants) before it reaches the node.
//!
//! This crate does bytes only: no sockets, no tokio. The transport crate
//! moves frames; the node interprets messages. Wire types are not storage
//! types: a stored record has its own format in `kv-storage`.

mod error;
pub mod frame;
pub mod message;

pub use error::{Error, Result};
pub use frame::{FrameKind, MAX_FRAME_BYTES, MAX_REQUEST_BYTES, PROTOCOL_VERSION};
pub use message::{
    CertsReport, ClientReply, ErrorKind, ExplainReplica, ExplainReport, Feedback, GetReply,
    MemberLoad, NodeCert, NodeReport, Op, PeerCall, PeerReply, PeerRequest, PeerResponse,
    PlanReport, PlannedMove, RepairReport, Request, RequestBody, Response, RingMember, RingReport,
    RingReportV2, StatusReport, WireError,
};
