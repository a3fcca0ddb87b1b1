//! libFuzzer entry of `kv_fuzz_targets::ring`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kv_fuzz_targets::ring(data));
