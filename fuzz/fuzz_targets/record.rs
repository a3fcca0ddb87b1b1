//! libFuzzer entry of `kv_fuzz_targets::record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kv_fuzz_targets::record(data));
