//! Certificates a node refuses, shown on a real endpoint over loopback with
//! a bare rustls/quinn client that presents exactly what the test makes: no
//! certificate, an expired one, one not valid yet, and gossip sent with a
//! client certificate. A certificate made the same way with a current
//! validity is accepted, so the refusals are the certificates' doing.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use kv_tls::{PeerIdentity, Role, TlsFiles};
use kv_transport::{Endpoint, Handler, TransportSettings};
use kv_types::NodeId;
use kv_wire::frame::{self, FrameKind};
use kv_wire::{ClientReply, PeerCall, PeerReply, PeerResponse, Request, RequestBody, Response};
use quinn::crypto::rustls::QuicClientConfig;
use rcgen::string::Ia5String;
use rcgen::{
    CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::mpsc;

struct Ack;

#[async_trait::async_trait]
impl Handler for Ack {
    async fn handle(&self, _peer: &PeerIdentity, _request: Request) -> ClientReply {
        ClientReply {
            ring_version: 1,
            response: Response::Ack,
        }
    }

    async fn handle_peer(&self, _peer: &PeerIdentity, _call: PeerCall) -> PeerReply {
        PeerReply {
            ring_version: 1,
            feedback: None,
            response: PeerResponse::Replaced(false),
        }
    }
}

/// A cluster's certificates and node1's endpoint, with its gossip channel.
fn node1() -> (
    tempfile::TempDir,
    Arc<Endpoint>,
    mpsc::Receiver<kv_transport::GossipDatagram>,
) {
    let dir = tempfile::tempdir().unwrap();
    kv_tls::init(dir.path(), &[NodeId::new("node1").unwrap()]).unwrap();
    let creds = kv_tls::load(&TlsFiles::in_dir(dir.path(), "node1")).unwrap();
    let (tx, rx) = mpsc::channel(8);
    let ep = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        &creds,
        TransportSettings::default(),
        Arc::new(Ack),
        tx,
    )
    .unwrap();
    (dir, ep, rx)
}

/// What a client certificate needs, signed by the CA in `dir`, valid from
/// `from` to `until` (years).
fn client_cert(
    dir: &std::path::Path,
    from: i32,
    until: i32,
) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let ca_pem = std::fs::read_to_string(dir.join("ca.pem")).unwrap();
    let ca_key = KeyPair::from_pem(&std::fs::read_to_string(dir.join("ca.key")).unwrap()).unwrap();
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key).unwrap();
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, "client");
    params.subject_alt_names = vec![SanType::URI(
        Ia5String::try_from(Role::Client.uri()).unwrap(),
    )];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = rcgen::date_time_ymd(from, 1, 1);
    params.not_after = rcgen::date_time_ymd(until, 1, 1);
    let cert = params.signed_by(&key, &issuer).unwrap();
    (
        vec![cert.der().clone()],
        PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
    )
}

/// A bare QUIC client trusting the cluster CA in `dir`, presenting `cert`
/// (or nothing).
fn bare_client(
    dir: &std::path::Path,
    cert: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> quinn::Endpoint {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(dir.join("ca.pem")).unwrap())
        .unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots);
    let mut config = match cert {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![kv_tls::ALPN.to_vec()];
    let crypto = QuicClientConfig::try_from(Arc::new(config)).unwrap();
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    ep
}

/// Sends one Get over `ep` to node1 and reports the answer or how the
/// connection failed.
async fn ask(ep: &quinn::Endpoint, addr: std::net::SocketAddr) -> Result<Response, String> {
    let exchange = async {
        let conn = ep
            .connect(addr, "node1")
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())?;
        let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
        let request = Request {
            id: 1,
            body: RequestBody::Get {
                key: b"k".to_vec(),
                r: None,
                hedged: false,
            },
        };
        send.write_all(&frame::encode(FrameKind::Request, &request).unwrap())
            .await
            .map_err(|e| e.to_string())?;
        send.finish().map_err(|e| e.to_string())?;
        let bytes = recv
            .read_to_end(1 << 20)
            .await
            .map_err(|e| match conn.close_reason() {
                Some(reason) => reason.to_string(),
                None => e.to_string(),
            })?;
        let reply: ClientReply = frame::decode(FrameKind::Response, &bytes).unwrap();
        Ok(reply.response)
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| "no answer within 5 s".to_string())?
}

#[tokio::test]
async fn no_certificate_an_expired_one_and_one_not_valid_yet_are_refused() {
    let (dir, n1, _gossip) = node1();
    let addr = n1.local_addr().unwrap();
    // Control: a client certificate made here, valid now, is served.
    let valid = bare_client(dir.path(), Some(client_cert(dir.path(), 2020, 2090)));
    assert_eq!(ask(&valid, addr).await, Ok(Response::Ack));

    let cases = [
        ("no certificate", bare_client(dir.path(), None)),
        (
            "expired",
            bare_client(dir.path(), Some(client_cert(dir.path(), 2020, 2021))),
        ),
        (
            "not valid yet",
            bare_client(dir.path(), Some(client_cert(dir.path(), 2090, 2091))),
        ),
    ];
    for (what, ep) in cases {
        let err = ask(&ep, addr).await.unwrap_err();
        // The node ends the handshake with a TLS alert (QUIC crypto error).
        assert!(
            err.contains("certificate") || err.contains("crypto") || err.contains("TLS"),
            "{what}: {err}"
        );
        println!("{what}: {err}");
    }
}

#[tokio::test]
async fn gossip_sent_with_a_client_certificate_is_refused() {
    let (dir, n1, mut gossip) = node1();
    let addr = n1.local_addr().unwrap();
    kv_tls::add_node(dir.path(), &NodeId::new("node2").unwrap()).unwrap();
    let send = async |ep: &quinn::Endpoint, text: &[u8]| {
        let conn = ep.connect(addr, "node1").unwrap().await.unwrap();
        let mut stream = conn.open_uni().await.unwrap();
        let message = frame::wrap(FrameKind::Gossip, text).unwrap();
        let _ = stream.write_all(&message).await;
        let _ = stream.finish();
        conn
    };
    // A client certificate's gossip first, then a node's.
    let client = bare_client(dir.path(), Some(client_cert(dir.path(), 2020, 2090)));
    let _c = send(&client, b"client claims to be node7").await;
    let creds = kv_tls::load(&TlsFiles::in_dir(dir.path(), "node2")).unwrap();
    let crypto = QuicClientConfig::try_from(kv_tls::client_config(&creds).unwrap()).unwrap();
    let mut node2 = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    node2.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let _n = send(&node2, b"node2 gossip").await;
    // Only the node's message reaches gossip.
    let got = tokio::time::timeout(Duration::from_secs(5), gossip.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.payload, b"node2 gossip");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(gossip.try_recv().is_err(), "a second message arrived");
}
