//! libFuzzer entry of `kv_fuzz_targets::client`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kv_fuzz_targets::client(data));
