#!/usr/bin/env bash
# The crash test (scripts/crash_test.py): SIGKILL the service at random
# moments while clients post batches, restart it, and check that every
# acknowledged record is stored exactly once.
#   scripts/crash-test.sh [ROUNDS]        (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/python-env.sh
source scripts/python-env.sh
cargo build --release --locked --features iceberg --quiet
export ATTEMPT_LEDGER_BIN="$target_dir/release/attempt-ledger"
exec "$ATTEMPT_LEDGER_TEST_PYTHON" scripts/crash_test.py "$@"
