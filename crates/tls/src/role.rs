//! Roles and the identity a certificate carries.
//!
//! Every certificate the cluster CA signs carries its role as a URI subject
//! alternative name:
//!
//! | role   | URI SAN                  | name taken from            | extended key usage       |
//! |--------|--------------------------|----------------------------|--------------------------|
//! | node   | `urn:kvstore:role:node`  | the DNS SAN (the node id)  | serverAuth + clientAuth  |
//! | client | `urn:kvstore:role:client`| the subject CN (`client`)  | clientAuth               |
//! | admin  | `urn:kvstore:role:admin` | the subject CN (`admin`)   | clientAuth               |
//!
//! `openssl x509 -noout -text -in node1.pem` shows it under "X509v3 Subject
//! Alternative Name" as `URI:urn:kvstore:role:node, DNS:node1`. Nodes carry
//! clientAuth too because they dial their peers as TLS clients.
//!
//! Exactly one role URI must be present; a certificate with none, two, or an
//! unknown one has no identity and is refused.

use std::fmt;
use std::str::FromStr;

use kv_types::NodeId;
use rustls_pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::{Error, Result};

/// The prefix of the role URI subject alternative name.
pub const ROLE_URI_PREFIX: &str = "urn:kvstore:role:";

/// The largest certificate (DER bytes) [`peer_identity`] will parse. Ours are
/// well under 1 KiB; the bound keeps a hostile peer from making us parse more.
pub const MAX_CERT_BYTES: usize = 16 * 1024;

/// What a certificate holder may do in the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// A storage node: serves clients and peers, dials peers.
    Node,
    /// A client (kvctl, the client library): reads and writes.
    Client,
    /// An operator: everything a client may do, plus drain and decommission.
    Admin,
}

impl Role {
    /// The lowercase name: `node`, `client` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Node => "node",
            Role::Client => "client",
            Role::Admin => "admin",
        }
    }

    /// The URI subject alternative name that encodes this role, such as
    /// `urn:kvstore:role:node`.
    pub fn uri(self) -> String {
        format!("{ROLE_URI_PREFIX}{}", self.as_str())
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "node" => Ok(Role::Node),
            "client" => Ok(Role::Client),
            "admin" => Ok(Role::Admin),
            _ => Err(Error::Identity {
                reason: format!(
                    "unknown role {:?} (expected node, client or admin)",
                    s.chars().take(80).collect::<String>()
                ),
            }),
        }
    }
}

/// Who is on the other end of a connection, as its certificate says.
///
/// Only meaningful for a certificate that has been verified against the
/// cluster CA (by the handshake or by [`crate::load`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PeerIdentity {
    /// The role encoded in the certificate's URI SAN.
    pub role: Role,
    /// The node id for nodes (their DNS SAN), the subject CN for clients and
    /// admins.
    pub name: String,
}

impl PeerIdentity {
    /// The node id, if this identity is a node's.
    pub fn node_id(&self) -> Option<NodeId> {
        match self.role {
            Role::Node => NodeId::new(self.name.as_str()).ok(),
            Role::Client | Role::Admin => None,
        }
    }
}

impl fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.role, self.name)
    }
}

/// Reads the role and name from an end-entity certificate.
///
/// This parses only; it does not verify the certificate. Call it on
/// certificates a handshake has already verified.
///
/// # Errors
/// [`Error::Identity`] when the certificate is larger than
/// [`MAX_CERT_BYTES`], is not DER X.509, does not carry exactly one role URI,
/// or lacks its name (a node needs exactly one DNS SAN that is a valid node id;
/// a client or admin exactly one subject CN).
pub fn peer_identity(end_entity: &CertificateDer<'_>) -> Result<PeerIdentity> {
    let bad = |reason: String| Error::Identity { reason };
    if end_entity.len() > MAX_CERT_BYTES {
        return Err(bad(format!(
            "certificate of {} bytes exceeds the limit of {MAX_CERT_BYTES} bytes",
            end_entity.len()
        )));
    }
    let (_, cert) = X509Certificate::from_der(end_entity)
        .map_err(|e| bad(format!("not an X.509 certificate: {e}")))?;
    let sans = cert
        .subject_alternative_name()
        .map_err(|e| bad(format!("malformed subject alternative names: {e}")))?
        .map(|ext| ext.value.general_names.as_slice())
        .unwrap_or_default();

    let mut roles = sans.iter().filter_map(|name| match name {
        GeneralName::URI(uri) => uri.strip_prefix(ROLE_URI_PREFIX),
        _ => None,
    });
    let role = match (roles.next(), roles.next()) {
        (Some(role), None) => role.parse::<Role>()?,
        (None, _) => return Err(bad(format!("no {ROLE_URI_PREFIX}* URI SAN"))),
        (Some(_), Some(_)) => return Err(bad(format!("more than one {ROLE_URI_PREFIX}* URI SAN"))),
    };

    let name = match role {
        Role::Node => {
            let mut dns = sans.iter().filter_map(|name| match name {
                GeneralName::DNSName(dns) => Some(*dns),
                _ => None,
            });
            let (Some(id), None) = (dns.next(), dns.next()) else {
                return Err(bad("a node certificate needs exactly one DNS SAN".into()));
            };
            NodeId::new(id)
                .map_err(|e| bad(format!("DNS SAN is not a node id: {e}")))?
                .to_string()
        }
        Role::Client | Role::Admin => {
            let mut cns = cert.subject().iter_common_name();
            let (Some(cn), None) = (cns.next(), cns.next()) else {
                return Err(bad(format!(
                    "a {role} certificate needs exactly one subject CN"
                )));
            };
            cn.as_str()
                .map_err(|e| bad(format!("subject CN is not a string: {e}")))?
                .to_owned()
        }
    };
    Ok(PeerIdentity { role, name })
}

#[cfg(test)]
mod tests {
    use rcgen::string::Ia5String;
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};

    use super::*;

    /// A self-signed certificate with the given SANs and CN; `peer_identity`
    /// only parses, so no CA is needed.
    fn cert(sans: &[SanType], cn: &[&str]) -> CertificateDer<'static> {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for cn in cn {
            params.distinguished_name.push(DnType::CommonName, *cn);
        }
        params.subject_alt_names = sans.to_vec();
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    fn uri(s: &str) -> SanType {
        SanType::URI(Ia5String::try_from(s).unwrap())
    }

    fn dns(s: &str) -> SanType {
        SanType::DnsName(Ia5String::try_from(s).unwrap())
    }

    #[test]
    fn reads_role_and_name() {
        let node = cert(&[uri("urn:kvstore:role:node"), dns("node7")], &["node7"]);
        assert_eq!(
            peer_identity(&node).unwrap(),
            PeerIdentity {
                role: Role::Node,
                name: "node7".into()
            }
        );
        let admin = cert(&[uri("urn:kvstore:role:admin")], &["admin"]);
        let id = peer_identity(&admin).unwrap();
        assert_eq!((id.role, id.name.as_str()), (Role::Admin, "admin"));
        assert_eq!(id.node_id(), None);
        // Unrelated URIs are ignored.
        let client = cert(
            &[uri("https://example.com"), uri("urn:kvstore:role:client")],
            &["client"],
        );
        assert_eq!(peer_identity(&client).unwrap().role, Role::Client);
    }

    #[test]
    fn refuses_missing_duplicate_or_unknown_roles() {
        let cases = [
            (cert(&[dns("node1")], &["node1"]), "no urn:kvstore:role"),
            (
                cert(
                    &[
                        uri("urn:kvstore:role:node"),
                        uri("urn:kvstore:role:admin"),
                        dns("node1"),
                    ],
                    &["x"],
                ),
                "more than one",
            ),
            (
                cert(&[uri("urn:kvstore:role:root")], &["x"]),
                "unknown role",
            ),
            (
                cert(&[uri("urn:kvstore:role:node")], &["node1"]),
                "exactly one DNS SAN",
            ),
            (
                cert(
                    &[uri("urn:kvstore:role:node"), dns("node1"), dns("node2")],
                    &[],
                ),
                "exactly one DNS SAN",
            ),
            (
                cert(
                    &[uri("urn:kvstore:role:node"), dns("Not-A-Node.example")],
                    &[],
                ),
                "not a node id",
            ),
            (
                cert(&[uri("urn:kvstore:role:client")], &[]),
                "exactly one subject CN",
            ),
        ];
        for (cert, expected) in cases {
            let err = peer_identity(&cert).unwrap_err().to_string();
            assert!(
                err.contains(expected),
                "{err:?} should contain {expected:?}"
            );
        }
    }

    #[test]
    fn refuses_garbage_and_oversized_input() {
        let err = peer_identity(&CertificateDer::from(vec![0x30, 0x03, 1, 2, 3]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an X.509 certificate"), "{err}");
        let huge = CertificateDer::from(vec![0u8; MAX_CERT_BYTES + 1]);
        let err = peer_identity(&huge).unwrap_err().to_string();
        assert!(err.contains("exceeds the limit"), "{err}");
    }

    #[test]
    fn role_names_round_trip() {
        for role in [Role::Node, Role::Client, Role::Admin] {
            assert_eq!(role.as_str().parse::<Role>().unwrap(), role);
            assert_eq!(role.uri(), format!("urn:kvstore:role:{role}"));
        }
        assert!("root".parse::<Role>().is_err());
    }
}
