#!/usr/bin/env bash
# Fuzzes every target of attempt-core for SECONDS each (default 300) with
# libFuzzer and AddressSanitizer, on nightly Rust (`cargo install cargo-fuzz`
# once). Not part of CI: the corpus it grows is replayed there on stable by
# crates/attempt-core/tests/fuzz_corpus.rs. A crash is written to
# fuzz/artifacts/<target>/; copy it into fuzz/corpus/<target>/ (a regression
# case from then on) and fix the decoder.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-300}"
shift || true
export CARGO_TARGET_DIR="${CARGO_FUZZ_TARGET_DIR:-$HOME/.cache/attempt-ledger-fuzz-target}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build -O
for target in "${targets[@]}"; do
  log="$CARGO_TARGET_DIR/fuzz-$target.log"
  # 64 KiB inputs, 2 GiB RSS: an allocation past that is a finding too.
  if ! cargo +nightly fuzz run -O "$target" "corpus/$target" -- \
      -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -print_final_stats=1 >"$log" 2>&1; then
    echo "$target: FAILED, see $log and fuzz/artifacts/$target/" >&2
    tail -40 "$log" >&2
    exit 1
  fi
  runs=$(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' || echo '?')
  cov=$(grep -o 'stat::new_units_added: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  peak=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  echo "$target: $runs executions in ${seconds} s, $cov new inputs, peak RSS ${peak} MB, corpus $(ls "corpus/$target" | wc -l) files"
done
