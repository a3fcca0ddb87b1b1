//! From a request's arguments to a [`Command`]: the name, the arity, and
//! the bounds on keys, checked before anything runs.
//!
//! Names are matched without regard to case and without allocating. Errors
//! are the texts Redis uses where one exists (`unknown command`, `wrong
//! number of arguments`), so tools that match on them keep working.

use bytes::Bytes;
use kv_types::limits::check_key;

use crate::Error;

/// One parsed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `PING [message]`.
    Ping(Option<Bytes>),
    /// `ECHO message`.
    Echo(Bytes),
    /// `GET key`.
    Get(Bytes),
    /// `SET key value` (no options: this store has no expiry and no
    /// conditional writes).
    Set(Bytes, Bytes),
    /// `DEL key [key ...]`.
    Del(Vec<Bytes>),
    /// `EXISTS key [key ...]`.
    Exists(Vec<Bytes>),
    /// `MGET key [key ...]`.
    MGet(Vec<Bytes>),
    /// `MSET key value [key value ...]`.
    MSet(Vec<(Bytes, Bytes)>),
    /// `INFO [section ...]` (the sections, lowercased).
    Info(Vec<String>),
    /// `COMMAND [COUNT | DOCS ... | INFO name ... | LIST]`.
    Introspect(Vec<Bytes>),
    /// `CONFIG GET pattern ...` (what redis-benchmark asks at startup).
    ConfigGet(Vec<Bytes>),
    /// `AUTH [username] password`.
    Auth(Option<Bytes>, Bytes),
    /// `HELLO [protover [AUTH username password] [SETNAME name]]`.
    Hello(Option<Bytes>, Option<(Bytes, Bytes)>),
    /// `SELECT index`: only database 0 exists.
    Select(Bytes),
    /// `CLIENT subcommand ...`: SETNAME, GETNAME, ID, SETINFO, INFO.
    Client(Vec<Bytes>),
    /// `QUIT`: answer +OK and close.
    Quit,
    /// `RESET`: back to unauthenticated, answer +RESET.
    Reset,
}

impl Command {
    /// The lowercase name of a data command, for metrics; `None` for
    /// connection and server commands.
    pub fn data_op(&self) -> Option<&'static str> {
        Some(match self {
            Command::Get(_) => "get",
            Command::Set(..) => "set",
            Command::Del(_) => "del",
            Command::Exists(_) => "exists",
            Command::MGet(_) => "mget",
            Command::MSet(_) => "mset",
            _ => return None,
        })
    }

    /// Whether it may run before AUTH when a password is set.
    pub fn allowed_unauthenticated(&self) -> bool {
        matches!(
            self,
            Command::Auth(..) | Command::Hello(..) | Command::Quit | Command::Reset
        )
    }
}

/// Parses `args` (`args[0]` is the name).
///
/// # Errors
/// Unknown command, wrong arity, a key that is empty or too long, or an
/// option this store does not have.
pub fn parse(mut args: Vec<Bytes>) -> Result<Command, Error> {
    let Some(name) = args.first().cloned() else {
        return Err(Error::Command("empty command".into()));
    };
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    let argc = args.len();
    let arity = |ok: bool| -> Result<(), Error> {
        if ok {
            Ok(())
        } else {
            Err(Error::Command(format!(
                "wrong number of arguments for '{}' command",
                String::from_utf8_lossy(&name).to_lowercase()
            )))
        }
    };
    let mut rest = args.split_off(1);
    let command = if is("GET") {
        arity(argc == 2)?;
        Command::Get(key(rest.remove(0))?)
    } else if is("SET") {
        arity(argc >= 3)?;
        if argc > 3 {
            return Err(Error::Command(format!(
                "SET options ({}) are not supported: this store has no expiry and no conditional writes; use plain SET key value",
                String::from_utf8_lossy(&rest[2])
            )));
        }
        let value = rest.remove(1);
        Command::Set(key(rest.remove(0))?, value)
    } else if is("PING") {
        arity(argc <= 2)?;
        Command::Ping(rest.pop())
    } else if is("ECHO") {
        arity(argc == 2)?;
        Command::Echo(rest.remove(0))
    } else if is("DEL") || is("UNLINK") {
        arity(argc >= 2)?;
        Command::Del(keys(rest)?)
    } else if is("EXISTS") {
        arity(argc >= 2)?;
        Command::Exists(keys(rest)?)
    } else if is("MGET") {
        arity(argc >= 2)?;
        Command::MGet(keys(rest)?)
    } else if is("MSET") {
        arity(argc >= 3 && argc % 2 == 1)?;
        let mut pairs = Vec::with_capacity(rest.len() / 2);
        let mut it = rest.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            pairs.push((key(k)?, v));
        }
        Command::MSet(pairs)
    } else if is("INFO") {
        Command::Info(
            rest.iter()
                .map(|s| String::from_utf8_lossy(s).to_lowercase())
                .collect(),
        )
    } else if is("COMMAND") {
        Command::Introspect(rest)
    } else if is("CONFIG") {
        arity(argc >= 2)?;
        if !rest[0].eq_ignore_ascii_case(b"GET") {
            return Err(Error::Command(format!(
                "CONFIG {} is not supported: configure the node in its TOML file (only CONFIG GET answers)",
                String::from_utf8_lossy(&rest[0]).to_uppercase()
            )));
        }
        arity(argc >= 3)?;
        Command::ConfigGet(rest.split_off(1))
    } else if is("AUTH") {
        arity(argc == 2 || argc == 3)?;
        let password = rest.pop().unwrap_or_default();
        Command::Auth(rest.pop(), password)
    } else if is("HELLO") {
        hello(rest)?
    } else if is("SELECT") {
        arity(argc == 2)?;
        Command::Select(rest.remove(0))
    } else if is("CLIENT") {
        arity(argc >= 2)?;
        Command::Client(rest)
    } else if is("QUIT") {
        Command::Quit
    } else if is("RESET") {
        arity(argc == 1)?;
        Command::Reset
    } else {
        let start: Vec<String> = rest
            .iter()
            .take(4)
            .map(|a| format!("'{}'", String::from_utf8_lossy(&a[..a.len().min(64)])))
            .collect();
        return Err(Error::Command(format!(
            "unknown command '{}', with args beginning with: {}",
            String::from_utf8_lossy(&name[..name.len().min(64)]),
            start.join(" ")
        )));
    };
    Ok(command)
}

/// `HELLO [protover [AUTH username password] [SETNAME name]]`.
fn hello(rest: Vec<Bytes>) -> Result<Command, Error> {
    let mut it = rest.into_iter();
    let version = it.next();
    let mut auth = None;
    while let Some(option) = it.next() {
        if option.eq_ignore_ascii_case(b"AUTH") {
            match (it.next(), it.next()) {
                (Some(user), Some(password)) => auth = Some((user, password)),
                _ => return Err(Error::Command("syntax error in HELLO option 'auth'".into())),
            }
        } else if option.eq_ignore_ascii_case(b"SETNAME") {
            if it.next().is_none() {
                return Err(Error::Command(
                    "syntax error in HELLO option 'setname'".into(),
                ));
            }
        } else {
            return Err(Error::Command(format!(
                "syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&option)
            )));
        }
    }
    Ok(Command::Hello(version, auth))
}

/// A key, checked against the store's key bounds.
fn key(k: Bytes) -> Result<Bytes, Error> {
    check_key(&k).map_err(|e| Error::Command(e.to_string()))?;
    Ok(k)
}

fn keys(list: Vec<Bytes>) -> Result<Vec<Bytes>, Error> {
    list.into_iter().map(key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    fn b(s: &str) -> Bytes {
        Bytes::from(s.to_string())
    }

    #[test]
    fn data_commands_parse_in_any_case() {
        assert_eq!(parse(args(&["get", "k"])), Ok(Command::Get(b("k"))));
        assert_eq!(
            parse(args(&["SeT", "k", "v"])),
            Ok(Command::Set(b("k"), b("v")))
        );
        assert_eq!(
            parse(args(&["MSET", "a", "1", "b", "2"])),
            Ok(Command::MSet(vec![(b("a"), b("1")), (b("b"), b("2"))]))
        );
        assert_eq!(
            parse(args(&["del", "a", "b"])),
            Ok(Command::Del(vec![b("a"), b("b")]))
        );
        assert_eq!(
            parse(args(&["CONFIG", "get", "save"])),
            Ok(Command::ConfigGet(vec![b("save")]))
        );
        assert_eq!(
            parse(args(&["AUTH", "default", "pw"])),
            Ok(Command::Auth(Some(b("default")), b("pw")))
        );
        assert_eq!(parse(args(&["PING"])), Ok(Command::Ping(None)));
    }

    #[test]
    fn bad_commands_get_redis_style_errors() {
        let e = parse(args(&["GET"])).unwrap_err().message().to_string();
        assert_eq!(e, "wrong number of arguments for 'get' command");
        let e = parse(args(&["MSET", "a"]))
            .unwrap_err()
            .message()
            .to_string();
        assert!(e.contains("'mset'"), "{e}");
        let e = parse(args(&["FLUSHALL", "x"]))
            .unwrap_err()
            .message()
            .to_string();
        assert_eq!(
            e,
            "unknown command 'FLUSHALL', with args beginning with: 'x'"
        );
        let e = parse(args(&["SET", "k", "v", "EX", "10"]))
            .unwrap_err()
            .message()
            .to_string();
        assert!(e.contains("no expiry"), "{e}");
        let e = parse(args(&["CONFIG", "SET", "save", ""]))
            .unwrap_err()
            .message()
            .to_string();
        assert!(e.contains("not supported"), "{e}");
        let long = "k".repeat(kv_types::limits::MAX_KEY_BYTES + 1);
        let e = parse(args(&["GET", &long]))
            .unwrap_err()
            .message()
            .to_string();
        assert!(e.contains("exceeds the limit"), "{e}");
        assert!(parse(args(&["GET", ""])).is_err());
        assert!(parse(vec![]).is_err());
    }

    #[test]
    fn only_auth_and_friends_run_before_auth() {
        assert!(
            parse(args(&["AUTH", "pw"]))
                .unwrap()
                .allowed_unauthenticated()
        );
        assert!(
            !parse(args(&["GET", "k"]))
                .unwrap()
                .allowed_unauthenticated()
        );
        assert!(!parse(args(&["PING"])).unwrap().allowed_unauthenticated());
        assert_eq!(parse(args(&["get", "k"])).unwrap().data_op(), Some("get"));
        assert_eq!(parse(args(&["PING"])).unwrap().data_op(), None);
    }
}
