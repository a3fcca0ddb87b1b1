//! The round-trip check shared by the codec-based targets.

use serde::Serialize;
use serde::de::DeserializeOwned;

use kv_types::codec;

/// Checks that `value` (just decoded) encodes, decodes back, and that what
/// comes back encodes to the same bytes: decode, encode, decode equal.
/// Returns the value decoded back.
pub fn check<T: Serialize + DeserializeOwned>(value: &T) -> T {
    let bytes = codec::encode(value).expect("a decoded value must encode");
    let back: T = codec::decode(&bytes).expect("an encoded value must decode");
    let again = codec::encode(&back).expect("a decoded value must encode");
    assert_eq!(again, bytes, "decode(encode(x)) differs from x");
    back
}
