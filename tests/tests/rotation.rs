//! Rotating the cluster CA of a running cluster, the way README's
//! "Security and limits" tells an operator to: `kvctl certs rotate begin`,
//! `switch`, `finish`, each followed by a SIGHUP to every node and a reload
//! of every long-running client, under a steady load of requests, none of
//! which may fail. And a node that finds bad files at a SIGHUP keeps
//! serving with the files it had.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kv_client::Client;
use kv_tests::{DEADLINE, TestCluster, poll_until};
use tokio::task::JoinHandle;

/// The fingerprints of the CAs `dir/ca.pem` holds, in file order.
fn cas_in(dir: &Path) -> Vec<String> {
    kv_tls::load_ca_bundle(&dir.join("ca.pem"))
        .unwrap()
        .iter()
        .map(|c| kv_tls::fingerprint(c))
        .collect()
}

/// What the load did: requests that succeeded, and every failure.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failures: std::sync::Mutex<Vec<String>>,
}

impl Tally {
    fn fail(&self, what: String) {
        self.failures.lock().unwrap().push(what);
    }

    fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }
}

/// A long-running client writing then reading its own keys in a loop,
/// until `stop`; each write supersedes the key's last one (its context),
/// and every answer is checked.
fn client_load(
    client: Arc<Client>,
    worker: usize,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut contexts: HashMap<String, Vec<u8>> = HashMap::new();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let key = format!("rot-{worker}-{}", n % 50);
            let value = format!("v{n}");
            let context = contexts.get(&key).cloned().unwrap_or_default();
            match client
                .put(key.as_bytes(), value.as_bytes(), &context, None)
                .await
            {
                Ok(context) => {
                    contexts.insert(key.clone(), context);
                    tally.ok.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => tally.fail(format!("put {key}: {e}")),
            }
            match client.get(key.as_bytes(), None).await {
                Ok(reply) if reply.values == [value.as_bytes()] => {
                    tally.ok.fetch_add(1, Ordering::Relaxed);
                }
                Ok(reply) => tally.fail(format!("get {key}: {value} missing in {reply:?}")),
                Err(e) => tally.fail(format!("get {key}: {e}")),
            }
            n += 1;
        }
    })
}

/// kvctl runs one after another (each a new process: a new handshake with
/// the certificate files as they are at that moment), until `stop`: a put
/// of a new key (a blind write: a key of its own, so no siblings), then
/// its get.
fn kvctl_load(
    cluster: Arc<TestCluster>,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let key = format!("rot-kvctl-{n}");
            let value = format!("k{n}");
            let put = cluster.kvctl(&["put", &key, &value]).await.unwrap();
            if put.code == 0 {
                tally.ok.fetch_add(1, Ordering::Relaxed);
            } else {
                tally.fail(format!("kvctl put {key}: {put}"));
            }
            let get = cluster.kvctl(&["get", &key]).await.unwrap();
            if get.code == 0 && get.stdout.lines().any(|l| l == value) {
                tally.ok.fetch_add(1, Ordering::Relaxed);
            } else {
                tally.fail(format!("kvctl get {key}: {get}"));
            }
            n += 1;
        }
    })
}

/// Waits until every node's status, as every node sees it (its own entry
/// and the ones gossip brings), shows certificates of CA `ca` and trust in
/// exactly `trusted`.
async fn wait_every_node_shows(cluster: &TestCluster, ca: &str, trusted: &[String]) {
    let what = format!(
        "every node to show a certificate of CA {} trusting {:?}",
        &ca[..8],
        trusted.iter().map(|t| &t[..8]).collect::<Vec<_>>()
    );
    poll_until(&what, DEADLINE, async || {
        for i in cluster.members() {
            let report = cluster.certs(i).await.map_err(|e| format!("{e:#}"))?;
            if report.nodes.len() != cluster.members().len() {
                return Err(format!("node{i} knows {} nodes", report.nodes.len()));
            }
            for node in &report.nodes {
                if node.ca != ca || node.trusted != trusted || node.not_after == 0 {
                    return Err(format!(
                        "node{i} sees {}: CA {:?}, trusting {:?}, not after {}",
                        node.id, node.ca, node.trusted, node.not_after
                    ));
                }
            }
        }
        Ok(())
    })
    .await
    .unwrap();
}

/// Waits until the load has made `more` successful requests past `from`:
/// proof that it runs through the step, not just around it.
async fn wait_load(tally: &Tally, from: u64, more: u64) {
    poll_until("the load to go on", DEADLINE, async || {
        let done = tally.ok() - from;
        if done >= more {
            Ok(())
        } else {
            Err(format!("{done} requests done"))
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ca_of_a_running_cluster_rotates_under_load_without_a_failed_request() {
    let cluster = Arc::new(TestCluster::start(3).await.unwrap());
    let certs = cluster.certs_dir().to_path_buf();
    let certs_arg = certs.to_str().unwrap().to_string();
    let old_ca = cas_in(&certs).remove(0);
    wait_every_node_shows(&cluster, &old_ca, std::slice::from_ref(&old_ca)).await;

    // The steady load: two long-running clients (which reload at each step,
    // as README asks of them) and kvctl processes.
    let (tally, stop) = (Arc::new(Tally::default()), Arc::new(AtomicBool::new(false)));
    let clients: Vec<Arc<Client>> = vec![
        Arc::new(cluster.client(&[1, 2, 3]).await.unwrap()),
        Arc::new(cluster.client(&[2]).await.unwrap()),
    ];
    let mut load: Vec<JoinHandle<()>> = clients
        .iter()
        .enumerate()
        .map(|(w, c)| client_load(c.clone(), w, tally.clone(), stop.clone()))
        .collect();
    load.push(kvctl_load(cluster.clone(), tally.clone(), stop.clone()));
    wait_load(&tally, 0, 20).await;

    let mut new_ca = String::new();
    for step in ["begin", "switch", "finish"] {
        let out = cluster
            .kvctl(&["--json", "certs", "rotate", step, "--out", &certs_arg])
            .await
            .unwrap();
        assert_eq!(out.code, 0, "rotate {step}: {out}");
        let report = out.json().unwrap();
        assert_eq!(report["old_ca"], old_ca.as_str(), "{report}");
        new_ca = report["new_ca"].as_str().unwrap().to_string();
        for i in cluster.members() {
            let outcome = cluster.reload(i).await.unwrap();
            assert!(outcome.reloaded, "node{i} after {step}: {}", outcome.line);
        }
        for client in &clients {
            client.reload_certificates().unwrap();
        }
        let (ca, trusted) = match step {
            "begin" => (old_ca.clone(), vec![old_ca.clone(), new_ca.clone()]),
            "switch" => (new_ca.clone(), vec![old_ca.clone(), new_ca.clone()]),
            _ => (new_ca.clone(), vec![new_ca.clone()]),
        };
        wait_every_node_shows(&cluster, &ca, &trusted).await;
        wait_load(&tally, tally.ok(), 20).await;
        println!("after {step}: {} requests answered", tally.ok());
    }
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    let failures = tally.failures.lock().unwrap().clone();
    assert!(
        failures.is_empty(),
        "{} failed request(s) of {}: {failures:#?}",
        failures.len(),
        tally.ok() + failures.len() as u64
    );
    assert_eq!(cas_in(&certs), [new_ca.clone()]);

    // The old CA is trusted no more: a client still holding its certificate
    // (kept in previous/) is refused on a new connection, even one that
    // trusts both CAs itself (so the refusal is the node's), while the
    // clients that moved on go on.
    let previous = certs.join(kv_tls::PREVIOUS_DIR);
    let stale = tempfile::tempdir().unwrap();
    for name in ["client.pem", "client.key"] {
        std::fs::copy(previous.join(name), stale.path().join(name)).unwrap();
    }
    let bundle = [
        std::fs::read(previous.join("ca.pem")).unwrap(),
        std::fs::read(certs.join("ca.pem")).unwrap(),
    ]
    .concat();
    std::fs::write(stale.path().join("ca.pem"), bundle).unwrap();
    let refused = cluster
        .kvctl_with_certs(&[1], stale.path(), &["get", "rot-0-1"])
        .await
        .unwrap();
    assert_eq!(refused.code, 5, "{refused}");
    let fresh = cluster.kvctl(&["get", "rot-0-1"]).await.unwrap();
    assert_eq!(fresh.code, 0, "{fresh}");
    for client in &clients {
        client.get(b"rot-0-1", None).await.unwrap();
    }

    // A node restarted now loads the new files like any other.
    cluster.stop(3).await.unwrap();
    cluster.start_node(3).await.unwrap();
    cluster.wait_alive(3).await.unwrap();
    wait_every_node_shows(&cluster, &new_ca, std::slice::from_ref(&new_ca)).await;
    for client in clients {
        client.close().await;
    }
}

/// A node certificate for `node1` signed by the CA in `dir` that expired
/// in 2021: its PEM and its key's.
fn expired_node1(dir: &Path) -> (String, String) {
    use rcgen::string::Ia5String;
    use rcgen::{
        CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose,
        SanType,
    };
    let ca_pem = std::fs::read_to_string(dir.join("ca.pem")).unwrap();
    let ca_key = KeyPair::from_pem(&std::fs::read_to_string(dir.join("ca.key")).unwrap()).unwrap();
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key).unwrap();
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, "node1");
    params.subject_alt_names = vec![
        SanType::URI(Ia5String::try_from(kv_tls::Role::Node.uri()).unwrap()),
        SanType::DnsName(Ia5String::try_from("node1").unwrap()),
    ];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ClientAuth,
        ExtendedKeyUsagePurpose::ServerAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A case of bad files: what it is, the files written (name, contents),
/// and what the node's log line must say.
type BadFiles = (&'static str, Vec<(&'static str, Vec<u8>)>, &'static str);

/// Copies every file of `from` into `to`.
fn copy_files(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_given_bad_files_at_a_sighup_keeps_serving_with_the_ones_it_had() {
    let cluster = TestCluster::start(1).await.unwrap();
    let certs = cluster.certs_dir().to_path_buf();
    // The checks run with a good copy: the node's own directory is broken
    // on purpose, case after case.
    let good = tempfile::tempdir().unwrap();
    copy_files(&certs, good.path());
    kv_tls::add_node(good.path(), &kv_types::NodeId::new("node2").unwrap()).unwrap();
    let read = |name: &str| std::fs::read(good.path().join(name)).unwrap();
    let other = tempfile::tempdir().unwrap();
    kv_tls::init(other.path(), &[kv_types::NodeId::new("node1").unwrap()]).unwrap();
    let foreign = |name: &str| std::fs::read(other.path().join(name)).unwrap();
    let cat = |parts: &[Vec<u8>]| parts.concat();
    let nine_cas: Vec<u8> = (0..9)
        .flat_map(|_| {
            let dir = tempfile::tempdir().unwrap();
            kv_tls::init(dir.path(), &[]).unwrap();
            std::fs::read(dir.path().join("ca.pem")).unwrap()
        })
        .collect();
    let (expired_pem, expired_key) = expired_node1(good.path());

    let put = cluster
        .kvctl_with_certs(&[1], good.path(), &["put", "steady", "yes", "--w", "1"])
        .await
        .unwrap();
    assert_eq!(put.code, 0, "{put}");
    let own = |report: &kv_client::CertsReport| {
        report
            .nodes
            .iter()
            .find(|n| n.id == "node1")
            .cloned()
            .unwrap()
    };
    let before = own(&cluster.certs(1).await.unwrap());

    let cases: Vec<BadFiles> = vec![
        (
            "ca.pem not PEM",
            vec![("ca.pem", b"hello\n".to_vec())],
            "no CERTIFICATE block",
        ),
        (
            "ca.pem empty",
            vec![("ca.pem", Vec::new())],
            "no CERTIFICATE block",
        ),
        (
            "ca.pem over 64 KiB",
            vec![("ca.pem", vec![b'#'; 70_000])],
            "larger than 65536 bytes",
        ),
        (
            "ca.pem holding the CA twice",
            vec![("ca.pem", cat(&[read("ca.pem"), read("ca.pem")]))],
            "repeats certificate 1",
        ),
        (
            "ca.pem holding 9 CAs",
            vec![("ca.pem", nine_cas)],
            "more than 8 certificates",
        ),
        (
            "ca.pem holding a private key",
            vec![("ca.pem", cat(&[read("ca.pem"), read("ca.key")]))],
            "CA certificates only",
        ),
        (
            "ca.pem holding node1's certificate",
            vec![("ca.pem", read("node1.pem"))],
            "not a CA certificate",
        ),
        (
            "ca.pem of another CA",
            vec![("ca.pem", foreign("ca.pem"))],
            "is not valid under the cluster CA",
        ),
        (
            "node1.pem cut in half",
            vec![("node1.pem", read("node1.pem")[..300].to_vec())],
            "node1.pem",
        ),
        (
            "node1.pem missing",
            vec![("node1.pem", Vec::new())],
            "node1.pem: file not found",
        ),
        (
            "node1.key of node2",
            vec![("node1.key", read("node2.key"))],
            "does not match",
        ),
        (
            "node1.key empty",
            vec![("node1.key", Vec::new())],
            "no PRIVATE KEY block",
        ),
        (
            "node2's certificate and key",
            vec![
                ("node1.pem", read("node2.pem")),
                ("node1.key", read("node2.key")),
            ],
            "not a node certificate for node1",
        ),
        (
            "the client certificate and key",
            vec![
                ("node1.pem", read("client.pem")),
                ("node1.key", read("client.key")),
            ],
            "is a client certificate",
        ),
        (
            "an expired node1 certificate",
            vec![
                ("node1.pem", expired_pem.into_bytes()),
                ("node1.key", expired_key.into_bytes()),
            ],
            "expired",
        ),
        (
            "node1 of another CA",
            vec![
                ("node1.pem", foreign("node1.pem")),
                ("node1.key", foreign("node1.key")),
            ],
            "is not valid under the cluster CA",
        ),
    ];
    for (what, files, expected) in cases {
        for (name, contents) in &files {
            let path = certs.join(name);
            if *what == *"node1.pem missing" {
                std::fs::remove_file(&path).unwrap();
            } else {
                std::fs::write(&path, contents).unwrap();
            }
        }
        let outcome = cluster.reload(1).await.unwrap();
        assert!(!outcome.reloaded, "{what}: {}", outcome.line);
        assert!(outcome.line.contains(expected), "{what}: {}", outcome.line);
        println!("{what}: {}", outcome.line.trim());
        // Still serving, and to new connections (each kvctl run is one)
        // with the configuration it had.
        let get = cluster
            .kvctl_with_certs(&[1], good.path(), &["get", "steady", "--r", "1"])
            .await
            .unwrap();
        assert_eq!(
            (get.code, get.stdout.as_str()),
            (0, "yes\n"),
            "{what}: {get}"
        );
        copy_files(good.path(), &certs);
    }
    assert_eq!(own(&cluster.certs(1).await.unwrap()), before);
    // The good files again: the reload takes.
    let outcome = cluster.reload(1).await.unwrap();
    assert!(outcome.reloaded, "{}", outcome.line);
}
