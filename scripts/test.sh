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
set -euo pipefail
cd "$(dirname "$0")/.."

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

phase "node set-up"
# shellcheck source=scripts/node-env.sh
source scripts/node-env.sh

phase "build"
cargo test --release --locked --workspace --no-run

phase "tests"
cargo test --release --locked --workspace "$@"
phase ""
