//! Cluster membership: chitchat gossip carried over the node's QUIC endpoint, phi-accrual liveness.
