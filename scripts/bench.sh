#!/usr/bin/env bash
# The benchmark harness (scripts/bench.py): attempt-ledger's ingest, reports
# and alert evaluation against DuckDB's own JSON loader on the same file, with
# wall time and peak RSS of each step.
#   scripts/bench.sh [ATTEMPTS]        (default 1,000,000)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/python-env.sh
source scripts/python-env.sh
cargo build --release --locked --features iceberg --quiet
export ATTEMPT_LEDGER_BIN="$target_dir/release/attempt-ledger"
# The load generator (benches/load.rs) and the stored-column scans
# (benches/scan.rs), in the same profile: their paths from cargo's own
# report of what it built.
bench_bins=$(cargo build --release --locked --features iceberg --quiet --bench load --bench scan --message-format=json |
  "$ATTEMPT_LEDGER_TEST_PYTHON" -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("load", "scan"):
        print(m["target"]["name"], m["executable"])')
ATTEMPT_LEDGER_LOAD_BIN=$(awk '$1 == "load" {print $2}' <<<"$bench_bins")
ATTEMPT_LEDGER_SCAN_BIN=$(awk '$1 == "scan" {print $2}' <<<"$bench_bins")
export ATTEMPT_LEDGER_LOAD_BIN ATTEMPT_LEDGER_SCAN_BIN
exec "$ATTEMPT_LEDGER_TEST_PYTHON" scripts/bench.py "$@"
