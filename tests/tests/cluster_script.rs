//! `scripts/cluster` in local mode, as a user drives it: up, add a node,
//! drain it, stop it; then down and up again, and rotate the CA with
//! `kvctl certs rotate` and `scripts/cluster reload`. `.cluster/` must hold
//! only what the cluster is: after the drained node stops, its directory,
//! its `kvctl.toml` endpoint and kvctl's routing caches are gone (a stale
//! endpoint made one `kvctl get` in three wait for its timeout), and the
//! next `up` restarts exactly the remaining nodes. The LEFT node is no
//! member in `kvctl status` any more, and `kvctl remove` of it succeeds
//! saying it has already left. The stop itself must take seconds, not the 10 s drain
//! deadline. The script runs with its state in a temporary directory, on
//! ports of its own, with the debug binaries (`KV_CLUSTER_DIR`,
//! `KV_*_BASE_PORT`, `KV_BIN_DIR`).

#![allow(clippy::unwrap_used)]

use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kv_tests::{DEADLINE, poll_until};

/// Nodes of the test cluster before the added one.
const NODES: u16 = 3;

/// The cluster under test: where its state is and the ports it uses.
struct Script {
    /// Holds `.cluster/`; kvctl runs here, so it finds `.cluster/kvctl.toml`.
    dir: tempfile::TempDir,
    bins: PathBuf,
    /// (QUIC, RESP, admin) base ports: node i listens on base + i.
    bases: (u16, u16, u16),
}

impl Script {
    fn state(&self) -> PathBuf {
        self.dir.path().join(".cluster")
    }

    fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("KV_CLUSTER_DIR", self.state())
            .env("KV_BIN_DIR", &self.bins)
            .env("KV_BASE_PORT", self.bases.0.to_string())
            .env("KV_RESP_BASE_PORT", self.bases.1.to_string())
            .env("KV_ADMIN_BASE_PORT", self.bases.2.to_string())
            .env("KV_WAIT_SECS", "120")
            .env_remove("KV_ENDPOINTS")
            .env_remove("KV_CERTS")
            .env_remove("KV_IDENTITY")
            .env_remove("KV_ROUTER_MODE")
            .env_remove("KV_CONNECT_TIMEOUT")
            // A cache kvctl keeps outside .cluster/ goes here, not ~/.cache.
            .env("XDG_CACHE_HOME", self.dir.path().join("xdg-cache"))
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `scripts/cluster ARGS`.
    fn cluster(&self, args: &[&str]) -> Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster");
        within(self.command(&script, args))
    }

    /// Runs `scripts/cluster ARGS` and expects exit 0.
    fn ok(&self, args: &[&str]) -> Output {
        let out = self.cluster(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "scripts/cluster {args:?}: {}",
            text(&out.stderr)
        );
        out
    }

    /// Runs kvctl in the cluster's directory (so with its kvctl.toml).
    fn kvctl(&self, args: &[&str]) -> Output {
        within(self.command(&self.bins.join("kvctl"), args))
    }

    /// The endpoints listed in kvctl.toml.
    fn endpoints(&self) -> Vec<String> {
        let file = std::fs::read_to_string(self.state().join("kvctl.toml")).unwrap();
        let line = file
            .lines()
            .find(|l| l.starts_with("endpoints"))
            .unwrap()
            .to_string();
        line.split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    fn endpoint(&self, i: u16) -> String {
        format!("127.0.0.1:{}", self.bases.0 + i)
    }

    /// `STATUS` of node `id` in `kvctl status --json`, as `node` sees it.
    fn status_of(&self, node: u16, id: &str) -> Result<String, String> {
        let name = format!("node{node}");
        let out = self.kvctl(&[
            "--json",
            "--endpoints",
            &self.endpoint(node),
            "status",
            "--node",
            &name,
        ]);
        let json: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("{e}: {out:?}"))?;
        json["nodes"]
            .as_array()
            .and_then(|nodes| nodes.iter().find(|n| n["id"] == id))
            .and_then(|n| n["status"].as_str())
            .map(str::to_string)
            .ok_or_else(|| format!("node{node} does not list {id}"))
    }
}

impl Drop for Script {
    /// Whatever happened, no node outlives the test.
    fn drop(&mut self) {
        let _ = self.cluster(&["down", "--local"]);
    }
}

/// Runs `cmd` to its end, killing it after 3 minutes (a wait that never
/// ends must fail the test, not hang it).
fn within(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Three base ports whose next `count` ports are free: UDP for QUIC, TCP
/// for RESP and admin (checked now; good enough for one cluster at a time).
fn free_bases(count: u16) -> (u16, u16, u16) {
    let seed = u64::from(std::process::id()) * 7919 + 17;
    let mut candidate = 20_000 + (seed % 400) as u16 * 100;
    let free = |base: u16, udp: bool| {
        (1..=count).all(|i| {
            let addr = ("127.0.0.1", base + i);
            if udp {
                UdpSocket::bind(addr).is_ok()
            } else {
                TcpListener::bind(addr).is_ok()
            }
        })
    };
    let mut bases = Vec::new();
    while bases.len() < 3 {
        candidate = if candidate >= 60_000 {
            20_000
        } else {
            candidate + 100
        };
        if free(candidate, bases.is_empty()) {
            bases.push(candidate);
        }
    }
    (bases[0], bases[1], bases[2])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_drain_stop_leaves_only_the_running_cluster() {
    let bins = kv_tests::bins::locate().unwrap();
    let s = Script {
        dir: tempfile::tempdir().unwrap(),
        bins: bins.kvctl.parent().unwrap().to_path_buf(),
        bases: free_bases(NODES + 1),
    };

    // Help is not an error; a wrong command is.
    let help = s.cluster(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(text(&help.stdout).contains("scripts/cluster up"));
    assert_eq!(s.cluster(&["nonsense"]).status.code(), Some(2));

    s.ok(&["up", "--local", "--nodes", &NODES.to_string()]);
    let three: Vec<String> = (1..=NODES).map(|i| s.endpoint(i)).collect();
    assert_eq!(s.endpoints(), three);

    s.ok(&["add", "node4"]);
    let mut four = three.clone();
    four.push(s.endpoint(4));
    assert_eq!(s.endpoints(), four);
    for node in 1..=NODES {
        poll_until("node4 UP everywhere", DEADLINE * 2, async || {
            match s.status_of(node, "node4")? {
                up if up == "UP" => Ok(()),
                other => Err(format!("node{node} sees node4 {other}")),
            }
        })
        .await
        .unwrap();
    }
    // A node the ring holds is not forgotten.
    let refused = s.cluster(&["forget", "node4"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        text(&refused.stderr).contains("drain it first"),
        "{refused:?}"
    );

    // The drain follows the node until it is LEFT.
    let drained = s.kvctl(&["drain", "node4"]);
    assert_eq!(drained.status.code(), Some(0), "{drained:?}");
    assert!(
        text(&drained.stdout)
            .ends_with("node4 has LEFT: every partition moved; it can be stopped\n")
    );
    // "It can be stopped" means every live member knows it LEFT: stopped
    // before they learn it by gossip, it would stay DRAINING in their view.
    for node in 1..=NODES {
        assert_eq!(
            s.status_of(node, "node4").as_deref(),
            Ok("LEFT"),
            "node{node}"
        );
    }

    // Stopping a LEFT node forgets it, in seconds.
    let started = Instant::now();
    let stop = s.ok(&["stop", "node4"]);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(8),
        "scripts/cluster stop took {took:?}: {}",
        text(&stop.stderr)
    );
    assert!(text(&stop.stderr).contains("forgot node4"), "{stop:?}");
    assert!(!s.state().join("node4").exists());
    assert_eq!(s.endpoints(), three);
    // .cluster/ is the running cluster and nothing more: kvctl's routing
    // caches (the test's own --endpoints calls made one per node, node4's
    // among them) went with node4, and the script's probes left none.
    let mut entries: Vec<String> = std::fs::read_dir(s.state())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(
        entries,
        ["certs", "kvctl.toml", "mode", "node1", "node2", "node3"],
        "{entries:?}"
    );

    // node4 has LEFT: `kvctl status` no longer lists it as a member (a
    // line after the table names it; --all shows its row) ...
    let table = poll_until("kvctl status without node4's row", DEADLINE, async || {
        let out = s.kvctl(&["status"]);
        let stdout = text(&out.stdout);
        if out.status.code() != Some(0) {
            return Err(format!("kvctl status: {out:?}"));
        }
        if stdout.lines().any(|l| l.starts_with("node4 ")) {
            return Err(stdout);
        }
        Ok(stdout)
    })
    .await
    .unwrap();
    let rows: Vec<&str> = table
        .lines()
        .skip(2)
        .filter_map(|l| l.split(' ').next())
        .filter(|id| id.starts_with("node"))
        .collect();
    assert_eq!(rows, ["node1", "node2", "node3"], "{table}");
    assert!(
        table.ends_with("left the ring (not members; kvctl status --all lists them): node4\n"),
        "{table}"
    );
    let all = text(&s.kvctl(&["status", "--all"]).stdout);
    assert!(
        all.lines()
            .any(|l| l.starts_with("node4 ") && l.contains(" LEFT ")),
        "{all}"
    );
    // ... and removing it is done already: exit 0, saying so.
    let remove = s.kvctl(&["remove", "node4"]);
    assert_eq!(remove.status.code(), Some(0), "{remove:?}");
    assert_eq!(
        text(&remove.stdout),
        "node4 has already LEFT the ring (drained or removed): nothing to remove\n",
        "{remove:?}"
    );
    let remove = s.kvctl(&["--json", "remove", "node4"]);
    assert_eq!(remove.status.code(), Some(0), "{remove:?}");
    let json: serde_json::Value = serde_json::from_slice(&remove.stdout).unwrap();
    assert_eq!(json["already_left"], true, "{remove:?}");
    let status = text(&s.ok(&["status"]).stdout);
    let listed: Vec<&str> = status
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(listed, ["node1", "node2", "node3"], "{status}");

    // Every kvctl call goes to live endpoints only: none waits on a timeout.
    let put = s.kvctl(&["put", "greeting", "hello"]);
    assert_eq!(put.status.code(), Some(0), "{put:?}");
    for _ in 0..10 {
        let started = Instant::now();
        let get = s.kvctl(&["--timeout", "10", "get", "greeting"]);
        assert_eq!(text(&get.stdout), "hello\n", "{get:?}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    // down and up: the same three nodes, node4 not brought back.
    s.ok(&["down", "--local"]);
    s.ok(&["up", "--local"]);
    assert_eq!(s.endpoints(), three);
    let status = text(&s.ok(&["status"]).stdout);
    assert_eq!(
        status.lines().filter(|l| l.contains(" running ")).count(),
        3,
        "{status}"
    );
    assert!(!s.state().join("node4").exists());

    // A CA rotation the way README tells it: each step of `kvctl certs
    // rotate`, then `scripts/cluster reload` (every node, or one).
    let certs = s.state().join("certs");
    let certs_arg = certs.to_str().unwrap();
    for step in ["begin", "switch", "finish"] {
        let rotate = s.kvctl(&["certs", "rotate", step, "--out", certs_arg]);
        assert_eq!(rotate.status.code(), Some(0), "{rotate:?}");
        let reload = s.ok(&["reload"]);
        for node in 1..=NODES {
            assert!(
                text(&reload.stderr).contains(&format!(
                    "node{node} reloaded its certificate, key and ca.pem"
                )),
                "{reload:?}"
            );
        }
        let get = s.kvctl(&["get", "greeting"]);
        assert_eq!(text(&get.stdout), "hello\n", "{step}: {get:?}");
    }
    // Every node's own entry is fresh at once; the others' come by gossip.
    let new_ca = kv_tls::fingerprint(&kv_tls::load_ca_bundle(&certs.join("ca.pem")).unwrap()[0]);
    poll_until(
        "every node to show the new CA alone",
        DEADLINE,
        async || {
            let status = s.kvctl(&["--json", "status"]);
            let json: serde_json::Value =
                serde_json::from_slice(&status.stdout).map_err(|e| format!("{e}: {status:?}"))?;
            for node in json["nodes"].as_array().into_iter().flatten() {
                if node["cert_ca"] != new_ca.as_str()
                    || node["trusted_cas"] != serde_json::json!([new_ca])
                {
                    return Err(format!("{node}"));
                }
            }
            Ok(())
        },
    )
    .await
    .unwrap();
    // A bad ca.pem: the node says it kept its certificates, the script
    // fails, the node serves on; with the file back, the reload takes.
    let good = std::fs::read(certs.join("ca.pem")).unwrap();
    std::fs::write(certs.join("ca.pem"), b"not a certificate\n").unwrap();
    let bad = s.cluster(&["reload", "node2"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(
        text(&bad.stderr).contains("node2 kept its old certificates"),
        "{bad:?}"
    );
    std::fs::write(certs.join("ca.pem"), &good).unwrap();
    s.ok(&["reload", "node2"]);
    let get = s.kvctl(&["get", "greeting"]);
    assert_eq!(text(&get.stdout), "hello\n", "{get:?}");
    assert_eq!(s.cluster(&["reload", "node9"]).status.code(), Some(2));

    s.ok(&["down", "--wipe", "--local"]);
    assert!(!s.state().exists());
}
