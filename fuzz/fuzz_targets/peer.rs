//! libFuzzer entry of `kv_fuzz_targets::peer`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kv_fuzz_targets::peer(data));
