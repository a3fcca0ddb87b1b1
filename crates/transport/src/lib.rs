//! The node's one QUIC endpoint: mutual TLS, one pooled connection per peer, request/response RPC and gossip streams.
