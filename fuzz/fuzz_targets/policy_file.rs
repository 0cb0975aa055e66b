#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| attempt_core::fuzzing::policy_file(data));
