//! The `[resp]` section of the node's config file.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::ensure;
use serde::Deserialize;

use super::{RespSettings, SiblingRule};

/// The RESP listener's settings, as written in the config file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RespConfig {
    /// Whether the node listens for RESP at all. Default true.
    pub enabled: bool,
    /// TCP address to bind. Default `127.0.0.1:6379`: loopback, so only
    /// processes on this machine reach the plaintext door.
    pub listen: SocketAddr,
    /// Address published in gossip and shown by `kvctl status` (e.g. the
    /// host's published port of a container). Default: `listen`.
    pub advertise: Option<SocketAddr>,
    /// Password clients must give with `AUTH` before anything else. Default
    /// none: every client that reaches the port is served.
    pub password: Option<String>,
    /// Read quorum of RESP reads. Default: `replication.r`.
    pub r: Option<usize>,
    /// Write quorum of RESP writes. Default: `replication.w`.
    pub w: Option<usize>,
    /// What GET answers for a key with siblings: `newest` (default) or
    /// `error`. Siblings are never deleted because of it.
    pub siblings: String,
    /// Open connections at most. At the cap, the longest-idle connection
    /// that has not authenticated or sent a command is closed to make room;
    /// when there is none, the new one gets an error and is closed.
    /// Default 1024.
    pub max_connections: usize,
    /// Open connections from one IP address at most, with the same rule.
    /// Default 256 (every local client arrives from 127.0.0.1, every
    /// container client from one gateway address).
    pub max_connections_per_address: usize,
    /// Close connections idle this long, seconds; 0 = never (Redis's
    /// default). Default 0.
    pub idle_timeout_secs: u64,
    /// Close a connection that has not authenticated (with `password`) or
    /// completed its first command (without) within this many seconds of
    /// opening, however slowly it sends; 0 = never. Default 10.
    pub unauthenticated_timeout_secs: u64,
    /// Close a connection whose request is still incomplete this many
    /// seconds after its first bytes arrived (a client trickling a request
    /// byte by byte); 0 = never. Default 30.
    pub request_timeout_secs: u64,
}

impl Default for RespConfig {
    fn default() -> Self {
        RespConfig {
            enabled: true,
            listen: SocketAddr::from(([127, 0, 0, 1], 6379)),
            advertise: None,
            password: None,
            r: None,
            w: None,
            siblings: SiblingRule::Newest.as_str().into(),
            max_connections: 1024,
            max_connections_per_address: 256,
            idle_timeout_secs: 0,
            unauthenticated_timeout_secs: 10,
            request_timeout_secs: 30,
        }
    }
}

impl RespConfig {
    /// Checks the values against the cluster's replica count `n`.
    ///
    /// # Errors
    /// A message naming the offending key.
    pub fn validate(&self, n: usize) -> anyhow::Result<()> {
        for (name, q) in [("resp.r", self.r), ("resp.w", self.w)] {
            if let Some(q) = q {
                ensure!(
                    (1..=n).contains(&q),
                    "{name} must be in 1..=replication.n ({n})"
                );
            }
        }
        if let Some(p) = &self.password {
            ensure!(
                (1..=512).contains(&p.len()),
                "resp.password must be 1..=512 bytes (omit it for no password)"
            );
        }
        self.siblings
            .parse::<SiblingRule>()
            .map_err(|e| anyhow::anyhow!("resp.siblings: {e}"))?;
        ensure!(
            (1..=100_000).contains(&self.max_connections),
            "resp.max_connections must be in 1..=100000"
        );
        ensure!(
            (1..=100_000).contains(&self.max_connections_per_address),
            "resp.max_connections_per_address must be in 1..=100000"
        );
        Ok(())
    }

    /// The address to publish: `advertise`, else `bound` (the address the
    /// listener really got, which differs from `listen` for port 0).
    pub fn published(&self, bound: SocketAddr) -> SocketAddr {
        self.advertise.unwrap_or(bound)
    }

    /// The listener's runtime settings.
    pub fn settings(&self) -> RespSettings {
        let quorum = |q: Option<usize>| q.and_then(|q| u8::try_from(q).ok());
        RespSettings {
            listen: self.listen,
            password: self.password.clone(),
            r: quorum(self.r),
            w: quorum(self.w),
            siblings: self.siblings.parse().unwrap_or_default(),
            max_connections: self.max_connections,
            max_connections_per_address: self.max_connections_per_address,
            idle_timeout: secs(self.idle_timeout_secs),
            unauthenticated_timeout: secs(self.unauthenticated_timeout_secs),
            request_timeout: secs(self.request_timeout_secs),
        }
    }
}

/// `secs` seconds, or `None` for 0 (never).
fn secs(secs: u64) -> Option<Duration> {
    (secs > 0).then(|| Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_loopback_and_the_cluster_quorums() {
        let c = RespConfig::default();
        assert!(c.listen.ip().is_loopback());
        c.validate(3).unwrap();
        let s = c.settings();
        assert_eq!((s.r, s.w, s.siblings), (None, None, SiblingRule::Newest));
        assert_eq!(s.idle_timeout, None);
        assert_eq!(s.unauthenticated_timeout, Some(Duration::from_secs(10)));
        assert!(s.max_connections_per_address >= 256);
    }

    #[test]
    fn bad_values_name_their_key() {
        let bad = RespConfig {
            r: Some(4),
            ..RespConfig::default()
        };
        assert!(bad.validate(3).unwrap_err().to_string().contains("resp.r"));
        let bad = RespConfig {
            siblings: "lww".into(),
            ..RespConfig::default()
        };
        assert!(
            bad.validate(3)
                .unwrap_err()
                .to_string()
                .contains("resp.siblings")
        );
        let bad = RespConfig {
            password: Some(String::new()),
            ..RespConfig::default()
        };
        assert!(bad.validate(3).is_err());
    }
}
