//! Loading a certificate, its key and the cluster CA bundle from PEM files.
//!
//! Loading checks everything that can be checked without a peer: the files
//! exist, are small, are PEM, the CA file holds only CA certificates (one,
//! or a few while the cluster CA is rotated: [`load_ca_bundle`]), the
//! certificate chains to one of them and is valid now, the key belongs to
//! the certificate, and the certificate carries an identity. A
//! misconfigured node thus fails at startup, naming the file.

use std::fmt;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring::hkdf;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::{self, PemObject, SectionKind};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::role::{PeerIdentity, peer_identity};
use crate::verify::{check_trusted, provider};
use crate::{Error, Result};

/// The largest PEM file we read; ours are around 1 KiB (a CA bundle of
/// [`MAX_CA_CERTS`] certificates about 6 KiB).
pub const MAX_PEM_BYTES: u64 = 64 * 1024;

/// The most CA certificates a CA bundle may hold. Two are needed (the old
/// and the new CA while the cluster CA is rotated); the bound keeps a
/// mistaken file (a whole system trust store) from being taken as ours.
pub const MAX_CA_CERTS: usize = 8;

/// Where a node's or client's TLS files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The cluster CA bundle (PEM): one CA certificate, or up to
    /// [`MAX_CA_CERTS`] while the cluster CA is rotated; the only trust
    /// anchors.
    pub ca: PathBuf,
    /// Our certificate (PEM); intermediates, if any, follow it.
    pub cert: PathBuf,
    /// Our private key (PEM, PKCS#8, SEC1 or PKCS#1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// The layout `kvctl certs init` writes: `<dir>/ca.pem`, `<dir>/<name>.pem`
    /// and `<dir>/<name>.key`.
    pub fn in_dir(dir: impl AsRef<Path>, name: &str) -> Self {
        let dir = dir.as_ref();
        TlsFiles {
            ca: dir.join("ca.pem"),
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        }
    }
}

/// A checked certificate, its key and the cluster CA bundle, ready for
/// [`crate::server_config`] and [`crate::client_config`].
pub struct Credentials {
    /// Where they were loaded from, for messages.
    files: TlsFiles,
    /// The CA certificates trusted, in the bundle's order (at least one).
    cas: Vec<CertificateDer<'static>>,
    /// Which of `cas` signed our certificate.
    issuer: usize,
    /// Our certificate first, then any intermediates.
    chain: Vec<CertificateDer<'static>>,
    /// Our private key.
    key: PrivateKeyDer<'static>,
    /// The role and name our certificate carries.
    identity: PeerIdentity,
    /// When our certificate stops being valid.
    not_after: SystemTime,
}

impl Credentials {
    /// When our own certificate stops being valid (its `notAfter`).
    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }

    /// The role and name our own certificate carries.
    pub fn identity(&self) -> &PeerIdentity {
        &self.identity
    }

    /// The files these credentials were loaded from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// The CA certificate of the bundle that signed our certificate.
    pub fn ca(&self) -> &CertificateDer<'static> {
        // `issuer` indexes `cas`, which is never empty, by construction.
        &self.cas[self.issuer]
    }

    /// Every CA certificate trusted (the bundle, in file order; at least
    /// one): peers' certificates must chain to one of them.
    pub fn cas(&self) -> &[CertificateDer<'static>] {
        &self.cas
    }

    /// Our certificate followed by any intermediates.
    pub fn cert_chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// Our private key.
    pub fn key(&self) -> &PrivateKeyDer<'static> {
        &self.key
    }

    /// A 32-byte secret derived from our private key with HKDF-SHA256, stable
    /// for as long as the key is, and different for every `label`.
    ///
    /// Used for secrets that must survive restarts without being stored, such
    /// as the QUIC stateless-reset key (design.md, "Pitfalls designed out"), so that peers learn at
    /// once that a connection to our previous run is gone.
    pub fn derive_secret(&self, label: &str) -> [u8; 32] {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"kvstore derived secret v1")
            .extract(self.key.secret_der());
        let mut out = [0u8; 32];
        prk.expand(&[label.as_bytes()], hkdf::HKDF_SHA256)
            .and_then(|okm| okm.fill(&mut out))
            .expect("32 bytes is the HKDF-SHA256 output length, always valid");
        out
    }
}

impl Clone for Credentials {
    fn clone(&self) -> Self {
        Credentials {
            files: self.files.clone(),
            cas: self.cas.clone(),
            issuer: self.issuer,
            chain: self.chain.clone(),
            key: self.key.clone_key(),
            identity: self.identity.clone(),
            not_after: self.not_after,
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key is deliberately left out.
        f.debug_struct("Credentials")
            .field("files", &self.files)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// Loads and checks a certificate, its key and the cluster CA bundle.
///
/// # Errors
/// Every error names the file at fault: [`Error::Missing`],
/// [`Error::TooLarge`] (over [`MAX_PEM_BYTES`]), [`Error::BadFile`] (not PEM,
/// no certificate or key in it, a CA file that is not a bundle of CA
/// certificates as [`load_ca_bundle`] requires, no identity),
/// [`Error::NotTrusted`] (signed by none of the bundle's CAs, expired, wrong
/// key usage), [`Error::KeyMismatch`].
///
/// A key that does not match its certificate is read again, twice at
/// most, 50 ms apart, before that is an error: a CA
/// rotation's switch step ([`crate::rotate`]) replaces a certificate and
/// its key one rename after the other, and a process that reads between
/// the two must not fail for it.
pub fn load(files: &TlsFiles) -> Result<Credentials> {
    let mut retries = 0;
    loop {
        match load_once(files) {
            Err(Error::KeyMismatch { .. }) if retries < 2 => {
                retries += 1;
                std::thread::sleep(PAIR_RETRY_PAUSE);
            }
            other => return other,
        }
    }
}

/// How long [`load`] waits before reading a mismatched certificate and key
/// again.
const PAIR_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

fn load_once(files: &TlsFiles) -> Result<Credentials> {
    let cas = load_ca_bundle(&files.ca)?;
    let chain = read_certs(&files.cert)?;
    let key = read_key(&files.key)?;

    check_trusted(&cas, &chain).map_err(|e| Error::NotTrusted {
        cert: files.cert.clone(),
        ca: files.ca.clone(),
        reason: e.to_string(),
    })?;
    // The chain verified under the bundle, so one of its CAs verifies it
    // alone: that is the issuer.
    let issuer = cas
        .iter()
        .position(|ca| check_trusted(std::slice::from_ref(ca), &chain).is_ok())
        .unwrap_or(0);
    match CertifiedKey::from_der(chain.clone(), key.clone_key(), &provider()) {
        Ok(_) => {}
        Err(rustls::Error::InconsistentKeys(_)) => {
            return Err(Error::KeyMismatch {
                cert: files.cert.clone(),
                key: files.key.clone(),
            });
        }
        Err(e) => {
            return Err(Error::BadFile {
                path: files.key.clone(),
                reason: format!("unusable private key: {e}"),
            });
        }
    }
    let identity = chain
        .first()
        .ok_or_else(|| no_item(&files.cert, "CERTIFICATE"))
        .and_then(|leaf| {
            peer_identity(leaf).map_err(|e| Error::BadFile {
                path: files.cert.clone(),
                reason: e.to_string(),
            })
        })?;
    let not_after = chain
        .first()
        .ok_or_else(|| no_item(&files.cert, "CERTIFICATE"))
        .and_then(|leaf| not_after_of(&files.cert, leaf))?;
    tracing::debug!(cert = %files.cert.display(), %identity, "loaded TLS credentials");
    Ok(Credentials {
        files: files.clone(),
        cas,
        issuer,
        chain,
        key,
        identity,
        not_after,
    })
}

/// Reads and checks a cluster CA bundle: a PEM file of at most
/// [`MAX_PEM_BYTES`] holding one CA certificate, or up to [`MAX_CA_CERTS`]
/// (the old and the new CA while the cluster CA is rotated), in file order.
///
/// Every certificate must be an X.509 CA certificate (basicConstraints
/// CA), none may appear twice, and the file may hold nothing but
/// certificates (a private key in it would be handed to everyone the
/// bundle is given to).
///
/// # Errors
/// [`Error::Missing`], [`Error::TooLarge`], or [`Error::BadFile`] naming the
/// file and, for a certificate at fault, its place in the file (`certificate
/// 2 of 3`).
pub fn load_ca_bundle(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let bad = |reason: String| Error::BadFile {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = read_bounded(path)?;
    let mut cas = Vec::new();
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(&bytes) {
        let (kind, der) = section.map_err(|e| pem_error(path, "CERTIFICATE", e))?;
        let what = match kind {
            SectionKind::Certificate => None,
            SectionKind::PrivateKey | SectionKind::RsaPrivateKey | SectionKind::EcPrivateKey => {
                Some("a private key".to_string())
            }
            other => Some(format!("a {other:?} block")),
        };
        if let Some(what) = what {
            return Err(bad(format!(
                "holds {what}; a CA bundle holds CA certificates only"
            )));
        }
        if cas.len() == MAX_CA_CERTS {
            return Err(bad(format!(
                "holds more than {MAX_CA_CERTS} certificates; a CA bundle holds the cluster's \
                 CA (and, while it is rotated, the next one)"
            )));
        }
        cas.push(CertificateDer::from(der));
    }
    if cas.is_empty() {
        return Err(no_item(path, "CERTIFICATE"));
    }
    let total = cas.len();
    for (i, ca) in cas.iter().enumerate() {
        let which = format!("certificate {} of {total}", i + 1);
        let (_, cert) = X509Certificate::from_der(ca)
            .map_err(|e| bad(format!("{which} is not an X.509 certificate: {e}")))?;
        if !cert.is_ca() {
            return Err(bad(format!(
                "{which} ({}) is not a CA certificate; the CA file holds the cluster CA, \
                 not a node's or client's certificate",
                cert.subject()
            )));
        }
        if let Some(first) = cas[..i].iter().position(|earlier| earlier == ca) {
            return Err(bad(format!(
                "{which} repeats certificate {}; each CA belongs in the bundle once",
                first + 1
            )));
        }
    }
    Ok(cas)
}

/// The SHA-256 fingerprint of a certificate (DER), 64 lowercase hex digits:
/// what `openssl x509 -noout -fingerprint -sha256` prints, without the
/// colons. `kvctl status` and `kvctl certs rotate` name CAs by it.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    ring::digest::digest(&ring::digest::SHA256, cert)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The end of `leaf`'s validity (read from `path`, for messages).
fn not_after_of(path: &Path, leaf: &CertificateDer<'_>) -> Result<SystemTime> {
    let (_, cert) = X509Certificate::from_der(leaf).map_err(|e| Error::BadFile {
        path: path.to_path_buf(),
        reason: format!("not an X.509 certificate: {e}"),
    })?;
    let secs = u64::try_from(cert.validity().not_after.timestamp()).unwrap_or(0);
    Ok(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Reads a whole file of at most [`MAX_PEM_BYTES`].
pub(crate) fn read_bounded(path: &Path) -> Result<Vec<u8>> {
    let io = |source: std::io::Error| {
        if source.kind() == ErrorKind::NotFound {
            Error::Missing {
                path: path.to_path_buf(),
            }
        } else {
            Error::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    };
    let mut bytes = Vec::new();
    File::open(path)
        .map_err(io)?
        .take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_PEM_BYTES,
        });
    }
    Ok(bytes)
}

/// Reads every certificate of a PEM file; at least one must be there.
pub(crate) fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let bytes = read_bounded(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, "CERTIFICATE", e))?;
    if certs.is_empty() {
        return Err(no_item(path, "CERTIFICATE"));
    }
    Ok(certs)
}

/// Reads the first private key of a PEM file.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    let bytes = read_bounded(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| pem_error(path, "PRIVATE KEY", e))
}

fn pem_error(path: &Path, what: &str, error: pem::Error) -> Error {
    match error {
        pem::Error::NoItemsFound => no_item(path, what),
        other => Error::BadFile {
            path: path.to_path_buf(),
            reason: format!("malformed PEM: {other}"),
        },
    }
}

fn no_item(path: &Path, what: &str) -> Error {
    Error::BadFile {
        path: path.to_path_buf(),
        reason: format!(
            "no {what} block found; is this a PEM {} file?",
            what.to_lowercase()
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use kv_types::NodeId;

    use super::*;

    fn cluster() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let nodes = [NodeId::new("node1").unwrap(), NodeId::new("node2").unwrap()];
        crate::init(dir.path(), &nodes).unwrap();
        dir
    }

    /// Loads node1's files with one of them replaced by `contents`.
    fn load_with(dir: &Path, which: &str, contents: &[u8]) -> Error {
        let path = dir.join(format!("bad-{which}"));
        fs::write(&path, contents).unwrap();
        let mut files = TlsFiles::in_dir(dir, "node1");
        match which {
            "ca" => files.ca = path,
            "cert" => files.cert = path,
            _ => files.key = path,
        }
        load(&files).unwrap_err()
    }

    #[test]
    fn loads_what_init_wrote() {
        let dir = cluster();
        let creds = load(&TlsFiles::in_dir(dir.path(), "node1")).unwrap();
        assert_eq!(creds.identity().name, "node1");
        assert_eq!(creds.cert_chain().len(), 1);
        assert_eq!(creds.clone().files(), creds.files());
        // Leaves are valid for 5 years (1827 days) from now.
        let left = creds
            .not_after()
            .duration_since(SystemTime::now())
            .unwrap()
            .as_secs();
        assert!((1826 * 86_400..=1827 * 86_400).contains(&left), "{left}");
    }

    #[test]
    fn missing_files_are_named() {
        let dir = cluster();
        let err = load(&TlsFiles::in_dir(dir.path(), "node9")).unwrap_err();
        assert!(matches!(err, Error::Missing { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("node9.pem") && text.contains("not found"),
            "{text}"
        );
    }

    #[test]
    fn files_that_are_not_pem_are_named() {
        let dir = cluster();
        for which in ["ca", "cert", "key"] {
            let err = load_with(dir.path(), which, b"hello, world\n");
            let text = err.to_string();
            assert!(matches!(err, Error::BadFile { .. }), "{text}");
            assert!(text.contains(&format!("bad-{which}")), "{text}");
            assert!(text.contains("block found"), "{text}");
        }
        let broken = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let err = load_with(dir.path(), "cert", broken);
        assert!(err.to_string().contains("malformed PEM"), "{err}");
        // A key file holding a certificate has no key in it.
        let cert = fs::read(dir.path().join("node1.pem")).unwrap();
        let err = load_with(dir.path(), "key", &cert);
        assert!(err.to_string().contains("no PRIVATE KEY block"), "{err}");
    }

    #[test]
    fn oversized_files_are_refused() {
        let dir = cluster();
        let err = load_with(dir.path(), "cert", &vec![b'A'; MAX_PEM_BYTES as usize + 1]);
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
        assert!(err.to_string().contains("bad-cert"), "{err}");
    }

    #[test]
    fn a_key_must_match_its_certificate() {
        let dir = cluster();
        let other_key = fs::read(dir.path().join("node2.key")).unwrap();
        let err = load_with(dir.path(), "key", &other_key);
        assert!(matches!(err, Error::KeyMismatch { .. }), "{err}");
        assert!(err.to_string().contains("does not match"), "{err}");
    }

    #[test]
    fn a_ca_bundle_trusts_every_ca_in_it() {
        let old = cluster();
        let new = cluster();
        let read = |dir: &tempfile::TempDir, name: &str| fs::read(dir.path().join(name)).unwrap();
        let mut bundle = read(&old, "ca.pem");
        bundle.extend(read(&new, "ca.pem"));
        // node1 of the old CA and of the new one both load under the bundle.
        for dir in [&old, &new] {
            fs::write(dir.path().join("bundle.pem"), &bundle).unwrap();
            let mut files = TlsFiles::in_dir(dir.path(), "node1");
            files.ca = dir.path().join("bundle.pem");
            let creds = load(&files).unwrap();
            assert_eq!(creds.cas().len(), 2);
            // The issuer is the CA of its own directory.
            let own = read_certs(&dir.path().join("ca.pem")).unwrap();
            assert_eq!(creds.ca(), &own[0]);
            assert_eq!(fingerprint(creds.ca()).len(), 64);
        }
        // Without the bundle, each CA refuses the other's certificate.
        let mut files = TlsFiles::in_dir(old.path(), "node1");
        files.cert = new.path().join("node1.pem");
        files.key = new.path().join("node1.key");
        let err = load(&files).unwrap_err();
        assert!(matches!(err, Error::NotTrusted { .. }), "{err}");
    }

    #[test]
    fn a_ca_bundle_is_bounded_and_checked() {
        let dir = cluster();
        let ca = fs::read(dir.path().join("ca.pem")).unwrap();
        // The same CA twice: a mistake (the new CA is missing), named.
        let mut two = ca.clone();
        two.extend(&ca);
        let err = load_with(dir.path(), "ca", &two);
        assert!(matches!(err, Error::BadFile { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("certificate 2 of 2 repeats certificate 1"),
            "{err}"
        );
        // More than MAX_CA_CERTS distinct CAs.
        let mut many = Vec::new();
        for _ in 0..=MAX_CA_CERTS {
            let other = cluster();
            many.extend(fs::read(other.path().join("ca.pem")).unwrap());
        }
        let err = load_with(dir.path(), "ca", &many);
        assert!(
            err.to_string()
                .contains(&format!("more than {MAX_CA_CERTS} certificates")),
            "{err}"
        );
        // Exactly MAX_CA_CERTS is fine (ours among them).
        let mut most = ca.clone();
        for _ in 1..MAX_CA_CERTS {
            let other = cluster();
            most.extend(fs::read(other.path().join("ca.pem")).unwrap());
        }
        let path = dir.path().join("most.pem");
        fs::write(&path, &most).unwrap();
        assert_eq!(load_ca_bundle(&path).unwrap().len(), MAX_CA_CERTS);
        // A leaf in place of a CA, first or after ours.
        let leaf = fs::read(dir.path().join("node2.pem")).unwrap();
        let err = load_with(dir.path(), "ca", &leaf);
        assert!(
            err.to_string()
                .contains("certificate 1 of 1 (CN=node2) is not a CA certificate"),
            "{err}"
        );
        let mut with_leaf = ca.clone();
        with_leaf.extend(&leaf);
        let err = load_with(dir.path(), "ca", &with_leaf);
        assert!(err.to_string().contains("certificate 2 of 2"), "{err}");
        // A private key pasted into the bundle.
        let mut with_key = ca.clone();
        with_key.extend(fs::read(dir.path().join("ca.key")).unwrap());
        let err = load_with(dir.path(), "ca", &with_key);
        assert!(err.to_string().contains("CA certificates only"), "{err}");
        // Text around the certificates is allowed (comments, blank lines).
        let mut commented = b"# the cluster CA\n".to_vec();
        commented.extend(&ca);
        commented.extend(b"\n\n");
        let path = dir.path().join("commented.pem");
        fs::write(&path, &commented).unwrap();
        assert_eq!(load_ca_bundle(&path).unwrap().len(), 1);
        // Oversized and empty bundles.
        let err = load_with(dir.path(), "ca", &vec![b'#'; MAX_PEM_BYTES as usize + 1]);
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
        let err = load_with(dir.path(), "ca", b"");
        assert!(err.to_string().contains("no CERTIFICATE block"), "{err}");
    }
}
