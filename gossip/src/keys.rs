//! Every key a node publishes about itself in gossip, in one place. The
//! first five make up [`crate::NodeInfo`]; the others are read by the node
//! (its membership adapter, `kvctl status`, the router's inputs).

/// Client-reachable address, `HOST:PORT`.
pub const CLIENT_ADDR: &str = "client_addr";
/// Zone label.
pub const ZONE: &str = "zone";
/// Host label.
pub const HOST: &str = "host";
/// Weight, decimal.
pub const WEIGHT: &str = "weight";
/// `JOINING`, `UP`, `DRAINING` or `LEFT`.
pub const STATUS: &str = "status";
/// The incarnation of the node's data directory (16 hex digits): clocks of
/// other nodes treat its older incarnations as retired actors.
pub const INCARNATION: &str = "incarnation";
/// Streaming progress while the node pulls partitions it will own,
/// `done/total` (empty when it has nothing to pull).
pub const TRANSFER: &str = "transfer";
/// Prefix of the keys (`removed:<id>`, value `1`) by which a node
/// announces that an admin removed a dead node; every node treats such a
/// node as LEFT.
pub const REMOVED_PREFIX: &str = "removed:";
/// The read cache's hit ratio (0.000..1.000).
pub const CACHE_HIT_RATIO: &str = "cache_hit_ratio";
/// The read cache's most read key hashes (16 hex digits each, comma
/// separated).
pub const HOT_KEYS: &str = "hot_keys";
/// The node's load report, every report period: `SEQ CPU QUEUE BACKLOG
/// REPAIR` (a sequence number, so that every report is news to gossip;
/// CPU in 0.000..1.000; REPAIR 0 or 1).
pub const LOAD: &str = "load";
/// Hints the node holds per intended owner, `node2:12,node3:4`.
pub const HINTS: &str = "hints";
/// The node's RESP (Redis protocol) address, `HOST:PORT`.
pub const RESP_ADDR: &str = "resp_addr";
/// The node's HTTP admin endpoint address, `HOST:PORT`.
pub const ADMIN_ADDR: &str = "admin_addr";
/// When the node's own certificate stops being valid (`notAfter`), seconds
/// since the Unix epoch, decimal.
pub const CERT_NOT_AFTER: &str = "cert_not_after";
/// The SHA-256 fingerprint (64 lowercase hex digits) of the CA that signed
/// the node's certificate.
pub const CERT_CA: &str = "cert_ca";
/// The SHA-256 fingerprints of the CAs the node trusts (its CA bundle),
/// comma separated, in bundle order.
pub const TRUSTED_CAS: &str = "trusted_cas";
