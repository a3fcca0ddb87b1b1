//! Transport settings.

use std::time::Duration;

/// QUIC settings of an endpoint. The defaults suit a LAN or loopback
/// cluster; every value is a config key of the node.
#[derive(Clone, Debug)]
pub struct TransportSettings {
    /// A connection with no packet for this long is dropped (QUIC
    /// `max_idle_timeout`), ms. Default 10 000.
    pub idle_timeout: Duration,
    /// Keep-alive ping interval; must stay below `idle_timeout` (design.md
    /// pitfall), ms. Default 2 000.
    pub keep_alive: Duration,
    /// Deadline for establishing a connection (handshake included), ms.
    /// Default 2 000.
    pub connect_timeout: Duration,
    /// Deadline for a peer to send a whole request on an accepted stream,
    /// ms (protects against slow senders). Default 10 000.
    pub read_timeout: Duration,
    /// Concurrent bidirectional streams one peer may open on a connection
    /// (requests in flight per connection). Default 1024.
    pub max_streams_per_connection: u32,
    /// Unidirectional (gossip) streams one peer may have open. Default 64.
    pub max_gossip_streams: u32,
}

impl Default for TransportSettings {
    fn default() -> Self {
        TransportSettings {
            idle_timeout: Duration::from_secs(10),
            keep_alive: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(10),
            max_streams_per_connection: 1024,
            max_gossip_streams: 64,
        }
    }
}
