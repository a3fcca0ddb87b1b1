//! The on-disk form of a ring: what a node saves after every ring change and
//! starts from before gossip catches up (design.md, Ring; seed 004 section 5.5:
//! "the cache's format must stay compatible with old versions").
//!
//! Layout (all integers little endian):
//!
//! ```text
//! "KVRG"            4 bytes  magic
//! format            u16      1 for the body below
//! crc32             u32      crc32fast (IEEE) over the body
//! body              ..       kv_types::codec (bincode 2 standard) encoding
//! ```
//!
//! Format 1 body: `{ partitions: u32, replicas: u32, zone_redundancy: u32,
//! version: u64, members: [{ id, zone, host: String, weight: u32,
//! status: u8 }] }` with status 0 = JOINING, 1 = UP, 2 = DRAINING,
//! 3 = LEFT. Its structs are private and frozen: they do not follow
//! `kv_types::Member`, so a change there cannot change format 1. Only the
//! inputs of the ring are stored; loading rebuilds the ring from them and
//! checks the stored version against the rebuilt one. A later format gets a
//! new number and a new body struct, and this module keeps decoding format 1
//! forever (the golden test pins its bytes).

use kv_types::{Member, NodeId, NodeStatus, codec};
use serde::{Deserialize, Serialize};

use crate::settings::RingSettings;
use crate::{Error, Result, Ring};

/// Magic number at the start of a persisted ring.
pub const MAGIC: [u8; 4] = *b"KVRG";
/// The format [`Ring::to_bytes`] writes and the newest [`Ring::from_bytes`]
/// reads.
pub const FORMAT: u16 = 1;
/// Bytes before the body: magic, format, crc32.
const HEADER: usize = 4 + 2 + 4;

/// Format 1 body. Frozen: never change, reorder or extend its fields.
#[derive(Serialize, Deserialize)]
struct BodyV1 {
    partitions: u32,
    replicas: u32,
    zone_redundancy: u32,
    version: u64,
    members: Vec<MemberV1>,
}

/// Format 1 member record. Frozen, like [`BodyV1`].
#[derive(Serialize, Deserialize)]
struct MemberV1 {
    id: String,
    zone: String,
    host: String,
    weight: u32,
    status: u8,
}

fn status_code(s: NodeStatus) -> u8 {
    match s {
        NodeStatus::Joining => 0,
        NodeStatus::Up => 1,
        NodeStatus::Draining => 2,
        NodeStatus::Left => 3,
    }
}

fn status_from(code: u8) -> Result<NodeStatus> {
    Ok(match code {
        0 => NodeStatus::Joining,
        1 => NodeStatus::Up,
        2 => NodeStatus::Draining,
        3 => NodeStatus::Left,
        _ => return Err(Error::Corrupt(format!("unknown member status {code}"))),
    })
}

impl Ring {
    /// Serializes the ring's inputs (config, members) and version in the
    /// current [`FORMAT`], framed as the module doc describes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let config = self.config();
        let body = BodyV1 {
            partitions: config.partitions,
            // Validated configs keep both below 256.
            replicas: config.replicas as u32,
            zone_redundancy: config.zone_redundancy as u32,
            version: self.version(),
            members: self
                .members()
                .iter()
                .map(|m| MemberV1 {
                    id: m.id.as_str().to_owned(),
                    zone: m.zone.clone(),
                    host: m.host.clone(),
                    weight: m.weight,
                    status: status_code(m.status),
                })
                .collect(),
        };
        // Encoding plain strings and integers cannot fail below the codec's
        // 64 MiB bound, which a member list never approaches.
        let body = codec::encode(&body).unwrap_or_default();
        let mut out = Vec::with_capacity(HEADER + body.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Reads bytes written by [`Ring::to_bytes`] of this or any older
    /// release and rebuilds the ring.
    ///
    /// # Errors
    /// Those of [`decode`]; any [`Ring::build`] error; and
    /// [`Error::VersionMismatch`] if the rebuilt ring differs from the
    /// stored one (the claim algorithm changed: the stored inputs, from
    /// [`decode`], are still good).
    pub fn from_bytes(bytes: &[u8]) -> Result<Ring> {
        let snapshot = decode(bytes)?;
        let ring = Ring::build(snapshot.config, &snapshot.members)?;
        if ring.version() != snapshot.version {
            return Err(Error::VersionMismatch {
                stored: snapshot.version,
                rebuilt: ring.version(),
            });
        }
        Ok(ring)
    }
}

/// The inputs of a persisted ring, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The ring config.
    pub config: RingSettings,
    /// Every member, whatever its status.
    pub members: Vec<Member>,
    /// The version of the ring built from them when they were written.
    pub version: u64,
}

/// Decodes the inputs of a persisted ring without rebuilding it.
///
/// # Errors
/// [`Error::Corrupt`] for short input, a bad magic, a checksum mismatch or
/// an undecodable body (including an invalid node id or status);
/// [`Error::UnsupportedFormat`] for a format newer than [`FORMAT`].
pub fn decode(bytes: &[u8]) -> Result<Snapshot> {
    if bytes.len() < HEADER {
        return Err(Error::Corrupt(format!(
            "{} bytes, shorter than the {HEADER}-byte header",
            bytes.len()
        )));
    }
    let (header, body) = bytes.split_at(HEADER);
    if header[..4] != MAGIC {
        return Err(Error::Corrupt("bad magic, not a persisted ring".into()));
    }
    let format = u16::from_le_bytes([header[4], header[5]]);
    let crc = u32::from_le_bytes([header[6], header[7], header[8], header[9]]);
    match format {
        1 => {}
        f if f > FORMAT => {
            return Err(Error::UnsupportedFormat {
                found: f,
                newest: FORMAT,
            });
        }
        f => return Err(Error::Corrupt(format!("unknown ring format {f}"))),
    }
    if crc32fast::hash(body) != crc {
        return Err(Error::Corrupt("checksum mismatch".into()));
    }
    let body: BodyV1 =
        codec::decode(body).map_err(|e| Error::Corrupt(format!("format 1 body: {e}")))?;
    let members = body
        .members
        .into_iter()
        .map(|m| {
            Ok(Member {
                id: NodeId::new(m.id).map_err(|e| Error::Corrupt(e.to_string()))?,
                zone: m.zone,
                host: m.host,
                weight: m.weight,
                status: status_from(m.status)?,
            })
        })
        .collect::<Result<Vec<Member>>>()?;
    Ok(Snapshot {
        config: RingSettings {
            partitions: body.partitions,
            replicas: body.replicas as usize,
            zone_redundancy: body.zone_redundancy as usize,
        },
        members,
        version: body.version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden_members() -> Vec<Member> {
        let m = |id: &str, zone: &str, weight, status| Member {
            id: NodeId::new(id).unwrap(),
            zone: zone.into(),
            host: format!("host-{id}"),
            weight,
            status,
        };
        vec![
            m("a", "z1", 1, NodeStatus::Up),
            m("b", "z2", 2, NodeStatus::Joining),
            m("c", "z1", 1, NodeStatus::Draining),
        ]
    }

    fn golden_config() -> RingSettings {
        RingSettings {
            partitions: 16,
            replicas: 2,
            zone_redundancy: 2,
        }
    }

    /// Bytes written by format 1. Never edit: format 1 must decode forever.
    const GOLDEN_V1: &str = concat!(
        "4b5652470100b383aa21100202fd5f0a048823655dc2030161027a3106686f73",
        "742d6101010162027a3206686f73742d6202000163027a3106686f73742d6301",
        "02"
    );

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn format_1_decodes_forever() {
        let bytes = unhex(GOLDEN_V1);
        let snapshot = decode(&bytes).unwrap();
        assert_eq!(snapshot.config, golden_config());
        assert_eq!(snapshot.members, golden_members());
        // And the claim algorithm still builds the ring that was stored.
        let ring = Ring::from_bytes(&bytes).unwrap();
        assert_eq!(ring.version(), snapshot.version);
        // Today's writer still writes format 1 byte for byte (when a
        // format 2 arrives, keep the decode half of this test).
        let built = Ring::build(golden_config(), &golden_members()).unwrap();
        assert_eq!(built.to_bytes(), bytes);
    }

    #[test]
    fn clear_errors_for_bad_input() {
        let ring = Ring::build(golden_config(), &golden_members()).unwrap();
        let good = ring.to_bytes();
        assert!(matches!(decode(&good[..5]), Err(Error::Corrupt(_))));
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(matches!(decode(&bad), Err(Error::Corrupt(_))));
        let mut newer = good.clone();
        newer[4..6].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(
            decode(&newer),
            Err(Error::UnsupportedFormat {
                found: 2,
                newest: 1
            })
        );
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(matches!(decode(&flipped), Err(Error::Corrupt(m)) if m.contains("checksum")));
        // A stored version that no longer matches the rebuilt ring.
        let mut snapshot = decode(&good).unwrap();
        snapshot.version ^= 1;
        let body = BodyV1 {
            partitions: 16,
            replicas: 2,
            zone_redundancy: 2,
            version: snapshot.version,
            members: snapshot
                .members
                .iter()
                .map(|m| MemberV1 {
                    id: m.id.to_string(),
                    zone: m.zone.clone(),
                    host: m.host.clone(),
                    weight: m.weight,
                    status: status_code(m.status),
                })
                .collect(),
        };
        let body = codec::encode(&body).unwrap();
        let mut framed = Vec::from(MAGIC);
        framed.extend_from_slice(&FORMAT.to_le_bytes());
        framed.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        framed.extend_from_slice(&body);
        assert!(matches!(
            Ring::from_bytes(&framed),
            Err(Error::VersionMismatch { .. })
        ));
    }
}
