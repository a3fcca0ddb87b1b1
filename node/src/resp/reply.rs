//! Reply frames (RESP2), written straight into the connection's output
//! buffer: no intermediate values, one copy of each payload.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};

/// `+OK`.
pub fn ok(out: &mut BytesMut) {
    out.put_slice(b"+OK\r\n");
}

/// A simple string, `+<text>`. `text` must not contain CR or LF (callers
/// pass constants).
pub fn simple(out: &mut BytesMut, text: &str) {
    out.put_u8(b'+');
    out.put_slice(text.as_bytes());
    out.put_slice(b"\r\n");
}

/// An error, `-<CODE> <message>`: `message` is made one line (CR and LF
/// become spaces) so that a reason quoting user input cannot break the
/// framing. `code` is `ERR`, `NOAUTH`, `WRONGPASS`, ...
pub fn error(out: &mut BytesMut, code: &str, message: &str) {
    out.put_u8(b'-');
    out.put_slice(code.as_bytes());
    out.put_u8(b' ');
    for b in message.bytes() {
        out.put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
    }
    out.put_slice(b"\r\n");
}

/// `-ERR <message>`.
pub fn err(out: &mut BytesMut, message: &str) {
    error(out, "ERR", message);
}

/// An integer, `:<n>`.
pub fn integer(out: &mut BytesMut, n: i64) {
    let _ = write!(out, ":{n}\r\n");
}

/// A bulk string, `$<len>` and the bytes.
pub fn bulk(out: &mut BytesMut, data: &[u8]) {
    out.reserve(data.len() + 16);
    let _ = write!(out, "${}\r\n", data.len());
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

/// The null bulk string, `$-1` (a missing key).
pub fn null(out: &mut BytesMut) {
    out.put_slice(b"$-1\r\n");
}

/// The header of an array of `len` elements, which the caller then writes.
pub fn array(out: &mut BytesMut, len: usize) {
    let _ = write!(out, "*{len}\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_encoded_as_redis_does() {
        let mut out = BytesMut::new();
        ok(&mut out);
        simple(&mut out, "PONG");
        err(&mut out, "bad\r\ninput");
        integer(&mut out, -3);
        bulk(&mut out, b"a\r\nb");
        null(&mut out);
        array(&mut out, 2);
        assert_eq!(
            &out[..],
            b"+OK\r\n+PONG\r\n-ERR bad  input\r\n:-3\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n"
        );
    }
}
