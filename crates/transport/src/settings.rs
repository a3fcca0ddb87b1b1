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
    /// Deadline for a peer to read the whole answer to its request, ms (a
    /// peer that opens a stream and never reads its answer frees the
    /// stream's task and buffers then). Default 10 000.
    pub write_timeout: Duration,
    /// Connections one certificate identity (role and name) may hold open
    /// to this endpoint at once; a new one beyond it closes the identity's
    /// connection with no stream in flight that was active least recently
    /// (or, when all are busy, is itself closed). Default 64.
    pub max_connections_per_identity: usize,
    /// Bytes of requests being received on this endpoint, every stream of
    /// every connection together; a stream waits (within its read
    /// deadline) while the budget is spent. Default 256 MiB; at least one
    /// maximal frame.
    pub max_receive_bytes: usize,
    /// Connection-level QUIC flow-control window, bytes: data a peer may
    /// have sent that the node has not read yet, per connection. Default
    /// 8 MiB.
    pub connection_window: u32,
    /// Receive buffer asked for the endpoint's UDP socket, bytes
    /// (`SO_RCVBUF`; Linux caps it at `net.core.rmem_max` and reports
    /// twice the granted value). The kernel default, 208 KiB, overflowed on
    /// loopback during bulk loads (MSETs of 128 keys): about 0.5% of
    /// datagrams dropped (`RcvbufErrors` in /proc/net/snmp), each one a
    /// QUIC loss recovery. Default 4 MiB.
    pub udp_receive_buffer: usize,
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
            write_timeout: Duration::from_secs(10),
            max_connections_per_identity: 64,
            max_receive_bytes: 256 << 20,
            connection_window: 8 << 20,
            udp_receive_buffer: 4 << 20,
        }
    }
}
