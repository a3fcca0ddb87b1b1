//! What a clean close leaves for the next open: the object count and
//! every segment digest, so that opening does not scan every record to
//! rebuild them (the only open-time cost that grows with the data: about
//! 2.5 s for 455,000 records on the benchmark machine, minutes at a
//! hundred million). Hints are counted at every open (their tree is small:
//! `max_hints` bounds it).
//!
//! The sled engine writes one row ([`encode`]) after its final flush, under
//! the database's write guard (no write runs), and flushes it; the next
//! open removes the row and flushes the removal before it serves anything,
//! so the row describes the data only between a clean close and the next
//! open. A crash leaves no row (the open consumed it), and the open after
//! it counts.
//!
//! The files can change while the node is stopped without this engine
//! knowing: bit rot, a tool or an older binary writing to them. So an
//! open that loaded the row verifies it in the background: a paced walk
//! (`sled_engine/verify.rs`) recomputes every segment's digest under the
//! segment's lock and corrects any that differ; a record that fails its
//! checks then drops out of its segment's digest and anti-entropy
//! repairs it, as when the open counted. A walk that found a difference
//! or an unreadable record (or did not finish) leaves the close after it
//! saving nothing: the object count may be off, and the next open counts.
//! Riak's AAE persists its hash trees and rebuilds them in the background
//! the same way.
//!
//! Layout (in a [`crate::record::frame`], whose crc32 covers it all):
//! `[keys: u64 LE][segments: u32 LE][digest: u64 LE] x segments`. A row
//! that fails its checksum, has another segment count or another length is
//! ignored (logged) and the open counts.

use crate::digest::SEGMENTS;
use crate::record;

/// Bytes of the payload before the digests: keys, segment count.
const HEADER: usize = 8 + 4;

/// The object count and digests a clean close saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Saved {
    /// Objects stored.
    pub(crate) keys: u64,
    /// One digest per segment ([`SEGMENTS`] of them).
    pub(crate) digests: Vec<u64>,
}

/// The row for `saved`: a checksummed frame of about 512 KiB.
pub(crate) fn encode(saved: &Saved) -> Vec<u8> {
    let mut payload = Vec::with_capacity(HEADER + saved.digests.len() * 8);
    payload.extend_from_slice(&saved.keys.to_le_bytes());
    // The table always has SEGMENTS cells (2^16), which fits a u32.
    payload.extend_from_slice(&(saved.digests.len() as u32).to_le_bytes());
    for digest in &saved.digests {
        payload.extend_from_slice(&digest.to_le_bytes());
    }
    record::frame(&payload)
}

/// Reads a row made by [`encode`].
///
/// # Errors
/// A sentence naming what is wrong (checksum, segment count, length): the
/// caller logs it and counts the records instead.
pub(crate) fn decode(row: &[u8]) -> std::result::Result<Saved, String> {
    let payload = record::unframe(row).map_err(|e| format!("frame: {e}"))?;
    let (header, body) = payload
        .split_at_checked(HEADER)
        .ok_or_else(|| format!("{} bytes, shorter than its header", payload.len()))?;
    let u64_at = |bytes: &[u8], at: usize| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(word)
    };
    let keys = u64_at(header, 0);
    let segments = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    if segments != SEGMENTS {
        return Err(format!("{segments} segments, not {SEGMENTS}"));
    }
    if body.len() != SEGMENTS as usize * 8 {
        return Err(format!(
            "{} bytes of digests, not {}",
            body.len(),
            SEGMENTS as usize * 8
        ));
    }
    let digests = body.chunks_exact(8).map(|c| u64_at(c, 0)).collect();
    Ok(Saved { keys, digests })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved() -> Saved {
        Saved {
            keys: 455_123,
            digests: (0..u64::from(SEGMENTS))
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .collect(),
        }
    }

    #[test]
    fn round_trips() {
        let row = encode(&saved());
        assert_eq!(
            row.len(),
            HEADER + SEGMENTS as usize * 8 + record::FRAME_OVERHEAD
        );
        assert_eq!(decode(&row), Ok(saved()));
    }

    #[test]
    fn a_flipped_bit_anywhere_is_refused() {
        let row = encode(&saved());
        for at in [0, 1, 9, 13, row.len() / 2, row.len() - 1] {
            let mut bad = row.clone();
            bad[at] ^= 0x10;
            assert!(decode(&bad).is_err(), "flip at byte {at} was accepted");
        }
    }

    #[test]
    fn another_segment_count_or_length_is_refused() {
        let mut fewer = saved();
        fewer.digests.truncate(1024);
        let err = decode(&encode(&fewer)).expect_err("1024 segments");
        assert!(err.contains("1024 segments"), "{err}");
        assert!(decode(&record::frame(&[0u8; 12])).is_err());
        assert!(decode(&[]).is_err());
        // The right count with a digest missing.
        let mut short = Vec::new();
        short.extend_from_slice(&1u64.to_le_bytes());
        short.extend_from_slice(&SEGMENTS.to_le_bytes());
        short.resize(HEADER + (SEGMENTS as usize - 1) * 8, 0);
        let err = decode(&record::frame(&short)).expect_err("a digest short");
        assert!(err.contains("bytes of digests"), "{err}");
    }
}
