//! Translation between the replication core's types and the wire
//! protocol's, in one place: the front doors (the QUIC handler, RESP) and
//! the peer transport call these, and nothing else converts.

use kv_replication::{Error, Plan, Read, Refusal, RepairProgress};
use kv_types::NodeId;
use kv_wire::{ErrorKind, GetReply, PlanReport, PlannedMove, RepairReport, WireError};

/// The wire error of a core error, reported by `me` (or by the node whose
/// storage failed).
pub fn error_to_wire(me: &NodeId, e: &Error) -> WireError {
    let (kind, node) = match e {
        Error::Unavailable { .. } => (ErrorKind::Unavailable, me),
        Error::Indeterminate { .. } => (ErrorKind::Indeterminate, me),
        Error::Refused(Refusal::TooManySiblings(_)) => (ErrorKind::TooManySiblings, me),
        Error::Refused(Refusal::Invalid(_)) => (ErrorKind::Invalid, me),
        Error::Overloaded(_) => (ErrorKind::Overloaded, me),
        Error::Storage { node, .. } => (ErrorKind::Storage, node),
        Error::Corrupt { node, .. } => (ErrorKind::Corrupt, node),
        Error::Internal(_) | Error::DataDir { .. } => (ErrorKind::Internal, me),
    };
    let message = match e {
        // The node is the error's own field: do not repeat it.
        Error::Storage { message, .. } | Error::Corrupt { message, .. } => message.clone(),
        other => other.to_string(),
    };
    WireError {
        kind,
        message,
        node: node.to_string(),
    }
}

/// The core error of a replica's wire error (the peer transport's side).
pub fn error_from_wire(e: WireError) -> Error {
    let WireError {
        kind,
        message,
        node,
    } = e;
    let detail = format!("{node}: {message}");
    match (kind, NodeId::new(node.as_str())) {
        (ErrorKind::Unavailable, _) => Error::Unavailable {
            needed: 1,
            got: 0,
            detail,
        },
        (ErrorKind::Indeterminate, _) => Error::Indeterminate {
            needed: 1,
            stored: 0,
            detail,
        },
        (ErrorKind::Overloaded, _) => Error::Overloaded(detail),
        (ErrorKind::Invalid | ErrorKind::Refused, _) => Error::Refused(Refusal::Invalid(detail)),
        (ErrorKind::TooManySiblings, _) => Error::Refused(Refusal::TooManySiblings(message)),
        (ErrorKind::Storage, Ok(node)) => Error::Storage { node, message },
        (ErrorKind::Corrupt, Ok(node)) => Error::Corrupt { node, message },
        // A node name that is no node id comes from a broken peer.
        (ErrorKind::Internal | ErrorKind::Storage | ErrorKind::Corrupt, _) => {
            Error::Internal(detail)
        }
    }
}

/// The wire answer of a quorum read.
pub fn read_to_wire(read: Read) -> GetReply {
    GetReply {
        values: read.values(),
        deleted: read.is_deleted(),
        context: read.context,
    }
}

/// The wire report of a plan.
pub fn plan_to_wire(plan: Plan) -> PlanReport {
    PlanReport {
        change: plan.change,
        started: plan.started,
        partitions: plan.partitions,
        moves: plan
            .moves
            .into_iter()
            .map(|m| PlannedMove {
                to: m.to.to_string(),
                from: m.from.iter().map(ToString::to_string).collect(),
                partitions: m.partitions,
                keys: m.keys,
                bytes: m.bytes,
            })
            .collect(),
    }
}

/// The wire report of a repair pass's progress.
pub fn repair_to_wire(progress: RepairProgress) -> RepairReport {
    RepairReport {
        node: progress.node.to_string(),
        running: progress.running,
        partitions_done: progress.partitions_done,
        partitions_total: progress.partitions_total,
        keys_repaired: progress.keys_repaired,
        segments_differing: progress.segments_differing,
        failures: progress.failures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str) -> NodeId {
        NodeId::new(id).unwrap()
    }

    #[test]
    fn every_core_error_keeps_its_kind_across_the_wire() {
        let me = node("node1");
        let cases = [
            (
                Error::Unavailable {
                    needed: 2,
                    got: 1,
                    detail: "only 1".into(),
                },
                ErrorKind::Unavailable,
            ),
            (
                Error::Indeterminate {
                    needed: 2,
                    stored: 1,
                    detail: "stored on 1".into(),
                },
                ErrorKind::Indeterminate,
            ),
            (
                Error::Refused(Refusal::too_many_siblings(17, 16)),
                ErrorKind::TooManySiblings,
            ),
            (Error::invalid("bad context"), ErrorKind::Invalid),
            (Error::Overloaded("full".into()), ErrorKind::Overloaded),
            (
                Error::Storage {
                    node: node("node3"),
                    message: "disk full".into(),
                },
                ErrorKind::Storage,
            ),
            (
                Error::Corrupt {
                    node: node("node3"),
                    message: "crc".into(),
                },
                ErrorKind::Corrupt,
            ),
            (Error::Internal("bug".into()), ErrorKind::Internal),
        ];
        for (error, kind) in cases {
            let wire = error_to_wire(&me, &error);
            assert_eq!(wire.kind, kind, "{error}");
            let back = error_from_wire(wire.clone());
            assert_eq!(error_to_wire(&me, &back).kind, kind, "{error}");
            assert_eq!(back.may_be_applied(), error.may_be_applied(), "{error}");
        }
        let storage = error_to_wire(
            &me,
            &Error::Storage {
                node: node("node3"),
                message: "disk full".into(),
            },
        );
        assert_eq!(storage.node, "node3");
        assert_eq!(storage.message, "disk full");
    }
}
