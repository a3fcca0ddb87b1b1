//! Certificate verification: the client-side [`NodeVerifier`] and the
//! load-time chain check.
//!
//! Chain building, validity periods, key usages and signatures are always
//! left to rustls's webpki verifiers with the cluster CA bundle as the only
//! roots (one CA, or the old and the new one while a CA is rotated); this
//! module adds the role and node-name checks on top. Nothing here can be
//! switched off.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::role::{Role, peer_identity};
use crate::{Error, Result};

/// The server name to connect with when any node will do.
///
/// kvctl and the client library know only `HOST:PORT`, not which node listens
/// there: they pass this name to `connect`, and [`NodeVerifier`] then accepts
/// any node certificate of the cluster. A node dialing a known peer passes the
/// peer's node id instead, and the certificate must be that node's. The name is
/// under `.invalid`, so it can never be a real host or a node id.
pub const ANY_NODE: &str = "any.kvstore.invalid";

/// The one crypto provider: ring.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A root store holding only the cluster CA bundle's certificates.
pub(crate) fn roots(cas: &[CertificateDer<'static>]) -> Result<Arc<RootCertStore>> {
    let mut roots = RootCertStore::empty();
    for ca in cas {
        roots.add(ca.clone())?;
    }
    Ok(Arc::new(roots))
}

/// Checks that `chain` (leaf first) is valid now under one of `cas`: every
/// certificate must work as a TLS client, and a node's also as a server for
/// its own node id.
pub(crate) fn check_trusted(
    cas: &[CertificateDer<'static>],
    chain: &[CertificateDer<'static>],
) -> std::result::Result<(), rustls::Error> {
    let Some((leaf, intermediates)) = chain.split_first() else {
        return Err(rustls::Error::NoCertificatesPresented);
    };
    let roots = roots(cas).map_err(|e| rustls::Error::General(e.to_string()))?;
    let now = UnixTime::now();
    WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
        .build()
        .map_err(|e| rustls::Error::General(e.to_string()))?
        .verify_client_cert(leaf, intermediates, now)?;
    if let Ok(identity) = peer_identity(leaf)
        && identity.role == Role::Node
    {
        let name = ServerName::try_from(identity.name)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        WebPkiServerVerifier::builder_with_provider(roots, provider())
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?
            .verify_server_cert(leaf, intermediates, &name, &[], now)?;
    }
    Ok(())
}

/// The client side's server-certificate verifier: the server must be a node
/// of this cluster, and the node we asked for unless we asked for
/// [`ANY_NODE`].
///
/// In order: the leaf must carry an identity ([`peer_identity`]) with role
/// [`Role::Node`]; its node id must equal the server name given to `connect`
/// (unless that is [`ANY_NODE`]); then rustls's [`WebPkiServerVerifier`], with
/// the cluster CA bundle as its only roots, checks the chain, validity, serverAuth key
/// usage and that the certificate's DNS SAN matches the node id. Handshake
/// signatures are verified by the same webpki verifier. Server names that are
/// IP addresses are refused: connect with a node id or [`ANY_NODE`].
#[derive(Debug)]
pub struct NodeVerifier {
    /// Chain, validity, usage and signature checks against the cluster CA.
    inner: Arc<WebPkiServerVerifier>,
}

impl NodeVerifier {
    /// A verifier trusting only `ca`.
    ///
    /// # Errors
    /// When `ca` is not a usable trust anchor.
    pub fn new(ca: &CertificateDer<'static>) -> Result<Arc<Self>> {
        Self::trusting(std::slice::from_ref(ca))
    }

    /// A verifier trusting every CA of `cas` (a CA bundle, such as the old
    /// and the new CA while the cluster CA is rotated) and nothing else.
    ///
    /// # Errors
    /// When a CA is not a usable trust anchor, or `cas` is empty.
    pub fn trusting(cas: &[CertificateDer<'static>]) -> Result<Arc<Self>> {
        let inner = WebPkiServerVerifier::builder_with_provider(roots(cas)?, provider()).build()?;
        Ok(Arc::new(NodeVerifier { inner }))
    }
}

/// Wraps our error for rustls, keeping its message for the handshake error.
fn refuse(reason: String) -> rustls::Error {
    tracing::debug!(%reason, "refusing server certificate");
    rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
        Error::Identity { reason },
    ))))
}

impl ServerCertVerifier for NodeVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let identity = peer_identity(end_entity).map_err(|e| refuse(e.to_string()))?;
        if identity.role != Role::Node {
            return Err(refuse(format!(
                "server certificate has role {}, not node",
                identity.role
            )));
        }
        match server_name {
            ServerName::DnsName(name) if name.as_ref().eq_ignore_ascii_case(ANY_NODE) => {}
            ServerName::DnsName(name) if name.as_ref().eq_ignore_ascii_case(&identity.name) => {}
            ServerName::DnsName(_) => {
                tracing::debug!(expected = ?server_name, presented = %identity.name, "wrong node");
                return Err(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForNameContext {
                        expected: server_name.to_owned(),
                        presented: vec![identity.name],
                    },
                ));
            }
            _ => {
                return Err(refuse(format!(
                    "server name {server_name:?} is not a node id; connect with a node id or {ANY_NODE}"
                )));
            }
        }
        let node_name = ServerName::try_from(identity.name)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        self.inner
            .verify_server_cert(end_entity, intermediates, &node_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
