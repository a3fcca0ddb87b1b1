//! libFuzzer entry of `kv_fuzz_targets::load_report`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kv_fuzz_targets::load_report(data));
