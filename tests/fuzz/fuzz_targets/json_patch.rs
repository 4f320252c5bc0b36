#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hookscope_fuzz::json_patch(data));
