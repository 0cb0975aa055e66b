# Sourced by scripts/test.sh and scripts/bench.sh: makes sure the Python
# virtual environment with the pinned, hash-checked packages of
# tests/python/requirements.txt exists (in the cargo target directory), and
# exports ATTEMPT_LEDGER_TEST_PYTHON, its interpreter. The environment is
# rebuilt when the lock file changes. Debian's python3 lacks venv until
# python3-venv is installed: then it is installed with apt.

target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
venv="${ATTEMPT_LEDGER_TEST_VENV:-$target_dir/test-venv}"
lock="tests/python/requirements.txt"

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

stamp="$venv/.requirements.sha256"
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    rm -rf "$venv"
    apt_install python3-venv
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r "$lock"
  echo "$want" >"$stamp"
fi
export ATTEMPT_LEDGER_TEST_PYTHON="$venv/bin/python"
