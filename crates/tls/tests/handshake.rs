//! Real rustls handshakes between configurations made from generated
//! certificates, with the bytes pumped in memory.

// Tests may unwrap; `allow-unwrap-in-tests` covers only `#[test]` functions,
// not the helpers of an integration test.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use kv_tls::{
    ANY_NODE, Error, NodeVerifier, Role, TlsFiles, client_config, load, peer_identity,
    server_config,
};
use kv_types::NodeId;
use rcgen::string::Ia5String;
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, SanType};
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tempfile::TempDir;

/// Which side gave up on the handshake, and why.
#[derive(Debug)]
enum Failed {
    Client(rustls::Error),
    Server(rustls::Error),
}

impl Failed {
    fn client(self) -> String {
        match self {
            Failed::Client(e) => e.to_string(),
            Failed::Server(e) => panic!("expected the client to refuse, the server did: {e}"),
        }
    }
    fn server(self) -> String {
        match self {
            Failed::Server(e) => e.to_string(),
            Failed::Client(e) => panic!("expected the server to refuse, the client did: {e}"),
        }
    }
}

/// Moves every pending TLS record from `from` to `to` and processes it.
fn pump(from: &mut Connection, to: &mut Connection) -> Result<(), rustls::Error> {
    let mut bytes = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut bytes).unwrap();
    }
    let mut rest = bytes.as_slice();
    while !rest.is_empty() {
        to.read_tls(&mut rest).unwrap();
        to.process_new_packets()?;
    }
    Ok(())
}

fn handshake(
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
    server_name: &str,
) -> Result<(Connection, Connection), Failed> {
    let name = ServerName::try_from(server_name.to_owned()).unwrap();
    let mut c = Connection::from(ClientConnection::new(client, name).unwrap());
    let mut s = Connection::from(ServerConnection::new(server).unwrap());
    for _ in 0..10 {
        pump(&mut c, &mut s).map_err(Failed::Server)?;
        pump(&mut s, &mut c).map_err(Failed::Client)?;
        if !c.is_handshaking() && !s.is_handshaking() {
            return Ok((c, s));
        }
    }
    panic!("handshake did not finish");
}

fn ids(names: &[&str]) -> Vec<NodeId> {
    names.iter().map(|n| NodeId::new(*n).unwrap()).collect()
}

fn cluster(nodes: &[&str]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    kv_tls::init(dir.path(), &ids(nodes)).unwrap();
    dir
}

fn creds(dir: &Path, name: &str) -> kv_tls::Credentials {
    load(&TlsFiles::in_dir(dir, name)).unwrap()
}

fn peer(conn: &Connection) -> kv_tls::PeerIdentity {
    peer_identity(&conn.peer_certificates().unwrap()[0]).unwrap()
}

#[test]
fn client_and_node_handshakes_carry_roles_and_names() {
    let dir = cluster(&["node1", "node2"]);
    let node1 = creds(dir.path(), "node1");
    let node2 = creds(dir.path(), "node2");
    let server = server_config(&node1).unwrap();
    assert_eq!(node1.identity().role, Role::Node);
    assert_eq!(
        node1.identity().node_id(),
        Some(NodeId::new("node1").unwrap())
    );

    for (name, role) in [("client", Role::Client), ("admin", Role::Admin)] {
        let client = creds(dir.path(), name);
        let (c, s) = handshake(client_config(&client).unwrap(), server.clone(), ANY_NODE).unwrap();
        assert_eq!(peer(&c).role, Role::Node);
        assert_eq!(peer(&c).name, "node1");
        assert_eq!(peer(&s).role, role);
        assert_eq!(peer(&s).name, name);
        assert_eq!(c.alpn_protocol(), Some(&b"kv/1"[..]));
        assert_eq!(s.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
    }

    // A node dialing a known peer names it.
    let (c, s) = handshake(client_config(&node2).unwrap(), server, "node1").unwrap();
    assert_eq!(peer(&c).name, "node1");
    assert_eq!(peer(&s).role, Role::Node);
    assert_eq!(peer(&s).name, "node2");
}

#[test]
fn the_named_node_must_answer() {
    let dir = cluster(&["node1", "node2"]);
    let server = server_config(&creds(dir.path(), "node1")).unwrap();
    let client = client_config(&creds(dir.path(), "node2")).unwrap();
    let err = handshake(client.clone(), server.clone(), "node2")
        .unwrap_err()
        .client();
    assert!(err.contains("node1"), "{err}");
    assert!(handshake(client, server, ANY_NODE).is_ok());
}

#[test]
fn certificates_of_another_ca_are_refused() {
    let ours = cluster(&["node1"]);
    let theirs = cluster(&["node1"]);

    // Their node, our client: the client refuses the server.
    let server = server_config(&creds(theirs.path(), "node1")).unwrap();
    let client = client_config(&creds(ours.path(), "client")).unwrap();
    let err = handshake(client, server, ANY_NODE).unwrap_err().client();
    assert!(err.contains("UnknownIssuer"), "{err}");

    // Our node, a client trusting our CA but holding their certificate: the
    // node refuses the client.
    let server = server_config(&creds(ours.path(), "node1")).unwrap();
    let ca = CertificateDer::from_pem_file(ours.path().join("ca.pem")).unwrap();
    let cert = CertificateDer::from_pem_file(theirs.path().join("client.pem")).unwrap();
    let key = PrivateKeyDer::from_pem_file(theirs.path().join("client.key")).unwrap();
    let client = Arc::new(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(NodeVerifier::new(&ca).unwrap())
            .with_client_auth_cert(vec![cert], key)
            .unwrap(),
    );
    let err = handshake(client, server, ANY_NODE).unwrap_err().server();
    assert!(err.contains("UnknownIssuer"), "{err}");

    // And loading such a mix fails at startup, naming both files.
    let mixed = TlsFiles {
        ca: ours.path().join("ca.pem"),
        ..TlsFiles::in_dir(theirs.path(), "client")
    };
    let err = load(&mixed).unwrap_err();
    assert!(matches!(err, Error::NotTrusted { .. }), "{err}");
    assert!(err.to_string().contains("client.pem"), "{err}");
}

#[test]
fn a_node_requires_a_client_certificate() {
    let dir = cluster(&["node1"]);
    let server = server_config(&creds(dir.path(), "node1")).unwrap();
    let ca = CertificateDer::from_pem_file(dir.path().join("ca.pem")).unwrap();
    let anonymous = Arc::new(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(NodeVerifier::new(&ca).unwrap())
            .with_no_client_auth(),
    );
    let err = handshake(anonymous, server, ANY_NODE).unwrap_err().server();
    assert!(err.contains("no certificates"), "{err}");
}

#[test]
fn a_client_certificate_cannot_serve() {
    let dir = cluster(&["node1"]);
    let node = client_config(&creds(dir.path(), "node1")).unwrap();

    // The role check refuses a client certificate presented by a server.
    let fake = server_config(&creds(dir.path(), "client")).unwrap();
    let err = handshake(node.clone(), fake, ANY_NODE)
        .unwrap_err()
        .client();
    assert!(err.contains("role client, not node"), "{err}");

    // A certificate claiming the node role without serverAuth is refused by
    // webpki's key-usage check, and already by `load`.
    let ca_pem = std::fs::read_to_string(dir.path().join("ca.pem")).unwrap();
    let ca_key =
        KeyPair::from_pem(&std::fs::read_to_string(dir.path().join("ca.key")).unwrap()).unwrap();
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, "node9");
    params.subject_alt_names = vec![
        SanType::URI(Ia5String::try_from(Role::Node.uri()).unwrap()),
        SanType::DnsName(Ia5String::try_from("node9").unwrap()),
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.path().join("node9.pem"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("node9.key"), key.serialize_pem()).unwrap();
    let err = load(&TlsFiles::in_dir(dir.path(), "node9")).unwrap_err();
    assert!(matches!(err, Error::NotTrusted { .. }), "{err}");

    let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
    let fake = Arc::new(
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .unwrap(),
    );
    let err = handshake(node, fake, "node9").unwrap_err().client();
    assert!(err.contains("server authentication"), "{err}");
}

#[test]
fn added_nodes_and_clients_join_the_original_ca() {
    let dir = cluster(&["node1"]);
    let node4 = NodeId::new("node4").unwrap();
    kv_tls::add_node(dir.path(), &node4).unwrap();
    kv_tls::add_client(dir.path(), "alice", Role::Admin).unwrap();

    let node1 = creds(dir.path(), "node1");
    let node4_creds = creds(dir.path(), "node4");
    let alice = creds(dir.path(), "alice");
    assert_eq!(alice.identity().role, Role::Admin);
    assert_eq!(alice.identity().name, "alice");

    let to_node1 = server_config(&node1).unwrap();
    let (_, s) = handshake(client_config(&node4_creds).unwrap(), to_node1, "node1").unwrap();
    assert_eq!(peer(&s).name, "node4");
    let to_node4 = server_config(&node4_creds).unwrap();
    let (c, s) = handshake(client_config(&alice).unwrap(), to_node4, "node4").unwrap();
    assert_eq!(peer(&c).name, "node4");
    assert_eq!(peer(&s).role, Role::Admin);

    let err = kv_tls::add_node(dir.path(), &node4).unwrap_err();
    assert!(matches!(err, Error::Exists { .. }), "{err}");
    let err = kv_tls::add_client(dir.path(), "alice", Role::Client).unwrap_err();
    assert!(matches!(err, Error::Exists { .. }), "{err}");
    assert!(kv_tls::add_client(dir.path(), "bob", Role::Node).is_err());
    assert!(kv_tls::add_client(dir.path(), "Bob", Role::Client).is_err());
    assert!(kv_tls::add_client(dir.path(), "ca", Role::Client).is_err());

    // Without the CA there is nothing to sign with.
    let empty = tempfile::tempdir().unwrap();
    let err = kv_tls::add_node(empty.path(), &node4).unwrap_err();
    assert!(matches!(err, Error::Missing { .. }), "{err}");
    assert!(err.to_string().contains("ca.pem"), "{err}");
}

#[test]
fn derived_secrets_are_stable_per_key_and_label() {
    let dir = cluster(&["node1", "node2"]);
    let a = creds(dir.path(), "node1");
    let again = creds(dir.path(), "node1");
    let b = creds(dir.path(), "node2");
    assert_eq!(a.derive_secret("reset"), again.derive_secret("reset"));
    assert_ne!(a.derive_secret("reset"), a.derive_secret("other"));
    assert_ne!(a.derive_secret("reset"), b.derive_secret("reset"));
    assert!(!format!("{a:?}").contains("PRIVATE"));
}

#[test]
fn every_pair_of_phases_a_rotation_goes_through_shakes_hands() {
    use kv_tls::RotationStep;

    let dir = cluster(&["node1", "node2"]);
    let d = dir.path();
    // Each peer as it stands after reloading at a step (certificate, key and
    // ca.pem as they are then); one that has not reloaded yet keeps what it
    // loaded at the previous step.
    let before = [creds(d, "node1"), creds(d, "client")];
    kv_tls::rotate(d, RotationStep::Begin).unwrap();
    let trusting = [creds(d, "node1"), creds(d, "client")];
    kv_tls::rotate(d, RotationStep::Switch).unwrap();
    let presenting = [creds(d, "node1"), creds(d, "client")];
    kv_tls::rotate(d, RotationStep::Finish).unwrap();
    let finished = [creds(d, "node1"), creds(d, "client")];
    let node2_now = creds(d, "node2");

    let shake = |client: &kv_tls::Credentials, server: &kv_tls::Credentials| {
        handshake(
            client_config(client).unwrap(),
            server_config(server).unwrap(),
            ANY_NODE,
        )
    };
    // Neighbouring phases always agree: that is what lets every node and
    // client move one step at a time.
    let phases = [&before, &trusting, &presenting, &finished];
    for pair in phases.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        for (client, server) in [
            (&a[1], &b[0]),
            (&b[1], &a[0]),
            (&a[0], &b[0]),
            (&b[0], &a[0]),
        ] {
            shake(client, server).unwrap();
        }
    }
    // Skipping a step fails: a peer that never reloaded after begin does not
    // know the new CA, and after finish the old one is trusted by no one.
    let err = shake(&before[1], &presenting[0]).unwrap_err().client();
    assert!(err.contains("UnknownIssuer"), "{err}");
    let err = shake(&trusting[1], &finished[0]).unwrap_err().server();
    assert!(err.contains("UnknownIssuer"), "{err}");
    // A node of the new CA talks to the others by name.
    let (_, s) = handshake(
        client_config(&node2_now).unwrap(),
        server_config(&finished[0]).unwrap(),
        "node1",
    )
    .unwrap();
    assert_eq!(peer(&s).name, "node2");
}
