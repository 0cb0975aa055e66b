#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| attempt_core::fuzzing::openrouter_jsonl(data));
