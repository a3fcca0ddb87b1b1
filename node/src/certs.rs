//! The node's own certificate: loaded at startup, reloaded on SIGHUP, and
//! what `kvctl status` and gossip say about it.
//!
//! A reload reads `ca.pem`, `<id>.pem` and `<id>.key` again, checks them as
//! startup does (a node certificate for this node's id, chaining to the CA
//! bundle, valid now, the key its own), and hands them to the QUIC
//! endpoint: connections made from then on use them, open ones keep
//! theirs. A file that does not pass is logged and the node goes on with
//! what it had; nothing a reload reads can stop the node. The certificate's
//! `notAfter`, its CA and the CAs trusted are published in gossip
//! ([`keys::CERT_NOT_AFTER`], [`keys::CERT_CA`], [`keys::TRUSTED_CAS`]) so
//! that any node's status shows every node's.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use kv_gossip::{Publisher, keys};
use kv_tls::{Credentials, Role, TlsFiles};
use kv_transport::Endpoint;
use tracing::{info, warn};

use crate::config::NodeConfig;

/// A node whose certificate expires within this long says so at startup
/// and at every reload.
const CERT_EXPIRY_WARNING: Duration = Duration::from_secs(30 * 86_400);

/// What the node's certificate is, as status shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertSummary {
    /// `notAfter`, seconds since the Unix epoch.
    pub not_after: u64,
    /// SHA-256 fingerprint of the CA that signed it.
    pub ca: String,
    /// SHA-256 fingerprints of the CAs trusted, in bundle order.
    pub trusted: Vec<String>,
}

impl CertSummary {
    fn of(creds: &Credentials) -> Self {
        CertSummary {
            not_after: creds
                .not_after()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            ca: kv_tls::fingerprint(creds.ca()),
            trusted: creds.cas().iter().map(|c| kv_tls::fingerprint(c)).collect(),
        }
    }

    /// A peer's summary from the gossip keys it published, each checked:
    /// a value that is not what a node publishes counts as unknown (0,
    /// empty).
    pub fn from_gossip(not_after: &str, ca: &str, trusted: &str) -> Self {
        CertSummary {
            not_after: not_after.parse().unwrap_or(0),
            ca: if is_fingerprint(ca) {
                ca.to_string()
            } else {
                String::new()
            },
            trusted: trusted
                .split(',')
                .filter(|f| is_fingerprint(f))
                .take(kv_tls::MAX_CA_CERTS)
                .map(str::to_string)
                .collect(),
        }
    }
}

/// Whether `text` is a SHA-256 fingerprint as [`kv_tls::fingerprint`]
/// writes it: 64 lowercase hex digits.
fn is_fingerprint(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The node's certificate files and what was loaded from them last.
pub struct NodeCerts {
    files: TlsFiles,
    id: String,
    current: Mutex<CertSummary>,
}

impl NodeCerts {
    /// Loads the node's certificate, key and CA bundle from its
    /// certificate directory and checks that it is a node certificate for
    /// its id; warns when it expires within 30 days.
    ///
    /// # Errors
    /// The file at fault and why, or a certificate of another role or id.
    pub fn load(config: &NodeConfig) -> anyhow::Result<(Self, Credentials)> {
        let files = TlsFiles::in_dir(&config.certs.dir, config.id.as_str());
        let id = config.id.to_string();
        let creds = check(&files, &id)?;
        let certs = NodeCerts {
            files,
            id,
            current: Mutex::new(CertSummary::of(&creds)),
        };
        Ok((certs, creds))
    }

    /// What the certificate loaded last is.
    pub fn summary(&self) -> CertSummary {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Publishes [`NodeCerts::summary`] in gossip and as metrics.
    pub async fn publish(&self, publisher: &Publisher) {
        let summary = self.summary();
        publisher
            .publish(keys::CERT_NOT_AFTER, &summary.not_after.to_string())
            .await;
        publisher.publish(keys::CERT_CA, &summary.ca).await;
        publisher
            .publish(keys::TRUSTED_CAS, &summary.trusted.join(","))
            .await;
        metrics::gauge!("kv_tls_cert_not_after_seconds").set(summary.not_after as f64);
        metrics::gauge!("kv_tls_trusted_cas").set(summary.trusted.len() as f64);
    }

    /// Loads the files again and, when they pass the startup checks, gives
    /// them to `endpoint` and publishes the new summary; otherwise logs why
    /// and changes nothing. Returns whether the reload took effect.
    pub async fn reload(&self, endpoint: &Endpoint, publisher: &Publisher) -> bool {
        // File reads (and, for a pair caught mid-switch, a short wait) off
        // the runtime's threads.
        let (files, id) = (self.files.clone(), self.id.clone());
        let loaded = tokio::task::spawn_blocking(move || check(&files, &id))
            .await
            .context("the certificate loader panicked")
            .and_then(|loaded| loaded)
            .and_then(|creds| {
                endpoint
                    .reload(&creds)
                    .context("the QUIC endpoint refused them")?;
                Ok(creds)
            });
        match loaded {
            Ok(creds) => {
                let summary = CertSummary::of(&creds);
                *self.current.lock().unwrap_or_else(PoisonError::into_inner) = summary.clone();
                self.publish(publisher).await;
                metrics::counter!("kv_tls_reloads_total", "outcome" => "ok").increment(1);
                info!(
                    cert = %self.files.cert.display(),
                    not_after = summary.not_after,
                    ca = %short(&summary.ca),
                    trusted = %summary.trusted.iter().map(|f| short(f)).collect::<Vec<_>>().join(","),
                    "reloaded the TLS certificate, key and CA bundle: new connections use them"
                );
                true
            }
            Err(e) => {
                metrics::counter!("kv_tls_reloads_total", "outcome" => "failed").increment(1);
                warn!(
                    error = format!("{e:#}"),
                    "certificate reload failed: keeping the certificate, key and CA bundle loaded before"
                );
                false
            }
        }
    }
}

/// The first 8 hex digits of a fingerprint, as `kvctl status` shows it.
fn short(fingerprint: &str) -> &str {
    fingerprint.get(..8).unwrap_or(fingerprint)
}

/// Loads `files` and checks they are a node certificate for `id`; warns
/// when it expires within [`CERT_EXPIRY_WARNING`].
fn check(files: &TlsFiles, id: &str) -> anyhow::Result<Credentials> {
    let creds = kv_tls::load(files).context("cannot load the node's certificates")?;
    let identity = creds.identity();
    ensure!(
        identity.role == Role::Node && identity.name == id,
        "{} is a {} certificate for {:?}, not a node certificate for {}",
        files.cert.display(),
        identity.role.as_str(),
        identity.name,
        id
    );
    if let Ok(left) = creds.not_after().duration_since(SystemTime::now())
        && left < CERT_EXPIRY_WARNING
    {
        warn!(
            cert = %files.cert.display(),
            days_left = left.as_secs() / 86_400,
            "this node's certificate expires within 30 days: sign a new one with the cluster CA"
        );
    }
    Ok(creds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gossiped_summaries_are_checked() {
        let fp = "ab".repeat(32);
        let other = "0f".repeat(32);
        let s = CertSummary::from_gossip("1893456000", &fp, &format!("{fp},{other}"));
        assert_eq!(s.not_after, 1_893_456_000);
        assert_eq!(s.ca, fp);
        assert_eq!(s.trusted, [fp.clone(), other]);
        // Anything else counts as unknown, value by value.
        let s = CertSummary::from_gossip("-1", "AB", "zz,,");
        assert_eq!(s, CertSummary::default());
        let s = CertSummary::from_gossip("", &"ab".repeat(33), &format!("{fp},x"));
        assert_eq!(s.not_after, 0);
        assert_eq!(s.ca, "");
        assert_eq!(s.trusted, std::slice::from_ref(&fp));
        let many = vec![fp.as_str(); 100].join(",");
        let s = CertSummary::from_gossip("1", &fp, &many);
        assert_eq!(s.trusted.len(), kv_tls::MAX_CA_CERTS);
        assert_eq!(short(&fp), "abababab");
        assert_eq!(short("abc"), "abc");
    }
}
