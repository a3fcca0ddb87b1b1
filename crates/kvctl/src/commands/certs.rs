//! `kvctl certs init`, `kvctl certs add` and `kvctl certs rotate`: the
//! cluster CA, the certificates it signs, and moving a cluster to a new CA
//! (made by `kv-tls`; no cluster needed).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kv_tls::{RotationReport, RotationState, RotationStep};
use serde_json::{Value, json};

use crate::cli::{CertsCommand, RotateStep};
use crate::exit::Outcome;
use crate::output::{self, short_fingerprint};

/// Makes certificates and prints the files written.
pub fn run(command: &CertsCommand, json: bool) -> Result<Outcome> {
    let (dir, files) = match command {
        CertsCommand::Rotate { step, out } => return rotate(*step, out, json),
        CertsCommand::Init { out, nodes } => {
            kv_tls::init(out, nodes)
                .with_context(|| format!("cannot create the cluster CA in {}", out.display()))?;
            let mut stems: Vec<&str> = vec!["ca"];
            stems.extend(nodes.iter().map(|n| n.as_str()));
            stems.extend(["client", "admin"]);
            (out, files(out, &stems))
        }
        CertsCommand::Add { node, out } => {
            kv_tls::add_node(out, node).with_context(|| {
                format!("cannot sign a certificate for {node} in {}", out.display())
            })?;
            (out, files(out, &[node.as_str()]))
        }
    };
    if json {
        let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        output::print_json(&json!({ "dir": dir.display().to_string(), "files": files }))?;
    } else {
        let text: String = files
            .iter()
            .map(|f| format!("wrote {}\n", f.display()))
            .collect();
        output::print(&text)?;
    }
    Ok(Outcome::Done)
}

/// `<dir>/<stem>.pem` and `<dir>/<stem>.key` for every stem.
fn files(dir: &Path, stems: &[&str]) -> Vec<PathBuf> {
    stems
        .iter()
        .flat_map(|stem| [format!("{stem}.pem"), format!("{stem}.key")])
        .map(|name| dir.join(name))
        .collect()
}

/// `kvctl certs rotate STEP --out DIR`: runs the step (or, for `status`,
/// says where DIR stands) and what to do next.
fn rotate(step: RotateStep, dir: &Path, json: bool) -> Result<Outcome> {
    let step = match step {
        RotateStep::Begin => RotationStep::Begin,
        RotateStep::Switch => RotationStep::Switch,
        RotateStep::Finish => RotationStep::Finish,
        RotateStep::Abort => RotationStep::Abort,
        RotateStep::Status => return rotation_status(dir, json),
    };
    let report = kv_tls::rotate(dir, step).with_context(|| {
        format!(
            "cannot run the {} step of the CA rotation in {}",
            step.as_str(),
            dir.display()
        )
    })?;
    let next = next_step(step, dir);
    if json {
        output::print_json(&rotation_json(&report, &next))?;
    } else {
        output::print(&rotation_text(&report, &next))?;
    }
    Ok(Outcome::Done)
}

/// What the operator does after `step`.
fn next_step(step: RotationStep, dir: &Path) -> String {
    let dir = dir.display();
    match step {
        RotationStep::Begin => format!(
            "give every node and client the new ca.pem (it trusts both CAs), reload every node \
             (SIGHUP; scripts/cluster reload) and long-running client, check that `kvctl status` \
             shows every node trusting both CAs, then run `kvctl certs rotate switch --out {dir}`"
        ),
        RotationStep::Switch => format!(
            "give every node and client its new certificate and key, reload every node \
             (SIGHUP; scripts/cluster reload) and long-running client, check that `kvctl status` \
             shows every node's certificate from the new CA, then run \
             `kvctl certs rotate finish --out {dir}`"
        ),
        RotationStep::Finish => format!(
            "give every node and client the new ca.pem (the new CA alone) and reload every node \
             (SIGHUP; scripts/cluster reload) and long-running client; then delete {dir}/previous/ \
             (the old CA's key is in it), or keep it offline"
        ),
        RotationStep::Abort => "give every node and client the restored ca.pem (the old CA \
             alone) and reload every node (SIGHUP; scripts/cluster reload) and long-running client"
            .to_string(),
    }
}

fn rotation_text(report: &RotationReport, next: &str) -> String {
    let names: Vec<&str> = report.identities.iter().map(|i| i.name.as_str()).collect();
    let summary = match report.step {
        RotationStep::Begin => format!(
            "began the rotation from CA {} to CA {}: new certificates for {}; ca.pem trusts both CAs",
            short_fingerprint(&report.old_ca),
            short_fingerprint(&report.new_ca),
            names.join(", ")
        ),
        RotationStep::Switch => format!(
            "switched {} to certificates of CA {}",
            names.join(", "),
            short_fingerprint(&report.new_ca)
        ),
        RotationStep::Finish => format!(
            "finished the rotation: ca.pem and ca.key are CA {} alone; CA {} is retired",
            short_fingerprint(&report.new_ca),
            short_fingerprint(&report.old_ca)
        ),
        RotationStep::Abort => format!(
            "aborted the rotation: ca.pem is CA {} alone again",
            short_fingerprint(&report.old_ca)
        ),
    };
    let mut text = format!("{summary}\n");
    for (verb, files) in [
        ("wrote", &report.written),
        ("kept", &report.kept),
        ("removed", &report.removed),
    ] {
        for file in files {
            text.push_str(&format!("{verb} {}\n", file.display()));
        }
    }
    text.push_str(&format!("next: {next}\n"));
    text
}

fn rotation_json(report: &RotationReport, next: &str) -> Value {
    let paths = |files: &[PathBuf]| -> Vec<String> {
        files.iter().map(|f| f.display().to_string()).collect()
    };
    let identities: Vec<Value> = report
        .identities
        .iter()
        .map(|i| json!({ "role": i.role.as_str(), "name": i.name }))
        .collect();
    json!({
        "dir": report.dir.display().to_string(),
        "step": report.step.as_str(),
        "old_ca": report.old_ca,
        "new_ca": report.new_ca,
        "identities": identities,
        "files": paths(&report.written),
        "kept": paths(&report.kept),
        "removed": paths(&report.removed),
        "next": next,
    })
}

/// `kvctl certs rotate status`.
fn rotation_status(dir: &Path, json: bool) -> Result<Outcome> {
    let state = kv_tls::rotation_state(dir)
        .with_context(|| format!("cannot tell where {} stands", dir.display()))?;
    let shown = dir.display();
    let (value, text) = match &state {
        RotationState::Idle { cas, previous } => {
            let short: Vec<&str> = cas.iter().map(|c| short_fingerprint(c)).collect();
            let next = if *previous {
                format!(
                    "no rotation under way; {shown}/previous/ holds what the last one retired \
                     (delete it before the next `kvctl certs rotate begin`)"
                )
            } else {
                format!(
                    "no rotation under way; `kvctl certs rotate begin --out {shown}` starts one"
                )
            };
            (
                json!({ "state": "idle", "cas": cas, "previous": previous, "next": next }),
                format!("ca.pem trusts CA {}\nnext: {next}\n", short.join(", ")),
            )
        }
        RotationState::Begun {
            old_ca,
            new_ca,
            pending,
            trusting,
        } => {
            let next = if *trusting {
                next_step(RotationStep::Begin, dir)
            } else {
                format!(
                    "the begin step was interrupted: run `kvctl certs rotate begin --out {shown}` again"
                )
            };
            (
                json!({ "state": "begun", "old_ca": old_ca, "new_ca": new_ca,
                        "pending": pending, "trusting": trusting, "next": next }),
                format!(
                    "rotation begun from CA {} to CA {}: {pending} certificate(s) staged in next/{}\nnext: {next}\n",
                    short_fingerprint(old_ca),
                    short_fingerprint(new_ca),
                    if *trusting {
                        "; ca.pem trusts both CAs"
                    } else {
                        ""
                    },
                ),
            )
        }
        RotationState::Switched { old_ca, new_ca } => {
            let next = next_step(RotationStep::Switch, dir);
            (
                json!({ "state": "switched", "old_ca": old_ca, "new_ca": new_ca, "next": next }),
                format!(
                    "rotation from CA {} to CA {}: every certificate is the new CA's; ca.pem trusts both\nnext: {next}\n",
                    short_fingerprint(old_ca),
                    short_fingerprint(new_ca),
                ),
            )
        }
    };
    if json {
        let mut value = value;
        value["dir"] = json!(dir.display().to_string());
        output::print_json(&value)?;
    } else {
        output::print(&text)?;
    }
    Ok(Outcome::Done)
}
