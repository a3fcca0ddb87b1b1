//! Target of the RESP front door's parser and command layer (`kv-resp`).

use bytes::{Bytes, BytesMut};
use kv_resp::parse::{Limits, RequestParser};
use kv_resp::{Error, command};

/// Small bounds, so that inputs reach every limit.
const SMALL: Limits = Limits {
    max_args: 8,
    max_bulk: 64,
    max_inline: 128,
    max_request: 256,
};

/// The node's own bounds (`node/src/resp.rs`).
const NODE: Limits = Limits {
    max_args: 4096,
    max_bulk: 1 << 20,
    max_inline: 64 * 1024,
    max_request: 4 * (1 << 20) + 64 * 1024,
};

/// What one parse of a stream gave: each request's arguments or error, in
/// order, up to the first fatal error.
type Outcome = Vec<Result<Vec<Bytes>, Error>>;

/// Bytes from a client: the first byte picks the bounds and how the rest
/// arrives (whole, or in pieces of 1..=32 bytes); the requests must be
/// the same either way, each must survive being written back as a RESP
/// array and parsed again, and each goes through the command layer.
pub fn resp(data: &[u8]) {
    let Some((&first, input)) = data.split_first() else {
        return;
    };
    let limits = if first & 0x80 == 0 { SMALL } else { NODE };
    let whole = parse(limits, input, input.len().max(1));
    let piece = usize::from(first & 0x1f) + 1;
    let pieces = parse(limits, input, piece);
    assert_eq!(whole, pieces, "pieces of {piece} bytes parse differently");
    for args in whole.iter().flatten() {
        let again = parse(limits, &encode(args), usize::MAX);
        assert_eq!(
            again,
            vec![Ok(args.clone())],
            "a request does not survive RESP"
        );
        let _ = command::parse(args.clone());
    }
}

fn parse(limits: Limits, input: &[u8], piece: usize) -> Outcome {
    let mut parser = RequestParser::new(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in input.chunks(piece.max(1)) {
        buf.extend_from_slice(chunk);
        loop {
            match parser.next(&mut buf) {
                Ok(Some(args)) => out.push(Ok(args)),
                Ok(None) => break,
                Err(e) => {
                    let fatal = matches!(e, Error::Fatal(_));
                    out.push(Err(e));
                    if fatal {
                        return out;
                    }
                }
            }
        }
    }
    out
}

/// `args` as a RESP2 array of bulk strings.
fn encode(args: &[Bytes]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}
