//! `kvctl certs init` and `kvctl certs add`: the cluster CA and the
//! certificates it signs (made by `kv-tls`; no cluster needed).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

use crate::cli::CertsCommand;
use crate::exit::Outcome;
use crate::output;

/// Makes certificates and prints the files written.
pub fn run(command: &CertsCommand, json: bool) -> Result<Outcome> {
    let (dir, files) = match command {
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
