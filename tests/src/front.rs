//! The plaintext front doors of a [`TestCluster`]'s nodes: where their RESP
//! listeners and admin endpoints are, and a minimal HTTP/1.1 GET for the
//! admin endpoint (no HTTP client crate needed).

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::cluster::TestCluster;

/// Largest admin answer read.
const MAX_BODY: u64 = 16 << 20;

/// Deadline of one admin request.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// An admin endpoint's answer.
#[derive(Clone, Debug)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The body, lossily decoded.
    pub body: String,
}

impl TestCluster {
    /// `127.0.0.1:PORT` of node `index`'s RESP listener.
    ///
    /// # Errors
    /// When there is no such node.
    pub fn resp_addr(&self, index: usize) -> anyhow::Result<String> {
        Ok(self.node(index)?.resp.clone())
    }

    /// `127.0.0.1:PORT` of node `index`'s HTTP admin endpoint.
    ///
    /// # Errors
    /// When there is no such node.
    pub fn admin_addr(&self, index: usize) -> anyhow::Result<String> {
        Ok(self.node(index)?.admin.clone())
    }

    /// `GET path` on node `index`'s admin endpoint.
    ///
    /// # Errors
    /// Connection failures, a timeout, or an answer that is not HTTP.
    pub async fn admin_get(&self, index: usize, path: &str) -> anyhow::Result<HttpAnswer> {
        let addr = self.admin_addr(index)?;
        tokio::time::timeout(HTTP_TIMEOUT, http_get(&addr, path))
            .await
            .with_context(|| format!("GET {path} on {addr} took over {HTTP_TIMEOUT:?}"))?
    }
}

/// One HTTP/1.1 GET with `Connection: close`, read to the end.
async fn http_get(addr: &str, path: &str) -> anyhow::Result<HttpAnswer> {
    let mut stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.take(MAX_BODY).read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("not an HTTP answer: {text:?}");
    };
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no status code in {head:?}"))?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_string()
    };
    Ok(HttpAnswer { status, body })
}

/// Decodes a chunked body.
fn dechunk(mut body: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").context("bad chunk header")?;
        let size = usize::from_str_radix(size.trim(), 16).context("bad chunk size")?;
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest.get(..size).context("short chunk")?;
        out.push_str(chunk);
        body = rest.get(size + 2..).context("short chunk")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_decoded() {
        assert_eq!(
            dechunk("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").ok(),
            Some("abcde".into())
        );
        assert!(dechunk("zz\r\n").is_err());
    }
}
