#!/usr/bin/env bash
# The whole test suite, with everything it needs, on a machine that has only
# the Rust toolchain, Python 3 and apt:
#   1. a Python virtual environment with the pinned, hash-checked packages
#      the tests drive (tests/python/requirements.txt), created or updated
#      when the lock file changed;
#   2. the release build of the tests (one cargo profile for the demo and the
#      tests, so DuckDB's C++ is compiled once);
#   3. the tests.
# Each phase prints how long it took. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
venv="${ATTEMPT_LEDGER_TEST_VENV:-$target_dir/test-venv}"
lock="tests/python/requirements.txt"

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

apt_install() {
  if ! command -v apt-get >/dev/null; then
    echo "error: need the Debian packages $*, and apt-get is not here" >&2
    exit 1
  fi
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

phase "python set-up"
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  rm -rf "$venv"
  # Debian's python3 ships venv (with ensurepip) as a separate package.
  if ! python3 -m venv "$venv" 2>/dev/null; then
    rm -rf "$venv"
    apt_install python3-venv
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r "$lock"
  echo "$want" >"$stamp"
fi
export ATTEMPT_LEDGER_TEST_PYTHON="$venv/bin/python"

phase "build"
cargo test --release --locked --no-run

phase "tests"
cargo test --release --locked "$@"
phase ""
