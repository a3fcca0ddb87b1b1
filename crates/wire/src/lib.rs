//! Wire protocol: message enums, versioned length-prefixed frames, the codec; no I/O.
