//! Answers about the server rather than the data: INFO, COMMAND, CONFIG
//! GET, HELLO and CLIENT, enough for `redis-cli` and `redis-benchmark`
//! (which asks `CONFIG GET save` and `CONFIG GET appendonly` at startup).

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use bytes::{Bytes, BytesMut};

use super::{Core, reply};

/// The Redis version this listener answers as (INFO `redis_version`, HELLO):
/// the command subset behaves as Redis 7.0's.
const REDIS_VERSION: &str = "7.0.0";

/// The commands served: name, arity (negative: at least), flags, first key,
/// last key, key step (the `COMMAND` reply of Redis before 7).
const COMMANDS: [(&str, i64, &str, i64, i64, i64); 17] = [
    ("get", 2, "readonly", 1, 1, 1),
    ("set", 3, "write", 1, 1, 1),
    ("del", -2, "write", 1, -1, 1),
    ("unlink", -2, "write", 1, -1, 1),
    ("exists", -2, "readonly", 1, -1, 1),
    ("mget", -2, "readonly", 1, -1, 1),
    ("mset", -3, "write", 1, -1, 2),
    ("ping", -1, "fast", 0, 0, 0),
    ("echo", 2, "fast", 0, 0, 0),
    ("info", -1, "loading", 0, 0, 0),
    ("command", -1, "loading", 0, 0, 0),
    ("config", -2, "admin", 0, 0, 0),
    ("auth", -2, "noscript", 0, 0, 0),
    ("hello", -1, "noscript", 0, 0, 0),
    ("select", 2, "fast", 0, 0, 0),
    ("client", -2, "admin", 0, 0, 0),
    ("quit", -1, "fast", 0, 0, 0),
];

impl Core {
    /// `INFO [section ...]`: server, clients, stats, kvstore and keyspace
    /// sections (all of them without an argument).
    pub(super) fn info(&self, sections: &[String], out: &mut BytesMut) {
        let want = |s: &str| {
            sections.is_empty()
                || sections
                    .iter()
                    .any(|w| w == s || w == "all" || w == "everything" || w == "default")
        };
        let mut text = String::new();
        let me = self.cluster.me();
        if want("server") {
            let _ = write!(
                text,
                "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_mode:standalone\r\nkvstore_version:{}\r\nnode_id:{}\r\nzone:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\n\r\n",
                env!("CARGO_PKG_VERSION"),
                me.id,
                me.zone,
                self.settings.listen.port(),
                self.started.elapsed().as_secs()
            );
        }
        if want("clients") {
            let _ = write!(
                text,
                "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n\r\n",
                self.stats.connections.load(Relaxed),
                self.settings.max_connections
            );
        }
        if want("stats") {
            let _ = write!(
                text,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:{}\r\n\r\n",
                self.stats.accepted.load(Relaxed),
                self.stats.commands.load(Relaxed),
                self.stats.rejected.load(Relaxed)
            );
        }
        if want("kvstore") {
            let ring = self.cluster.ring();
            let alive = ring
                .members()
                .iter()
                .filter(|m| self.cluster.is_alive(&m.id))
                .count();
            let defaults = self.coordinator.quorums();
            let (r, w) = (
                self.settings.r.map_or(defaults.r, usize::from),
                self.settings.w.map_or(defaults.w, usize::from),
            );
            let _ = write!(
                text,
                "# Kvstore\r\nring_version:{}\r\nring_members:{}\r\nnodes_alive:{alive}\r\nreplicas:{}\r\nresp_r:{}\r\nresp_w:{}\r\nsibling_rule:{}\r\n\r\n",
                ring.version(),
                ring.members().len(),
                ring.config().replicas,
                r,
                w,
                self.settings.siblings.as_str()
            );
        }
        if want("keyspace") {
            text.push_str("# Keyspace\r\n");
        }
        reply::bulk(out, text.as_bytes());
    }

    /// `COMMAND`, `COMMAND COUNT`, `COMMAND INFO name ...`, `COMMAND DOCS`
    /// (empty: redis-cli then shows no hints) and `COMMAND LIST`.
    pub(super) fn command(&self, args: &[Bytes], out: &mut BytesMut) {
        let sub = args.first();
        let is = |name: &str| sub.is_some_and(|s| s.eq_ignore_ascii_case(name.as_bytes()));
        if sub.is_none() {
            reply::array(out, COMMANDS.len());
            for entry in COMMANDS {
                command_entry(out, entry);
            }
        } else if is("COUNT") {
            reply::integer(out, COMMANDS.len() as i64);
        } else if is("DOCS") {
            reply::array(out, 0);
        } else if is("LIST") {
            reply::array(out, COMMANDS.len());
            for (name, ..) in COMMANDS {
                reply::bulk(out, name.as_bytes());
            }
        } else if is("INFO") {
            reply::array(out, args.len() - 1);
            for name in &args[1..] {
                match COMMANDS
                    .iter()
                    .find(|(n, ..)| name.eq_ignore_ascii_case(n.as_bytes()))
                {
                    Some(entry) => command_entry(out, *entry),
                    None => reply::null(out),
                }
            }
        } else {
            reply::err(
                out,
                "unknown COMMAND subcommand; try COMMAND, COMMAND COUNT, COMMAND INFO, COMMAND LIST or COMMAND DOCS",
            );
        }
    }

    /// `CONFIG GET pattern ...`: `save` is empty (no RDB snapshots) and
    /// `appendonly` is `no` (durability is sled's group commit, not an AOF);
    /// `maxclients`, `port` and `bind` tell the truth; anything else is
    /// not a Redis setting here (an empty answer, as Redis gives for an
    /// unknown pattern).
    pub(super) fn config_get(&self, patterns: &[Bytes], out: &mut BytesMut) {
        let values = [
            ("save", String::new()),
            ("appendonly", "no".to_string()),
            ("maxclients", self.settings.max_connections.to_string()),
            ("port", self.settings.listen.port().to_string()),
            ("bind", self.settings.listen.ip().to_string()),
            ("databases", "1".to_string()),
        ];
        let matched: Vec<&(&str, String)> = values
            .iter()
            .filter(|(name, _)| {
                patterns
                    .iter()
                    .any(|p| p.as_ref() == b"*" || p.eq_ignore_ascii_case(name.as_bytes()))
            })
            .collect();
        reply::array(out, matched.len() * 2);
        for (name, value) in matched {
            reply::bulk(out, name.as_bytes());
            reply::bulk(out, value.as_bytes());
        }
    }

    /// The RESP2 `HELLO` answer: server facts as a flat array of pairs.
    pub(super) fn hello(&self, out: &mut BytesMut) {
        let id = self.node.to_string();
        let pairs: [(&str, &[u8]); 5] = [
            ("server", b"redis"),
            ("version", REDIS_VERSION.as_bytes()),
            ("mode", b"standalone"),
            ("role", b"master"),
            ("node", id.as_bytes()),
        ];
        // The pairs, then `proto` and `modules`.
        reply::array(out, pairs.len() * 2 + 4);
        for (name, value) in &pairs {
            reply::bulk(out, name.as_bytes());
            reply::bulk(out, value);
        }
        reply::bulk(out, b"proto");
        reply::integer(out, 2);
        reply::bulk(out, b"modules");
        reply::array(out, 0);
    }

    /// `CLIENT SETNAME|SETINFO` (accepted, not kept), `GETNAME` (nil), `ID`.
    pub(super) fn client(&self, args: &[Bytes], connection_id: u64, out: &mut BytesMut) {
        let sub = &args[0];
        if sub.eq_ignore_ascii_case(b"SETNAME") || sub.eq_ignore_ascii_case(b"SETINFO") {
            reply::ok(out);
        } else if sub.eq_ignore_ascii_case(b"GETNAME") {
            reply::null(out);
        } else if sub.eq_ignore_ascii_case(b"ID") {
            reply::integer(out, i64::try_from(connection_id).unwrap_or(i64::MAX));
        } else {
            reply::err(
                out,
                &format!(
                    "CLIENT {} is not supported (SETNAME, SETINFO, GETNAME and ID are)",
                    String::from_utf8_lossy(&sub[..sub.len().min(32)]).to_uppercase()
                ),
            );
        }
    }
}

/// One `COMMAND` entry: name, arity, flags, first key, last key, step.
fn command_entry(
    out: &mut BytesMut,
    (name, arity, flag, first, last, step): (&str, i64, &str, i64, i64, i64),
) {
    reply::array(out, 6);
    reply::bulk(out, name.as_bytes());
    reply::integer(out, arity);
    reply::array(out, 1);
    reply::simple(out, flag);
    reply::integer(out, first);
    reply::integer(out, last);
    reply::integer(out, step);
}
