//! Making the cluster CA and the certificates it signs (`kvctl certs init|add`).
//!
//! All keys are ECDSA P-256. The CA is self-signed, valid for 10 years, and may
//! only sign certificates (keyCertSign, cRLSign), and its subject is
//! `CN=kvstore cluster CA, OU=cluster <16 hex digits of its key's hash>`; leaves are valid for 5 years
//! and carry their role as described in [`crate::role`]. Private keys are
//! written with mode 0600, the output directory is created with mode 0700.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kv_types::NodeId;
use rcgen::string::Ia5String;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::load::{read_bounded, read_certs};
use crate::role::Role;
use crate::{Error, Result};

/// The subject CN of the cluster CA.
const CA_NAME: &str = "kvstore cluster CA";
const CA_VALID_DAYS: u64 = 3653;
const LEAF_VALID_DAYS: u64 = 1827;
/// Certificates start to be valid an hour in the past, so that a peer whose
/// clock is a little behind ours does not refuse a fresh certificate.
const BACKDATE: Duration = Duration::from_secs(3600);
/// File stems `init` uses for itself; no node or client may take them.
const RESERVED: [&str; 3] = ["ca", "client", "admin"];

/// Creates a cluster CA in `out` and signs a certificate for each node, for
/// `client` and for `admin`.
///
/// Writes `ca.pem`, `ca.key`, `<node>.pem`/`<node>.key` for every node,
/// `client.pem`/`client.key` and `admin.pem`/`admin.key`; creates `out` if it
/// does not exist. `ca.key` is written last, so a failed run can be retried.
///
/// # Errors
/// [`Error::Exists`] when `out/ca.key` already exists (a cluster CA is never
/// silently replaced); [`Error::InvalidName`] for a duplicate node or a node
/// named `ca`, `client` or `admin`; I/O and generation errors otherwise.
pub fn init(out: &Path, nodes: &[NodeId]) -> Result<()> {
    for (i, node) in nodes.iter().enumerate() {
        if RESERVED.contains(&node.as_str()) {
            return Err(invalid_name(
                node.as_str(),
                "reserved for the CA, client or admin files",
            ));
        }
        if nodes[..i].contains(node) {
            return Err(invalid_name(node.as_str(), "listed twice"));
        }
    }
    let ca_key_path = out.join("ca.key");
    if ca_key_path.exists() {
        return Err(Error::Exists { path: ca_key_path });
    }
    create_dir(out)?;

    let ca = new_ca()?;
    let mut leaves = Vec::with_capacity(nodes.len() + 2);
    for node in nodes {
        leaves.push((node.as_str(), sign_leaf(&ca, Role::Node, node.as_str())?));
    }
    leaves.push(("client", sign_leaf(&ca, Role::Client, "client")?));
    leaves.push(("admin", sign_leaf(&ca, Role::Admin, "admin")?));

    for (name, leaf) in &leaves {
        write_file(
            &out.join(format!("{name}.pem")),
            &leaf.cert_pem,
            Access::Public,
        )?;
        write_file(
            &out.join(format!("{name}.key")),
            &leaf.key_pem,
            Access::Private,
        )?;
    }
    write_file(&out.join("ca.pem"), &ca.pem(), Access::Public)?;
    write_file(&ca_key_path, &ca.key().serialize_pem(), Access::PrivateNew)?;
    tracing::info!(dir = %out.display(), nodes = nodes.len(), "created cluster CA and certificates");
    Ok(())
}

/// Signs a certificate for a new node with the CA in `out` (`ca.pem`,
/// `ca.key`), writing `<node>.pem` and `<node>.key`.
///
/// # Errors
/// [`Error::Exists`] when `<node>.pem` or `<node>.key` exists;
/// [`Error::InvalidName`] for a reserved name; errors naming `ca.pem` or
/// `ca.key` when they are missing, malformed or do not belong together.
pub fn add_node(out: &Path, node: &NodeId) -> Result<()> {
    add_leaf(out, Role::Node, node.as_str())
}

/// Signs an additional client or admin certificate named `name` (its CN and
/// file stem) with the CA in `out`, writing `<name>.pem` and `<name>.key`.
///
/// `name` must be a lowercase DNS label, like a node id.
///
/// # Errors
/// [`Error::InvalidName`] when `role` is [`Role::Node`] (use [`add_node`]),
/// or `name` is not a lowercase DNS label or is `ca`; otherwise as
/// [`add_node`].
pub fn add_client(out: &Path, name: &str, role: Role) -> Result<()> {
    if role == Role::Node {
        return Err(invalid_name(
            name,
            "node certificates are made with add_node",
        ));
    }
    NodeId::new(name).map_err(|e| invalid_name(name, &e.to_string()))?;
    add_leaf(out, role, name)
}

fn add_leaf(out: &Path, role: Role, name: &str) -> Result<()> {
    if name == "ca" {
        return Err(invalid_name(name, "reserved for the CA files"));
    }
    crate::rotate::refuse_during_rotation(out)?;
    let cert_path = out.join(format!("{name}.pem"));
    let key_path = out.join(format!("{name}.key"));
    for path in [&cert_path, &key_path] {
        if path.exists() {
            return Err(Error::Exists { path: path.clone() });
        }
    }
    let ca = load_ca(out)?;
    let leaf = sign_leaf(&ca, role, name)?;
    write_file(&cert_path, &leaf.cert_pem, Access::PublicNew)?;
    write_file(&key_path, &leaf.key_pem, Access::PrivateNew)?;
    tracing::info!(dir = %out.display(), %role, name, "signed certificate");
    Ok(())
}

/// A signed certificate and its key, both PEM.
pub(crate) struct Leaf {
    /// The certificate.
    pub(crate) cert_pem: String,
    /// Its private key.
    pub(crate) key_pem: String,
}

pub(crate) fn new_ca() -> Result<CertifiedIssuer<'static, KeyPair>> {
    let key = new_key("CA key")?;
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    // Every cluster's CA gets a distinct subject, derived from its key, so that
    // a certificate from another cluster fails as "unknown issuer" rather than
    // as a bad signature under a same-named CA.
    let digest = ring::digest::digest(&ring::digest::SHA256, key.der_bytes());
    let cluster_id: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    params.distinguished_name.push(
        DnType::OrganizationalUnitName,
        format!("cluster {cluster_id}"),
    );
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    set_validity(&mut params, CA_VALID_DAYS);
    CertifiedIssuer::self_signed(params, key).map_err(|source| Error::Generate {
        what: "self-signing the CA certificate".into(),
        source,
    })
}

/// Reads `ca.pem` and `ca.key` from `out`, checking that they belong together.
pub(crate) fn load_ca(out: &Path) -> Result<Issuer<'static, KeyPair>> {
    let cert_path = out.join("ca.pem");
    let key_path = out.join("ca.key");
    let bad = |path: &PathBuf, reason: String| Error::BadFile {
        path: path.clone(),
        reason,
    };

    let certs = read_certs(&cert_path)?;
    let [ca_der] = certs.as_slice() else {
        return Err(bad(
            &cert_path,
            format!("expected one certificate, found {}", certs.len()),
        ));
    };
    let key_pem = String::from_utf8(read_bounded(&key_path)?)
        .map_err(|_| bad(&key_path, "not a PEM file (not UTF-8)".into()))?;
    let key = KeyPair::from_pem(&key_pem)
        .map_err(|e| bad(&key_path, format!("not a usable PEM private key: {e}")))?;

    let (_, parsed) = X509Certificate::from_der(ca_der)
        .map_err(|e| bad(&cert_path, format!("not an X.509 certificate: {e}")))?;
    if !parsed.is_ca() {
        return Err(bad(&cert_path, "not a CA certificate".into()));
    }
    if parsed.public_key().raw != key.subject_public_key_info().as_slice() {
        return Err(Error::KeyMismatch {
            cert: cert_path,
            key: key_path,
        });
    }
    Issuer::from_ca_cert_der(ca_der, key).map_err(|e| {
        bad(
            &cert_path,
            format!("cannot sign with this CA certificate: {e}"),
        )
    })
}

pub(crate) fn sign_leaf(ca: &Issuer<'_, KeyPair>, role: Role, name: &str) -> Result<Leaf> {
    let generate = |source| Error::Generate {
        what: format!("{role} certificate {name:?}"),
        source,
    };
    let key = new_key("leaf key")?;
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.subject_alt_names = vec![SanType::URI(
        Ia5String::try_from(role.uri()).map_err(generate)?,
    )];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    if role == Role::Node {
        params.subject_alt_names.push(SanType::DnsName(
            Ia5String::try_from(name).map_err(generate)?,
        ));
        params
            .extended_key_usages
            .push(ExtendedKeyUsagePurpose::ServerAuth);
    }
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, LEAF_VALID_DAYS);
    let cert = params.signed_by(&key, ca).map_err(generate)?;
    Ok(Leaf {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn new_key(what: &str) -> Result<KeyPair> {
    KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|source| Error::Generate {
        what: what.into(),
        source,
    })
}

/// Sets the validity to `[now - BACKDATE, now + days]`.
fn set_validity(params: &mut CertificateParams, days: u64) {
    // rcgen takes `time::OffsetDateTime`; starting from its epoch helper and
    // adding a std Duration spares us a direct dependency on `time`.
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    params.not_before = epoch + now.saturating_sub(BACKDATE);
    params.not_after = epoch + now + Duration::from_secs(days * 86_400);
}

fn invalid_name(name: &str, reason: &str) -> Error {
    Error::InvalidName {
        name: name.chars().take(80).collect(),
        reason: reason.into(),
    }
}

pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })
}

/// How a file is written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Mode 0644, replacing an existing file.
    Public,
    /// Mode 0644, refusing to replace an existing file.
    PublicNew,
    /// Mode 0600, replacing an existing file.
    Private,
    /// Mode 0600, refusing to replace an existing file.
    PrivateNew,
}

pub(crate) fn write_file(path: &Path, contents: &str, access: Access) -> Result<()> {
    let io = |source: std::io::Error| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            Error::Exists {
                path: path.to_path_buf(),
            }
        } else {
            Error::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    };
    let private = matches!(access, Access::Private | Access::PrivateNew);
    let mode = if private { 0o600 } else { 0o644 };
    let mut options = OpenOptions::new();
    options.write(true).mode(mode);
    if matches!(access, Access::PublicNew | Access::PrivateNew) {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    let mut file = options.open(path).map_err(io)?;
    // `mode` applies only to new files; an existing key file keeps its old
    // permissions unless we set them.
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io)?;
    file.write_all(contents.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

#[cfg(test)]
mod tests {
    use x509_parser::extensions::GeneralName;

    use super::*;

    fn ids(names: &[&str]) -> Vec<NodeId> {
        names.iter().map(|n| NodeId::new(*n).unwrap()).collect()
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn init_writes_every_file_with_the_right_mode() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("certs");
        init(&out, &ids(&["node1", "node2"])).unwrap();
        assert_eq!(mode(&out), 0o700);
        for name in ["ca", "node1", "node2", "client", "admin"] {
            assert_eq!(mode(&out.join(format!("{name}.key"))), 0o600, "{name}.key");
            assert_eq!(mode(&out.join(format!("{name}.pem"))), 0o644, "{name}.pem");
        }
        add_node(&out, &NodeId::new("node3").unwrap()).unwrap();
        assert_eq!(mode(&out.join("node3.key")), 0o600);
    }

    #[test]
    fn init_refuses_to_replace_a_ca() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &ids(&["node1"])).unwrap();
        let before = fs::read(dir.path().join("ca.pem")).unwrap();
        let err = init(dir.path(), &ids(&["node1"])).unwrap_err();
        assert!(matches!(err, Error::Exists { .. }), "{err}");
        assert!(err.to_string().contains("ca.key"), "{err}");
        assert_eq!(fs::read(dir.path().join("ca.pem")).unwrap(), before);
    }

    #[test]
    fn init_refuses_clashing_names() {
        let dir = tempfile::tempdir().unwrap();
        for nodes in [&["ca"][..], &["client"], &["node1", "node1"]] {
            let err = init(dir.path(), &ids(nodes)).unwrap_err();
            assert!(matches!(err, Error::InvalidName { .. }), "{err}");
        }
        assert!(!dir.path().join("ca.key").exists());
    }

    #[test]
    fn certificates_have_the_documented_shape() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &ids(&["node1"])).unwrap();
        let read = |name: &str| read_certs(&dir.path().join(format!("{name}.pem"))).unwrap();
        let days = |cert: &X509Certificate<'_>| {
            let v = cert.validity();
            (v.not_after.timestamp() - v.not_before.timestamp()) / 86_400
        };

        let ca = read("ca");
        let (_, ca) = X509Certificate::from_der(&ca[0]).unwrap();
        assert!(ca.is_ca());
        assert_eq!(ca.subject(), ca.issuer());
        assert!(ca.subject().to_string().contains("CN=kvstore cluster CA"));
        let usage = ca.key_usage().unwrap().unwrap().value;
        assert!(usage.key_cert_sign() && usage.crl_sign() && !usage.digital_signature());
        assert_eq!(days(&ca), 3653);

        let node = read("node1");
        let (_, node) = X509Certificate::from_der(&node[0]).unwrap();
        assert_eq!(node.issuer(), ca.subject());
        assert!(!node.is_ca());
        assert_eq!(days(&node), 1827);
        let eku = node.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && eku.client_auth);
        let sans = &node
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names;
        assert!(sans.contains(&GeneralName::URI("urn:kvstore:role:node")));
        assert!(sans.contains(&GeneralName::DNSName("node1")));

        let client = read("client");
        let (_, client) = X509Certificate::from_der(&client[0]).unwrap();
        let eku = client.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        assert!(client.subject().to_string().contains("CN=client"));
    }

    #[test]
    fn add_refuses_a_mismatched_ca_key() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        init(a.path(), &[]).unwrap();
        init(b.path(), &[]).unwrap();
        fs::copy(b.path().join("ca.key"), a.path().join("ca.key")).unwrap();
        let err = add_node(a.path(), &NodeId::new("node1").unwrap()).unwrap_err();
        assert!(matches!(err, Error::KeyMismatch { .. }), "{err}");
        assert!(!a.path().join("node1.pem").exists());
    }
}
