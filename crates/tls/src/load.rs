//! Loading a certificate, its key and the cluster CA from PEM files.
//!
//! Loading checks everything that can be checked without a peer: the files
//! exist, are small, are PEM, the certificate chains to the CA and is valid
//! now, the key belongs to the certificate, and the certificate carries an
//! identity. A misconfigured node thus fails at startup, naming the file.

use std::fmt;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring::hkdf;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::role::{PeerIdentity, peer_identity};
use crate::verify::{check_trusted, provider};
use crate::{Error, Result};

/// The largest PEM file we read; ours are around 1 KiB.
pub const MAX_PEM_BYTES: u64 = 64 * 1024;

/// Where a node's or client's TLS files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The cluster CA certificate (PEM), the only trust anchor.
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

/// A checked certificate, its key and the cluster CA, ready for
/// [`crate::server_config`] and [`crate::client_config`].
pub struct Credentials {
    /// Where they were loaded from, for messages.
    files: TlsFiles,
    /// The cluster CA certificate.
    ca: CertificateDer<'static>,
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

    /// The cluster CA certificate.
    pub fn ca(&self) -> &CertificateDer<'static> {
        &self.ca
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
            ca: self.ca.clone(),
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

/// Loads and checks a certificate, its key and the cluster CA.
///
/// # Errors
/// Every error names the file at fault: [`Error::Missing`],
/// [`Error::TooLarge`] (over [`MAX_PEM_BYTES`]), [`Error::BadFile`] (not PEM,
/// no certificate or key in it, more than one CA certificate, no identity),
/// [`Error::NotTrusted`] (not signed by this CA, expired, wrong key usage),
/// [`Error::KeyMismatch`].
pub fn load(files: &TlsFiles) -> Result<Credentials> {
    let cas = read_certs(&files.ca)?;
    let [ca] = <[_; 1]>::try_from(cas).map_err(|cas| Error::BadFile {
        path: files.ca.clone(),
        reason: format!("expected one CA certificate, found {}", cas.len()),
    })?;
    let chain = read_certs(&files.cert)?;
    let key = read_key(&files.key)?;

    check_trusted(&ca, &chain).map_err(|e| Error::NotTrusted {
        cert: files.cert.clone(),
        ca: files.ca.clone(),
        reason: e.to_string(),
    })?;
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
        ca,
        chain,
        key,
        identity,
        not_after,
    })
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
    fn the_ca_file_holds_one_ca() {
        let dir = cluster();
        let mut two = fs::read(dir.path().join("ca.pem")).unwrap();
        two.extend(fs::read(dir.path().join("ca.pem")).unwrap());
        let err = load_with(dir.path(), "ca", &two);
        assert!(
            err.to_string()
                .contains("expected one CA certificate, found 2"),
            "{err}"
        );
        // A leaf in place of the CA: the node certificate does not chain to it.
        let leaf = fs::read(dir.path().join("node2.pem")).unwrap();
        let err = load_with(dir.path(), "ca", &leaf);
        assert!(matches!(err, Error::NotTrusted { .. }), "{err}");
    }
}
