#!/usr/bin/env bash
# The memory ceiling test (scripts/memory_ceiling.py): four clients send
# OTLP requests of 100,000 spans at once over HTTP and gRPC, and the
# service's peak memory must stay under its ceiling with every span stored.
#   scripts/memory-ceiling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/python-env.sh
source scripts/python-env.sh
cargo build --release --locked --features iceberg --quiet
export ATTEMPT_LEDGER_BIN="$target_dir/release/attempt-ledger"
exec "$ATTEMPT_LEDGER_TEST_PYTHON" scripts/memory_ceiling.py "$@"
