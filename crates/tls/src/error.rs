//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while making, loading or checking certificates.
///
/// File-related variants name the file, so that a misconfigured node fails at
/// startup with a message that says which file to fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file that should exist does not.
    #[error("{}: file not found", path.display())]
    Missing {
        /// The missing file.
        path: PathBuf,
    },
    /// Reading, writing or creating a file or directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file is larger than the bound for its kind.
    #[error("{}: file is larger than {limit} bytes; not a certificate or key file", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound in bytes.
        limit: u64,
    },
    /// A file is not PEM, holds no item of the expected kind, or its content
    /// cannot be used (an unparsable key, a certificate without an identity).
    #[error("{}: {reason}", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A certificate does not chain to the cluster CA, or is not valid now.
    #[error("{}: certificate is not valid under the cluster CA {}: {reason}", cert.display(), ca.display())]
    NotTrusted {
        /// The certificate file.
        cert: PathBuf,
        /// The CA file it was checked against.
        ca: PathBuf,
        /// Why verification failed.
        reason: String,
    },
    /// A private key does not belong to its certificate.
    #[error("{}: private key does not match certificate {}", key.display(), cert.display())]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// Generation would overwrite an existing file.
    #[error("{}: already exists; refusing to overwrite it", path.display())]
    Exists {
        /// The existing file.
        path: PathBuf,
    },
    /// A CA rotation step cannot run in the state the certificate directory
    /// is in (`kvctl certs rotate`): another step is due first, or files
    /// that step needs are missing.
    #[error("{}: {reason}", dir.display())]
    Rotation {
        /// The certificate directory.
        dir: PathBuf,
        /// What is wrong, and which step to run instead.
        reason: String,
    },
    /// A certificate or client name cannot be used.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name (truncated to 80 characters).
        name: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A certificate does not carry a usable identity (role and name).
    #[error("bad certificate identity: {reason}")]
    Identity {
        /// What is missing or malformed.
        reason: String,
    },
    /// rcgen failed to generate or sign a key or certificate.
    #[error("certificate generation failed ({what}): {source}")]
    Generate {
        /// What was being generated.
        what: String,
        /// The underlying error.
        source: rcgen::Error,
    },
    /// rustls refused a configuration (bad key, bad protocol versions, ...).
    #[error("rustls configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// rustls could not build a certificate verifier from the CA.
    #[error("certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
