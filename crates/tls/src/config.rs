//! The rustls server and client configurations for cluster connections.
//!
//! Both are TLS 1.3 only, use the ring provider explicitly, authenticate both
//! sides with cluster certificates and offer the ALPN protocol [`ALPN`]. The
//! transport turns them into quinn configurations.

use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig};

use crate::Result;
use crate::load::Credentials;
use crate::verify::{NodeVerifier, provider, roots};

/// The ALPN protocol id of the cluster protocol, version 1.
pub const ALPN: &[u8] = b"kv/1";

/// The configuration a node accepts connections with.
///
/// Client certificates are required and must chain to a CA of the cluster CA
/// bundle ([`Credentials::cas`]) and carry
/// clientAuth (rustls's `WebPkiClientVerifier`). Which *role* a peer has is not
/// checked here: the transport calls [`crate::peer_identity`] on the peer's
/// certificate after the handshake and decides what it may do.
///
/// # Errors
/// When rustls refuses the CA, the key or the certificate.
pub fn server_config(creds: &Credentials) -> Result<Arc<ServerConfig>> {
    let provider = provider();
    let client_verifier =
        WebPkiClientVerifier::builder_with_provider(roots(creds.cas())?, provider.clone())
            .build()?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(creds.cert_chain().to_vec(), creds.key().clone_key())?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(Arc::new(config))
}

/// The configuration nodes, kvctl and the client library connect with.
///
/// Presents our certificate and checks the server's with [`NodeVerifier`]:
/// connect with the peer's node id as server name to require that node, or
/// with [`crate::ANY_NODE`] to accept any node of the cluster.
///
/// # Errors
/// When rustls refuses the CA, the key or the certificate.
pub fn client_config(creds: &Credentials) -> Result<Arc<ClientConfig>> {
    let verifier = NodeVerifier::trusting(creds.cas())?;
    // `dangerous()` is only rustls's name for "custom verifier": NodeVerifier
    // adds checks on top of webpki's and skips none of them.
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(creds.cert_chain().to_vec(), creds.key().clone_key())?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(Arc::new(config))
}
