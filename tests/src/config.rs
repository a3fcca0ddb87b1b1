//! Node configuration files of the shape `scripts/cluster` writes, with
//! per-cluster overrides.
//!
//! A config is a map of sections to keys to TOML literals ("" is the top
//! level), so an override replaces a default instead of repeating a key
//! (which TOML refuses).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Sections -> keys -> TOML values (already quoted where needed).
pub(crate) type Settings = BTreeMap<String, BTreeMap<String, String>>;

/// Everything that differs between the nodes of one cluster.
pub(crate) struct NodePlan<'a> {
    /// 1-based node number.
    pub index: usize,
    /// Node id, `node<index>` for members.
    pub id: &'a str,
    /// UDP port on 127.0.0.1.
    pub port: u16,
    /// The node's data directory.
    pub data_dir: &'a Path,
    /// Directory with `ca.pem` and the node's certificate.
    pub certs_dir: &'a Path,
    /// Zone label.
    pub zone: String,
    /// Host label.
    pub host: String,
    /// `HOST:PORT` of the seeds.
    pub seeds: &'a [String],
    /// TCP port of its RESP listener on 127.0.0.1.
    pub resp_port: u16,
    /// TCP port of its HTTP admin endpoint on 127.0.0.1.
    pub admin_port: u16,
}

/// The zone of node `index` (1-based) among `zones` zones, as
/// `scripts/cluster` assigns them: zone-a, zone-b, zone-c, zone-a, ...
pub(crate) fn zone_of(index: usize, zones: usize) -> String {
    let letter = b'a' + u8::try_from((index - 1) % zones.max(1)).unwrap_or(0);
    format!("zone-{}", char::from(letter))
}

/// The host of node `index` in a cluster of `n`: node4 shares host-1 with
/// node1 from five nodes on, as in `scripts/cluster`.
pub(crate) fn host_of(index: usize, n: usize) -> String {
    if n >= 5 && index == 4 {
        "host-1".into()
    } else {
        format!("host-{index}")
    }
}

/// A TOML basic string. JSON's string escapes are valid TOML escapes.
pub(crate) fn quote(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// The config text of one node: the harness defaults, then `overrides`.
pub(crate) fn render(plan: &NodePlan<'_>, sync_writes: bool, overrides: &Settings) -> String {
    let seeds: Vec<String> = plan.seeds.iter().map(|s| quote(s)).collect();
    let mut settings = Settings::new();
    let mut set = |section: &str, key: &str, value: String| {
        settings
            .entry(section.to_string())
            .or_default()
            .insert(key.to_string(), value);
    };
    set("", "id", quote(plan.id));
    set("", "data_dir", quote(&plan.data_dir.display().to_string()));
    set("", "listen", quote(&format!("127.0.0.1:{}", plan.port)));
    set("", "zone", quote(&plan.zone));
    set("", "host", quote(&plan.host));
    set("", "seeds", format!("[{}]", seeds.join(", ")));
    set("", "worker_threads", "1".into());
    set("certs", "dir", quote(&plan.certs_dir.display().to_string()));
    set(
        "gossip",
        "interval_ms",
        crate::GOSSIP_INTERVAL_MS.to_string(),
    );
    set("storage", "sync_writes", sync_writes.to_string());
    set(
        "resp",
        "listen",
        quote(&format!("127.0.0.1:{}", plan.resp_port)),
    );
    set(
        "admin",
        "listen",
        quote(&format!("127.0.0.1:{}", plan.admin_port)),
    );
    for (section, keys) in overrides {
        for (key, value) in keys {
            set(section, key, value.clone());
        }
    }
    let mut text = format!(
        "# Written by the kv-tests harness for node {} (see node/kvnode.example.toml).\n",
        plan.index
    );
    // The top level comes first: a key after a [section] header belongs to it.
    for (section, keys) in &settings {
        if !section.is_empty() {
            let _ = write!(text, "\n[{section}]\n");
        }
        for (key, value) in keys {
            let _ = writeln!(text, "{key} = {value}");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_and_hosts_follow_the_cluster_script() {
        let zones: Vec<String> = (1..=5).map(|i| zone_of(i, 3)).collect();
        assert_eq!(zones, ["zone-a", "zone-b", "zone-c", "zone-a", "zone-b"]);
        assert_eq!(host_of(4, 5), "host-1");
        assert_eq!(host_of(4, 4), "host-4");
        assert_eq!(zone_of(2, 1), "zone-a");
    }

    #[test]
    fn overrides_replace_defaults_and_keep_the_top_level_first() {
        let seeds = vec!["127.0.0.1:1".to_string()];
        let plan = NodePlan {
            index: 1,
            id: "node1",
            port: 7101,
            data_dir: Path::new("/d"),
            certs_dir: Path::new("/c"),
            zone: "zone-a".into(),
            host: "host-1".into(),
            seeds: &seeds,
            resp_port: 6380,
            admin_port: 9190,
        };
        let mut overrides = Settings::new();
        overrides
            .entry("gossip".into())
            .or_default()
            .insert("interval_ms".into(), "300".into());
        let text = render(&plan, true, &overrides);
        assert!(text.contains("interval_ms = 300\n"), "{text}");
        assert!(!text.contains("interval_ms = 200"), "{text}");
        let first_table = text.find("\n[").unwrap_or(text.len());
        assert!(
            text.find("worker_threads = 1")
                .is_some_and(|i| i < first_table)
        );
        assert!(text.contains("seeds = [\"127.0.0.1:1\"]"), "{text}");
        assert!(
            text.contains("[resp]\nlisten = \"127.0.0.1:6380\""),
            "{text}"
        );
    }
}
