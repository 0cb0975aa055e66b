#!/usr/bin/env bash
# The whole test suite, with everything it needs, on a machine that has only
# the Rust toolchain, Python 3 and apt:
#   0. the Debian packages the tests drive, when missing
#      (scripts/debian-packages.sh);
#   1. a Python virtual environment with the pinned, hash-checked packages
#      the tests drive (tests/python/requirements.txt), and the npm packages
#      of tests/js/package-lock.json (npm ci), each created or updated when
#      its lock file changed;
#   2. the release build of the tests (one cargo profile for the demo and the
#      tests, so DuckDB's C++ is compiled once);
#   3. the tests.
# Each phase prints how long it took. Extra arguments go to `cargo test`.
#
# `scripts/test.sh --fast` is the tier to run while changing code: it leaves
# out the tests that drive outside runtimes (Spark and ClickHouse, Chromium,
# Node, Prometheus and Alertmanager; FAST_SKIPS below) and does not set
# them up; the Python clients and everything in process still run. CI runs
# the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0
if [[ "${1:-}" == "--fast" ]]; then
  fast=1
  shift
fi
# Test-name filters of the slow tier (tests/it/house.rs checks that each
# names at least one test, so a renamed test does not slip into the fast one).
FAST_SKIPS=(
  lake::three_nodes_make_one_lake           # Spark and chdb
  lake_damage::each_bad_file_is_named_once  # Spark and chdb
  lake_damage::a_lake_of_an_earlier_version # Spark and chdb
  lake_iceberg::clickhouse_reads            # chdb
  dashboard::every_page_renders_in_chromium # Chromium
  ai_sdk::                                  # Node and the Vercel AI SDK
  headroom::the_ai_sdk                      # Node and the Vercel AI SDK
  prometheus::                              # Prometheus and promtool
  alerts::a_real_alertmanager               # Alertmanager
)
export ATTEMPT_LEDGER_TEST_FAST=$fast

phase_started=$SECONDS
phase() {
  local now=$SECONDS
  if [[ -n "${phase_name:-}" ]]; then
    echo "== phase '${phase_name}' took $((now - phase_started)) s" >&2
  fi
  phase_name="$1"
  phase_started=$now
  [[ -n "$1" ]] && echo "== phase '$1'" >&2
  return 0
}

phase "debian packages"
# shellcheck source=scripts/debian-packages.sh
source scripts/debian-packages.sh

phase "python set-up"
# shellcheck source=scripts/python-env.sh
source scripts/python-env.sh

if [[ $fast -eq 0 ]]; then
  phase "node set-up"
  # shellcheck source=scripts/node-env.sh
  source scripts/node-env.sh
fi

phase "build"
cargo test --release --locked --features iceberg --workspace --no-run

phase "tests"
if [[ $fast -eq 1 ]]; then
  skips=()
  for name in "${FAST_SKIPS[@]}"; do skips+=(--skip "$name"); done
  # The skips go after `--`, with any test arguments given.
  has_separator=0
  for arg in "$@"; do [[ "$arg" == "--" ]] && has_separator=1; done
  if [[ $has_separator -eq 1 ]]; then
    cargo test --release --locked --features iceberg --workspace "$@" "${skips[@]}"
  else
    cargo test --release --locked --features iceberg --workspace "$@" -- "${skips[@]}"
  fi
else
  cargo test --release --locked --features iceberg --workspace "$@"
fi
phase ""
