#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| attempt_core::fuzzing::otlp_logs(data));
