//! What kvctl prints: JSON documents for scripts and text for people.
//!
//! Every renderer here is a pure function from a reply to a
//! [`serde_json::Value`] or a `String`, so the shapes are unit-tested; the
//! commands only choose one and write it. The JSON shapes are a contract
//! (scripts and the workspace's tests parse them): fields may be added,
//! never renamed. Values are base64 (standard alphabet) in JSON, causal
//! contexts base64url without padding everywhere.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::io::{self, Write};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kv_client::{
    CertsReport, ExplainReport, GetReply, NodeCert, NodeReport, Object, StatusReport,
    encode_context,
};
use serde_json::{Value, json};

/// Writes `value` as one line of compact JSON on standard output.
pub fn print_json(value: &Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    writeln!(out)
}

/// Writes `text` on standard output; its last line gets a newline if it
/// lacks one, so that every command's output ends with one (a shell prompt
/// or the next command's output never starts on its last line).
pub fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(terminated(text).as_bytes())?;
    out.flush()
}

/// `text` ending with a newline, unless it is empty (nothing printed).
pub fn terminated(text: &str) -> Cow<'_, str> {
    if text.is_empty() || text.ends_with('\n') {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(format!("{text}\n"))
    }
}

/// Orders node ids (or any names) the way people count: runs of digits
/// compare as numbers, so `node2` comes before `node10`; the rest compares
/// as text.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        match (a.chars().next(), b.chars().next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let (da, ra) = split_digits(a);
                let (db, rb) = split_digits(b);
                // Leading zeros aside, a longer run of digits is a larger
                // number; equal lengths compare digit by digit.
                let (ta, tb) = (da.trim_start_matches('0'), db.trim_start_matches('0'));
                let order = ta
                    .len()
                    .cmp(&tb.len())
                    .then_with(|| ta.cmp(tb))
                    .then_with(|| da.len().cmp(&db.len()));
                if order != Ordering::Equal {
                    return order;
                }
                (a, b) = (ra, rb);
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(&y);
                }
                (a, b) = (&a[x.len_utf8()..], &b[y.len_utf8()..]);
            }
        }
    }
}

/// The leading ASCII digits of `s`, and the rest.
fn split_digits(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.split_at(end)
}

/// Bytes as text for people; invalid UTF-8 is replaced, not refused.
pub fn text(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// After a put or delete: `{"key": ..., "context": "<base64url>"}`.
pub fn written_json(key: &str, context: &[u8]) -> Value {
    json!({ "key": key, "context": encode_context(context) })
}

/// A delete: [`written_json`], with `"existed"` (whether the read made
/// before it found a live value) when there was such a read.
pub fn deleted_json(key: &str, context: &[u8], existed: Option<bool>) -> Value {
    let mut value = written_json(key, context);
    if let (Some(existed), Some(object)) = (existed, value.as_object_mut()) {
        object.insert("existed".into(), Value::Bool(existed));
    }
    value
}

/// A quorum read: `{"key", "values": [base64...], "deleted", "context"}`.
pub fn get_json(key: &str, reply: &GetReply) -> Value {
    let values: Vec<String> = reply.values.iter().map(|v| STANDARD.encode(v)).collect();
    json!({
        "key": key,
        "values": values,
        "deleted": reply.deleted,
        "context": encode_context(&reply.context),
    })
}

/// A quorum read for people: each live value on its own line.
pub fn get_text(reply: &GetReply) -> String {
    reply
        .values
        .iter()
        .map(|v| format!("{}\n", text(v)))
        .collect()
}

/// The standard-error note when a read returns siblings.
pub fn siblings_note(key: &str, count: usize, context: &[u8]) -> String {
    format!(
        "{count} siblings; resolve with: kvctl put {} VALUE --context {}",
        shell_word(key),
        encode_context(context)
    )
}

/// What one replica stores: its versions with their dots, and its clock.
pub fn local_json(node: &str, key: &str, object: &Object) -> Value {
    let versions: Vec<Value> = object
        .values_with_dots()
        .map(|((actor, counter), sibling)| {
            json!({
                "actor": actor.node.as_str(),
                "incarnation": actor.incarnation,
                "counter": counter,
                "value": sibling.data.as_ref().map(|d| STANDARD.encode(d)),
                "tombstone": sibling.is_tombstone(),
                "written_at_ms": sibling.written_at_ms,
            })
        })
        .collect();
    let clock: Vec<Value> = object
        .join()
        .entries()
        .iter()
        .map(|(actor, counter)| {
            json!({
                "actor": actor.node.as_str(),
                "incarnation": actor.incarnation,
                "counter": counter,
            })
        })
        .collect();
    json!({ "node": node, "key": key, "versions": versions, "clock": clock })
}

/// What one replica stores, for people: `node1#<incarnation>:3  value`.
pub fn local_text(object: &Object) -> String {
    object
        .values_with_dots()
        .map(|((actor, counter), sibling)| {
            let value = match &sibling.data {
                Some(data) => text(data),
                None => Cow::Borrowed("<tombstone>"),
            };
            format!(
                "{}#{:x}:{counter}  {value}\n",
                actor.node, actor.incarnation
            )
        })
        .collect()
}

/// Membership: `{"node", "ring_version", "partitions", "replicas", "nodes":
/// [{"id", "addr", "resp", "admin", "zone", "host", "status", "alive",
/// "ring_share"}]}`; `addr` is the QUIC address, `resp` and `admin` the
/// RESP and HTTP admin addresses (HOST:PORT, empty when the node has none).
/// The nodes come in natural order of their ids ([`natural_cmp`]).
pub fn status_json(report: &StatusReport, certs: Option<&CertsReport>) -> Value {
    let nodes: Vec<Value> = by_id(report)
        .into_iter()
        .map(|n| {
            let cert = cert_of(certs, &n.id);
            json!({
                "id": n.id,
                "addr": n.addr,
                "resp": n.resp,
                "admin": n.admin,
                "zone": n.zone,
                "host": n.host,
                "status": n.status,
                "alive": n.alive,
                "ring_share": n.ring_share,
                "transfer": n.transfer,
                "cert_not_after": (cert.not_after > 0).then_some(cert.not_after),
                "cert_ca": cert.ca,
                "trusted_cas": cert.trusted,
            })
        })
        .collect();
    json!({
        "node": report.node,
        "ring_version": report.ring_version,
        "mode": report.mode,
        "partitions": report.partitions,
        "replicas": report.replicas,
        "nodes": nodes,
    })
}

/// The lifecycle status of a node that is no longer a member of the ring
/// (drained, or removed by an admin).
pub const LEFT: &str = "LEFT";

/// Membership for people: a header line and a table, one row per node in
/// natural order of ids (`node2` before `node10`), with each node's
/// certificate from `certs` (unknown without). Nodes that have LEFT the
/// ring are rows only with `all`; otherwise one line after the table names
/// them, so a drained node never reads as a member.
pub fn status_text(report: &StatusReport, certs: Option<&CertsReport>, all: bool) -> String {
    let header = format!(
        "answered by {}: ring version {}, {} partitions, {} replicas per key, router mode {}\n",
        report.node, report.ring_version, report.partitions, report.replicas, report.mode
    );
    let (listed, left): (Vec<&NodeReport>, Vec<&NodeReport>) = by_id(report)
        .into_iter()
        .partition(|n| all || n.status != LEFT);
    let footer = if left.is_empty() {
        String::new()
    } else {
        let ids: Vec<&str> = left.iter().map(|n| n.id.as_str()).collect();
        format!(
            "left the ring (not members; kvctl status --all lists them): {}\n",
            ids.join(", ")
        )
    };
    let rows = listed
        .into_iter()
        .map(|n| {
            let cert = cert_of(certs, &n.id);
            vec![
                n.id.clone(),
                n.addr.clone(),
                or_dash(&n.resp),
                or_dash(&n.admin),
                n.zone.clone(),
                n.host.clone(),
                n.status.clone(),
                yes_no(n.alive).into(),
                format!("{:.1}%", n.ring_share * 100.0),
                if n.transfer.is_empty() {
                    "-".into()
                } else {
                    format!("pulling {}", n.transfer)
                },
                utc_date(cert.not_after),
                or_dash(short_fingerprint(&cert.ca)),
                if cert.trusted.is_empty() {
                    "-".into()
                } else {
                    let short: Vec<&str> =
                        cert.trusted.iter().map(|f| short_fingerprint(f)).collect();
                    short.join(",")
                },
            ]
        })
        .collect();
    header
        + &table(
            &[
                "ID",
                "ADDR",
                "RESP",
                "ADMIN",
                "ZONE",
                "HOST",
                "STATUS",
                "ALIVE",
                "RING SHARE",
                "TRANSFER",
                "CERT EXPIRES",
                "CERT CA",
                "TRUSTS",
            ],
            rows,
        )
        + &footer
}

/// Node `id`'s certificate in `certs`, or an unknown one (0, empty) when
/// there is no such entry (or no report: a node that does not answer
/// `Certs`).
fn cert_of(certs: Option<&CertsReport>, id: &str) -> NodeCert {
    certs
        .and_then(|c| c.nodes.iter().find(|n| n.id == id))
        .cloned()
        .unwrap_or_else(|| NodeCert {
            id: id.to_string(),
            not_after: 0,
            ca: String::new(),
            trusted: Vec::new(),
        })
}

/// The UTC date (`YYYY-MM-DD`) of `unix_secs`, or `-` when it is 0
/// (unknown) or out of range.
pub fn utc_date(unix_secs: u64) -> String {
    i64::try_from(unix_secs)
        .ok()
        .filter(|&s| s > 0)
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .map_or_else(|| "-".into(), |t| t.date().to_string())
}

/// The first 8 hex digits of a CA fingerprint: enough to tell a cluster's
/// old CA from its new one (`--json` has them whole).
pub fn short_fingerprint(fingerprint: &str) -> &str {
    fingerprint.get(..8).unwrap_or(fingerprint)
}

/// The report's nodes in natural order of their ids.
fn by_id(report: &StatusReport) -> Vec<&NodeReport> {
    let mut nodes: Vec<&NodeReport> = report.nodes.iter().collect();
    nodes.sort_by(|a, b| natural_cmp(&a.id, &b.id));
    nodes
}

/// Routing of a key: the [`ExplainReport`] fields, the key, and the hash in
/// hex as well (a 64-bit number loses precision in some JSON readers).
pub fn explain_json(key: &str, report: &ExplainReport) -> Value {
    let replicas: Vec<Value> = report
        .replicas
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "addr": r.addr,
                "zone": r.zone,
                "status": r.status,
                "alive": r.alive,
                "score": r.score,
                "latency_ms": r.latency_ms,
                "excluded": r.excluded,
            })
        })
        .collect();
    let decision: Value = serde_json::from_str(&report.decision).unwrap_or(Value::Null);
    json!({
        "key": key,
        "node": report.node,
        "hash": report.hash,
        "hash_hex": format!("{:016x}", report.hash),
        "partition": report.partition,
        "ring_version": report.ring_version,
        "replicas": replicas,
        "read_order": report.read_order,
        "mode": report.mode,
        "op": report.op,
        "decision": decision,
    })
}

/// Routing of a key for people.
pub fn explain_text(key: &str, report: &ExplainReport) -> String {
    let header = format!(
        "key {}: hash {:016x}, partition {} (ring version {}, answered by {})\n",
        shell_word(key),
        report.hash,
        report.partition,
        report.ring_version,
        report.node
    );
    let rows = report
        .replicas
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                r.addr.clone(),
                r.zone.clone(),
                r.status.clone(),
                yes_no(r.alive).into(),
                format!("{:.3}", r.score),
                r.latency_ms
                    .map_or_else(|| "-".into(), |ms| format!("{ms:.2} ms")),
                r.excluded.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let table = table(
        &[
            "REPLICA", "ADDR", "ZONE", "STATUS", "ALIVE", "SCORE", "LATENCY", "EXCLUDED",
        ],
        rows,
    );
    let detail = crate::routing::parse(&report.decision)
        .map(|r| crate::routing::text(&r))
        .unwrap_or_default();
    format!(
        "{header}{table}read order: {}\nmode {}, {}\n{detail}",
        report.read_order.join(", "),
        report.mode,
        report.op
    )
}

/// Left-aligned columns separated by two spaces, one line per row.
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let header: Vec<String> = headers.iter().map(|h| (*h).to_string()).collect();
    std::iter::once(header)
        .chain(rows)
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            format!("{}\n", cells.join("  ").trim_end())
        })
        .collect()
}

/// `-` for an empty cell.
fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "-".into()
    } else {
        text.into()
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// `word` quoted for a POSIX shell when it needs it, so that a printed
/// command can be pasted back.
fn shell_word(word: &str) -> Cow<'_, str> {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:@%+=,".contains(&b));
    if plain {
        Cow::Borrowed(word)
    } else {
        Cow::Owned(format!("'{}'", word.replace('\'', "'\\''")))
    }
}

#[cfg(test)]
mod tests {
    use kv_client::{ExplainReplica, NodeId, Sibling};
    use kv_types::{Actor, VersionVector};

    use super::*;

    fn actor(n: &str) -> Actor {
        Actor {
            node: NodeId::new(n).unwrap(),
            incarnation: 0xab,
        }
    }

    #[test]
    fn get_json_has_the_contract_shape() {
        let reply = GetReply {
            values: vec![b"hello".to_vec(), vec![0xff]],
            deleted: false,
            context: vec![1, 2, 255],
        };
        assert_eq!(
            get_json("k", &reply),
            json!({"key": "k", "values": ["aGVsbG8=", "/w=="], "deleted": false, "context": "AQL_"})
        );
        assert_eq!(get_text(&reply), "hello\n\u{fffd}\n");
        let gone = GetReply {
            values: vec![],
            deleted: true,
            context: vec![],
        };
        assert_eq!(
            get_json("k", &gone),
            json!({"key": "k", "values": [], "deleted": true, "context": ""})
        );
    }

    #[test]
    fn printed_contexts_are_accepted_back() {
        let context = VersionVector::from_pairs([(actor("node3"), 42)])
            .to_context()
            .unwrap();
        let reply = GetReply {
            values: vec![b"v".to_vec()],
            deleted: false,
            context: context.clone(),
        };
        let printed = get_json("k", &reply)["context"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(kv_client::decode_context(&printed).unwrap(), context);
        let note = siblings_note("k", 2, &context);
        let from_note = note.rsplit(' ').next().unwrap();
        assert_eq!(kv_client::decode_context(from_note).unwrap(), context);
    }

    #[test]
    fn written_json_has_the_contract_shape() {
        assert_eq!(
            written_json("k", &[1, 2, 255]),
            json!({"key": "k", "context": "AQL_"})
        );
    }

    #[test]
    fn deleted_json_says_whether_there_was_a_value_when_it_read() {
        assert_eq!(
            deleted_json("k", &[1, 2, 255], Some(false)),
            json!({"key": "k", "context": "AQL_", "existed": false})
        );
        assert_eq!(
            deleted_json("k", &[1, 2, 255], None),
            written_json("k", &[1, 2, 255])
        );
    }

    #[test]
    fn the_siblings_note_is_a_command_to_paste() {
        assert_eq!(
            siblings_note("k", 2, &[1, 2, 255]),
            "2 siblings; resolve with: kvctl put k VALUE --context AQL_"
        );
        assert!(siblings_note("a b", 2, &[]).contains("put 'a b' VALUE"));
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }

    #[test]
    fn local_views_show_dots_values_and_tombstones() {
        let a = actor("node1");
        let put = Object::new().update(
            &VersionVector::new(),
            &a,
            Sibling {
                data: Some(b"v1".to_vec()),
                written_at_ms: 10,
            },
        );
        let both = put.update(
            &VersionVector::new(),
            &a,
            Sibling {
                data: None,
                written_at_ms: 20,
            },
        );
        assert_eq!(
            local_text(&both),
            "node1#ab:2  <tombstone>\nnode1#ab:1  v1\n"
        );
        assert_eq!(
            local_json("node1", "k", &both),
            json!({
                "node": "node1",
                "key": "k",
                "versions": [
                    {"actor": "node1", "incarnation": 171, "counter": 2, "value": null,
                     "tombstone": true, "written_at_ms": 20},
                    {"actor": "node1", "incarnation": 171, "counter": 1, "value": "djE=",
                     "tombstone": false, "written_at_ms": 10},
                ],
                "clock": [{"actor": "node1", "incarnation": 171, "counter": 2}],
            })
        );
    }

    fn status() -> StatusReport {
        StatusReport {
            node: "node1".into(),
            ring_version: 7,
            partitions: 1024,
            replicas: 3,
            nodes: vec![NodeReport {
                id: "node2".into(),
                addr: "127.0.0.1:7102".into(),
                zone: "z1".into(),
                host: "h1".into(),
                status: "UP".into(),
                alive: true,
                ring_share: 0.25,
                transfer: String::new(),
                resp: "127.0.0.1:6382".into(),
                admin: String::new(),
            }],
            mode: "scoring".into(),
        }
    }

    #[test]
    fn status_has_the_contract_shape() {
        let v = status_json(&status(), None);
        assert_eq!(v["ring_version"], 7);
        assert_eq!(
            v["nodes"],
            json!([{"id": "node2", "addr": "127.0.0.1:7102", "resp": "127.0.0.1:6382",
                    "admin": "", "zone": "z1", "host": "h1",
                    "status": "UP", "alive": true, "ring_share": 0.25, "transfer": "",
                    "cert_not_after": null, "cert_ca": "", "trusted_cas": []}])
        );
        let text = status_text(&status(), None, false);
        assert_eq!(
            text,
            "answered by node1: ring version 7, 1024 partitions, 3 replicas per key, router mode scoring\n\
             ID     ADDR            RESP            ADMIN  ZONE  HOST  STATUS  ALIVE  RING SHARE  TRANSFER  CERT EXPIRES  CERT CA  TRUSTS\n\
             node2  127.0.0.1:7102  127.0.0.1:6382  -      z1    h1    UP      yes    25.0%       -         -             -        -\n"
        );
    }

    #[test]
    fn status_shows_each_nodes_certificate() {
        let report = status();
        let (old, new) = ("ab".repeat(32), "cd".repeat(32));
        let certs = CertsReport {
            node: "node1".into(),
            nodes: vec![NodeCert {
                id: "node2".into(),
                not_after: 1_893_456_000,
                ca: new.clone(),
                trusted: vec![old.clone(), new.clone()],
            }],
        };
        let v = status_json(&report, Some(&certs));
        assert_eq!(v["nodes"][0]["cert_not_after"], 1_893_456_000);
        assert_eq!(v["nodes"][0]["cert_ca"], new.as_str());
        assert_eq!(v["nodes"][0]["trusted_cas"], json!([old, new]));
        let text = status_text(&report, Some(&certs), false);
        let row = text.lines().nth(2).unwrap();
        assert!(
            row.ends_with("2030-01-01    cdcdcdcd  abababab,cdcdcdcd"),
            "{row}"
        );
        // A report without the node, or none at all: unknown.
        let other = CertsReport {
            node: "node1".into(),
            nodes: Vec::new(),
        };
        for certs in [Some(&other), None] {
            let v = status_json(&report, certs);
            assert_eq!(v["nodes"][0]["cert_not_after"], Value::Null);
            assert!(
                status_text(&report, certs, false)
                    .lines()
                    .nth(2)
                    .unwrap()
                    .ends_with("-             -        -")
            );
        }
        assert_eq!(utc_date(0), "-");
        assert_eq!(utc_date(u64::MAX), "-");
        assert_eq!(utc_date(86_399), "1970-01-01");
    }

    #[test]
    fn status_sorts_node10_after_node9() {
        let mut report = status();
        let template = report.nodes[0].clone();
        report.nodes = ["node10", "node1", "node2", "node9"]
            .iter()
            .map(|id| NodeReport {
                id: (*id).into(),
                ..template.clone()
            })
            .collect();
        let ids: Vec<Value> = status_json(&report, None)["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].clone())
            .collect();
        assert_eq!(ids, ["node1", "node2", "node9", "node10"]);
        let text = status_text(&report, None, false);
        let rows: Vec<&str> = text
            .lines()
            .skip(2)
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert_eq!(rows, ["node1", "node2", "node9", "node10"]);
    }

    #[test]
    fn left_nodes_are_no_rows_of_the_table_unless_asked_for() {
        let mut report = status();
        let template = report.nodes[0].clone();
        report.nodes = [("node10", "LEFT"), ("node2", "UP"), ("node6", "LEFT")]
            .iter()
            .map(|(id, status)| NodeReport {
                id: (*id).into(),
                status: (*status).into(),
                ..template.clone()
            })
            .collect();
        let text = status_text(&report, None, false);
        let rows: Vec<&str> = text
            .lines()
            .skip(2)
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert_eq!(rows, ["node2", "left"], "{text}");
        assert!(
            text.ends_with(
                "left the ring (not members; kvctl status --all lists them): node6, node10\n"
            ),
            "{text}"
        );
        let all = status_text(&report, None, true);
        let rows: Vec<&str> = all
            .lines()
            .skip(2)
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert_eq!(rows, ["node2", "node6", "node10"], "{all}");
        assert!(!all.contains("left the ring"), "{all}");
        // The JSON keeps every node, each with its status.
        let ids: Vec<Value> = status_json(&report, None)["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].clone())
            .collect();
        assert_eq!(ids, ["node2", "node6", "node10"]);
    }

    #[test]
    fn natural_order_compares_digit_runs_as_numbers() {
        let mut names = vec![
            "node10", "node2", "node1", "node02", "a", "", "node", "node1b", "node1a", "zone-c",
            "node100",
        ];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            [
                "", "a", "node", "node1", "node1a", "node1b", "node2", "node02", "node10",
                "node100", "zone-c"
            ]
        );
        assert_eq!(natural_cmp("node7", "node7"), Ordering::Equal);
    }

    #[test]
    fn printed_text_always_ends_with_a_newline() {
        assert_eq!(terminated(""), "");
        assert_eq!(terminated("a"), "a\n");
        assert_eq!(terminated("a\n"), "a\n");
        assert_eq!(terminated("a\nb"), "a\nb\n");
    }

    #[test]
    fn explain_shows_every_field() {
        let report = ExplainReport {
            node: "node1".into(),
            hash: u64::MAX,
            partition: 1023,
            ring_version: 7,
            replicas: vec![ExplainReplica {
                id: "node2".into(),
                addr: "127.0.0.1:7102".into(),
                zone: "z1".into(),
                status: "UP".into(),
                alive: false,
                score: 0.5,
                latency_ms: None,
                excluded: Some("dead".into()),
            }],
            read_order: vec!["node3".into(), "node2".into()],
            mode: "scoring".into(),
            op: "get".into(),
            decision: String::new(),
        };
        let v = explain_json("k", &report);
        assert_eq!(v["hash"], u64::MAX);
        assert_eq!(v["hash_hex"], "ffffffffffffffff");
        assert_eq!(v["partition"], 1023);
        assert_eq!(v["replicas"][0]["excluded"], "dead");
        assert_eq!(v["replicas"][0]["latency_ms"], Value::Null);
        assert_eq!(v["read_order"], json!(["node3", "node2"]));
        let text = explain_text("k", &report);
        assert!(text.starts_with("key k: hash ffffffffffffffff, partition 1023"));
        assert!(
            text.contains("node2    127.0.0.1:7102  z1    UP      no     0.500  -        dead")
        );
        assert!(text.contains("read order: node3, node2\nmode scoring, get\n"));
        assert_eq!(v["mode"], "scoring");
    }
}
