//! libFuzzer entry of `kv_fuzz_targets::frame`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kv_fuzz_targets::frame(data));
