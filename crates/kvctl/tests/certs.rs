//! The built kvctl binary: certificates, usage errors and the message when
//! no cluster settings can be found. No node is needed.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const KVCTL: &str = env!("CARGO_BIN_EXE_kvctl");

/// Runs kvctl in `cwd` with no `KV_*` variables, and returns its output.
///
/// A copied executable can be briefly "busy" (ETXTBSY): another test thread
/// may fork while the copy's write descriptor is open, and the child holds
/// it until it execs. The run is retried until that window closes.
fn kvctl_in(exe: &Path, cwd: &Path, args: &[&str]) -> Output {
    let mut tries = 0;
    loop {
        let run = Command::new(exe)
            .args(args)
            .current_dir(cwd)
            .env_remove("KV_ENDPOINTS")
            .env_remove("KV_CERTS")
            .env_remove("KV_IDENTITY")
            .output();
        match run {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.unwrap(),
        }
    }
}

fn kvctl(cwd: &Path, args: &[&str]) -> Output {
    kvctl_in(Path::new(KVCTL), cwd, args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn certs_init_then_add() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("certs");
    let out_s = out.to_str().unwrap();
    let o = kvctl(
        tmp.path(),
        &[
            "certs",
            "init",
            "--out",
            out_s,
            "--nodes",
            "node1,node2,node3",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for name in ["ca", "node1", "node2", "node3", "client", "admin"] {
        for ext in ["pem", "key"] {
            let file = out.join(format!("{name}.{ext}"));
            assert!(file.is_file(), "{} missing", file.display());
            assert!(
                stdout(&o).contains(&file.display().to_string()),
                "{}",
                stdout(&o)
            );
        }
    }
    // An existing CA is never replaced.
    let again = kvctl(
        tmp.path(),
        &["certs", "init", "--out", out_s, "--nodes", "node1"],
    );
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );

    let o = kvctl(
        tmp.path(),
        &["--json", "certs", "add", "node4", "--out", out_s],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["files"].as_array().unwrap().len(), 2);
    assert!(out.join("node4.pem").is_file() && out.join("node4.key").is_file());
    // What was written loads as a node identity.
    let creds = kv_tls::load(&kv_tls::TlsFiles::in_dir(&out, "node4")).unwrap();
    assert_eq!(creds.identity().name, "node4");

    let dup = kvctl(tmp.path(), &["certs", "add", "node4", "--out", out_s]);
    assert_eq!(dup.status.code(), Some(2));
}

#[test]
fn usage_errors_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        &["get"][..],
        &["frobnicate"],
        &["get", "k", "--r", "0"],
        &["put", "k", "v", "--w", "nope"],
        &["get", "--local", "k"],
        &["certs", "add", "Not_A_Node", "--out", "x"],
        &["--timeout", "-1", "status"],
    ] {
        let o = kvctl(tmp.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_bad_context_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let o = kvctl(
        tmp.path(),
        &[
            "certs",
            "init",
            "--out",
            certs.to_str().unwrap(),
            "--nodes",
            "node1",
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    // Nothing listens there: the bad context must be refused before any
    // request is sent.
    let o = kvctl(
        tmp.path(),
        &[
            "--endpoints",
            "127.0.0.1:9",
            "--certs",
            certs.to_str().unwrap(),
            "put",
            "k",
            "v",
            "--context",
            "!!not-a-context!!",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("causal context"), "{}", stderr(&o));
}

#[test]
fn missing_certificates_say_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let o = kvctl(
        tmp.path(),
        &["--endpoints", "127.0.0.1:9", "--certs", "nowhere", "status"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("ca.pem"), "{}", stderr(&o));
}

#[test]
fn no_settings_exit_2_with_a_helpful_message() {
    // Run a copy of the binary from a temporary directory, so that neither
    // the working directory nor the executable's directory lies inside a
    // repository that may hold a `.cluster/` of a running cluster.
    let tmp = tempfile::tempdir().unwrap();
    let exe: PathBuf = tmp.path().join("kvctl");
    std::fs::copy(KVCTL, &exe).unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let o = kvctl_in(&exe, &work, &["get", "k"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("scripts/cluster up"), "{err}");
    assert!(err.contains("--endpoints"), "{err}");
    assert!(err.contains("--certs"), "{err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn settings_are_found_next_to_the_executable() {
    // The copy sits in <root>/target/release; <root>/.cluster/kvctl.toml names
    // certificates that do not exist, so the run fails on them (exit 2) after
    // finding the file.
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("target/release");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(root.path().join(".cluster")).unwrap();
    std::fs::write(
        root.path().join(".cluster/kvctl.toml"),
        "endpoints = [\"127.0.0.1:9\"]\ncerts = \"certs-from-file\"\n",
    )
    .unwrap();
    let exe = bin.join("kvctl");
    std::fs::copy(KVCTL, &exe).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let o = kvctl_in(&exe, elsewhere.path(), &["status"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("certs-from-file"), "{}", stderr(&o));
}

#[test]
fn completions_are_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let o = kvctl(tmp.path(), &["completions", "bash"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("kvctl"));
}

#[test]
fn certs_rotate_runs_its_steps_in_order_and_says_what_is_next() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("certs");
    let out_s = out.to_str().unwrap();
    let init = kvctl(
        tmp.path(),
        &["certs", "init", "--out", out_s, "--nodes", "node1,node2"],
    );
    assert_eq!(init.status.code(), Some(0), "{}", stderr(&init));

    // Out of order: nothing to switch yet (exit 2, like other local errors).
    let early = kvctl(tmp.path(), &["certs", "rotate", "switch", "--out", out_s]);
    assert_eq!(early.status.code(), Some(2), "{}", stderr(&early));
    assert!(
        stderr(&early).contains("rotate begin"),
        "{}",
        stderr(&early)
    );

    // begin is the default step.
    let begin = kvctl(tmp.path(), &["--json", "certs", "rotate", "--out", out_s]);
    assert_eq!(begin.status.code(), Some(0), "{}", stderr(&begin));
    let v: serde_json::Value = serde_json::from_slice(&begin.stdout).unwrap();
    assert_eq!(v["step"], "begin");
    let (old_ca, new_ca) = (
        v["old_ca"].as_str().unwrap().to_string(),
        v["new_ca"].as_str().unwrap().to_string(),
    );
    assert_eq!(old_ca.len(), 64);
    assert_ne!(old_ca, new_ca);
    let names: Vec<&str> = v["identities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["admin", "client", "node1", "node2"]);
    assert!(v["next"].as_str().unwrap().contains("rotate switch"), "{v}");
    assert!(out.join("next/node1.pem").is_file());

    let status = kvctl(tmp.path(), &["certs", "rotate", "status", "--out", out_s]);
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
    let text = stdout(&status);
    assert!(text.contains("4 certificate(s) staged"), "{text}");
    assert!(text.contains(&new_ca[..8]), "{text}");

    let switch = kvctl(tmp.path(), &["certs", "rotate", "switch", "--out", out_s]);
    assert_eq!(switch.status.code(), Some(0), "{}", stderr(&switch));
    let text = stdout(&switch);
    assert!(
        text.contains(&format!("wrote {}", out.join("node1.pem").display())),
        "{text}"
    );
    assert!(text.contains("next: "), "{text}");
    assert!(text.contains("rotate finish"), "{text}");

    let finish = kvctl(
        tmp.path(),
        &["--json", "certs", "rotate", "finish", "--out", out_s],
    );
    assert_eq!(finish.status.code(), Some(0), "{}", stderr(&finish));
    let v: serde_json::Value = serde_json::from_slice(&finish.stdout).unwrap();
    assert_eq!(v["new_ca"], new_ca.as_str());
    let status = kvctl(
        tmp.path(),
        &["--json", "certs", "rotate", "status", "--out", out_s],
    );
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["state"], "idle");
    assert_eq!(v["cas"], serde_json::json!([new_ca]));
    assert_eq!(v["previous"], true);

    // What the rotation left loads, and `certs add` signs with the new CA.
    let add = kvctl(tmp.path(), &["certs", "add", "node3", "--out", out_s]);
    assert_eq!(add.status.code(), Some(0), "{}", stderr(&add));
    for name in ["node1", "node3", "client", "admin"] {
        let creds = kv_tls::load(&kv_tls::TlsFiles::in_dir(&out, name)).unwrap();
        assert_eq!(kv_tls::fingerprint(creds.ca()), new_ca, "{name}");
    }
}
