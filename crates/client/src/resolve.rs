//! Endpoint names to socket addresses.
//!
//! Endpoints are `HOST:PORT`, resolved with the system resolver (so Docker
//! service names work). The client's one UDP socket is IPv4 unless some
//! endpoint is IPv6; an IPv6 socket reaches IPv4 nodes too, through mapped
//! addresses, so only an IPv4 socket has to skip IPv6 addresses.

use std::net::SocketAddr;
use std::time::Duration;

/// Whether `name` has the shape `HOST:PORT` (`[V6]:PORT` for IPv6).
pub(crate) fn looks_like_host_port(name: &str) -> bool {
    match name.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0),
        None => false,
    }
}

/// Resolves `HOST:PORT` with the system resolver, within `timeout`.
pub(crate) async fn lookup(
    name: &str,
    timeout: Duration,
) -> std::result::Result<Vec<SocketAddr>, String> {
    match tokio::time::timeout(timeout, tokio::net::lookup_host(name)).await {
        Ok(Ok(addrs)) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            if addrs.is_empty() {
                Err(format!("{name} resolves to no address"))
            } else {
                Ok(addrs)
            }
        }
        Ok(Err(e)) => Err(format!("cannot resolve {name}: {e}")),
        Err(_) => Err(format!("cannot resolve {name} within {timeout:?}")),
    }
}

/// The address to use from `addrs`: an IPv6 socket reaches any address, an
/// IPv4 socket only IPv4 ones.
pub(crate) fn pick(addrs: &[SocketAddr], ipv6: bool) -> Option<SocketAddr> {
    addrs.iter().copied().find(|a| ipv6 || a.is_ipv4())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_host_port() {
        assert!(looks_like_host_port("127.0.0.1:7101"));
        assert!(looks_like_host_port("node1:7001"));
        assert!(looks_like_host_port("[::1]:7001"));
        assert!(!looks_like_host_port("127.0.0.1"));
        assert!(!looks_like_host_port(":7001"));
        assert!(!looks_like_host_port("host:0"));
        assert!(!looks_like_host_port("host:http"));
    }

    #[test]
    fn an_ipv4_socket_only_takes_ipv4_addresses() {
        let v4: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        assert_eq!(pick(&[v6, v4], false), Some(v4));
        assert_eq!(pick(&[v6, v4], true), Some(v6));
        assert_eq!(pick(&[v6], false), None);
    }

    #[tokio::test]
    async fn literals_resolve_to_themselves() {
        let addrs = lookup("127.0.0.1:7101", Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(addrs, vec!["127.0.0.1:7101".parse::<SocketAddr>().unwrap()]);
        assert!(
            lookup("no-such-host.invalid:1", Duration::from_secs(5))
                .await
                .is_err()
        );
    }
}
