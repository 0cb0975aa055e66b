#!/usr/bin/env bash
# The soak test (scripts/soak.py): clients send more than the writer can
# commit for SECONDS, and the service's memory must stay flat and every
# answer be a 200 or backpressure (503 with Retry-After).
#   scripts/soak.sh [SECONDS]        (default 300)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/python-env.sh
source scripts/python-env.sh
cargo build --release --locked --features iceberg --quiet
export ATTEMPT_LEDGER_BIN="$target_dir/release/attempt-ledger"
exec "$ATTEMPT_LEDGER_TEST_PYTHON" scripts/soak.py "$@"
