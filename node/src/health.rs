//! `kvnode health`: asks one node for its status over QUIC and tells whether
//! it answers and lists itself.
//!
//! Meant for container health checks: a `FROM scratch` image has no shell
//! and no kvctl, so the check runs the node binary itself with the node's own
//! certificate (node certificates carry the clientAuth usage). Exit 0 when
//! healthy (one line on stdout), 1 otherwise (one line on stderr); usage
//! errors exit 2 like every other flag error.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use kv_tls::TlsFiles;
use kv_transport::{Endpoint, TransportSettings};
use kv_types::NodeId;
use kv_wire::{Request, RequestBody, Response};

/// Flags of `kvnode health`.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// `HOST:PORT` of the node's QUIC endpoint.
    #[arg(long)]
    addr: String,
    /// Directory of `ca.pem`, `<id>.pem` and `<id>.key`.
    #[arg(long)]
    certs: PathBuf,
    /// Id of the node expected at `--addr`; its certificate is also the one
    /// the check connects with.
    #[arg(long)]
    id: NodeId,
    /// Deadline of the whole check (connecting included), ms.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    timeout_ms: u64,
}

/// Runs the check and prints its one-line verdict.
pub fn main(args: &HealthArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kvnode health: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(check(args)) {
        Ok(summary) => {
            println!("{} healthy: {summary}", args.id);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kvnode health: {} at {}: {e:#}", args.id, args.addr);
            ExitCode::FAILURE
        }
    }
}

/// Connects, asks for `Status`, and checks the answer.
async fn check(args: &HealthArgs) -> anyhow::Result<String> {
    let addr = resolve(&args.addr)?;
    let files = TlsFiles::in_dir(&args.certs, args.id.as_str());
    let creds = kv_tls::load(&files).context("cannot load the certificates")?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let config = TransportSettings {
        connect_timeout: timeout,
        ..TransportSettings::default()
    };
    let bind = if addr.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let endpoint = Endpoint::client(bind, &creds, config).context("cannot open a QUIC endpoint")?;
    let request = Request {
        id: rand::random(),
        body: RequestBody::Status,
    };
    let answer = endpoint
        .call(addr, args.id.as_str(), &request, timeout)
        .await;
    // Tell the node at once that we are gone, rather than leaving it a
    // connection to time out; bounded by the endpoint itself.
    endpoint.close().await;
    let report = match answer?.response {
        Response::Status(report) => report,
        Response::Error(e) => bail!("status refused: {:?}: {}", e.kind, e.message),
        _ => bail!("unexpected answer to status"),
    };
    if report.node != args.id.as_str() {
        bail!("answered as {:?}", report.node);
    }
    let Some(me) = report.nodes.iter().find(|n| n.id == args.id.as_str()) else {
        bail!(
            "its status does not list itself ({} nodes listed)",
            report.nodes.len()
        );
    };
    let alive = report.nodes.iter().filter(|n| n.alive).count();
    Ok(format!(
        "status {}, sees {} nodes, {alive} alive, ring version {}",
        me.status,
        report.nodes.len(),
        report.ring_version
    ))
}

/// The first address `HOST:PORT` resolves to (/etc/hosts and DNS).
fn resolve(addr: &str) -> anyhow::Result<SocketAddr> {
    addr.to_socket_addrs()
        .with_context(|| format!("cannot resolve {addr:?} (expected HOST:PORT)"))?
        .next()
        .with_context(|| format!("{addr:?} resolves to no address"))
}
