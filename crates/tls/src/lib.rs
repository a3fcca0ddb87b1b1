//! Cluster certificates and the rustls configurations built from them.
//!
//! This crate's one job is mutual TLS for the cluster (design.md, Transport and security): it makes the
//! cluster CA and the node, client and admin certificates ([`init`], [`add_node`],
//! [`add_client`], used by `kvctl certs`), rotates the cluster CA in steps a
//! running cluster follows without downtime ([`rotate`]), loads them with
//! checks that fail at startup with a message naming the file ([`load`]; the
//! CA file may be a bundle of a few CAs, [`load_ca_bundle`]), and turns them into rustls
//! configurations ([`server_config`], [`client_config`]) that require and verify
//! certificates on both sides. It also reads the role and name a certificate
//! carries ([`peer_identity`]); see [`role`] for how roles are encoded.
//!
//! Inputs are PEM files on disk; outputs are `Arc<rustls::ServerConfig>` and
//! `Arc<rustls::ClientConfig>`. The crate does no network I/O and must not depend
//! on tokio or quinn: the transport crate builds quinn configurations from what
//! is returned here. Only the ring crypto provider is used, set explicitly on
//! every configuration (rustls is compiled without aws-lc-rs).
//!
//! There is no switch that skips verification. Role checks on the *server* side
//! (is this peer a node? an admin?) happen after the handshake, in the transport,
//! which calls [`peer_identity`] on the peer's certificate; the client side checks
//! during the handshake that the server is a node ([`NodeVerifier`]).

mod config;
mod error;
mod generate;
mod load;
pub mod role;
mod rotate;
mod verify;

pub use config::{ALPN, client_config, server_config};
pub use error::{Error, Result};
pub use generate::{add_client, add_node, init};
pub use load::{
    Credentials, MAX_CA_CERTS, MAX_PEM_BYTES, TlsFiles, fingerprint, load, load_ca_bundle,
};
pub use role::{PeerIdentity, Role, peer_identity};
pub use rotate::{
    MAX_DIR_ENTRIES, NEXT_DIR, PREVIOUS_DIR, RotationReport, RotationState, RotationStep, rotate,
    rotation_state,
};
pub use verify::{ANY_NODE, NodeVerifier};
