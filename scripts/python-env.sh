# Sourced by scripts/test.sh and scripts/bench.sh: makes sure the Python
# virtual environments with the pinned, hash-checked packages of
# tests/python/requirements.txt, tests/python/openlit/requirements.txt,
# tests/python/litellm_proxy/requirements.txt,
# tests/python/frameworks/requirements.txt, tests/python/s3/requirements.txt,
# tests/python/iceberg/requirements.txt, tests/python/rest_catalog/requirements.txt
# and tests/python/lake/requirements.txt exist (in the cargo target directory),
# and exports their interpreters, ATTEMPT_LEDGER_TEST_PYTHON,
# ATTEMPT_LEDGER_TEST_PYTHON_OPENLIT, ATTEMPT_LEDGER_TEST_PYTHON_LITELLM_PROXY,
# ATTEMPT_LEDGER_TEST_PYTHON_FRAMEWORKS, ATTEMPT_LEDGER_TEST_PYTHON_S3,
# ATTEMPT_LEDGER_TEST_PYTHON_ICEBERG, ATTEMPT_LEDGER_TEST_PYTHON_REST_CATALOG
# and ATTEMPT_LEDGER_TEST_PYTHON_LAKE. Each is
# rebuilt when its lock file changes. Debian's python3 lacks venv until
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

# ensure_venv DIR LOCK: DIR holds LOCK's packages, rebuilt when LOCK changed.
ensure_venv() {
  local dir="$1" lock_file="$2"
  local stamp="$dir/.requirements.sha256"
  local want
  want=$(sha256sum "$lock_file" | cut -d' ' -f1)
  if [[ ! -x "$dir/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
    rm -rf "$dir"
    if ! python3 -m venv "$dir" 2>/dev/null; then
      rm -rf "$dir"
      apt_install python3-venv
      python3 -m venv "$dir"
    fi
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r "$lock_file"
    echo "$want" >"$stamp"
  fi
}

ensure_venv "$venv" "$lock"
export ATTEMPT_LEDGER_TEST_PYTHON="$venv/bin/python"
# OpenLIT pins older SDKs than the main environment's, and the LiteLLM
# proxy an older litellm: each its own environment.
ensure_venv "$venv-openlit" tests/python/openlit/requirements.txt
export ATTEMPT_LEDGER_TEST_PYTHON_OPENLIT="$venv-openlit/bin/python"
ensure_venv "$venv-litellm-proxy" tests/python/litellm_proxy/requirements.txt
export ATTEMPT_LEDGER_TEST_PYTHON_LITELLM_PROXY="$venv-litellm-proxy/bin/python"
# LangChain and LlamaIndex with Arize OpenInference's instrumentations of
# them pin an older openai SDK than the main environment's.
ensure_venv "$venv-frameworks" tests/python/frameworks/requirements.txt
export ATTEMPT_LEDGER_TEST_PYTHON_FRAMEWORKS="$venv-frameworks/bin/python"
# moto's S3 server, which the lake's object-store tests write to
# (tests/it/lake_s3.rs): in the fast tier too, it starts in a second.
ensure_venv "$venv-s3" tests/python/s3/requirements.txt
export ATTEMPT_LEDGER_TEST_PYTHON_S3="$venv-s3/bin/python"
# pyiceberg, which reads the lake's Iceberg table through the same
# PostgreSQL catalog (tests/it/lake_iceberg.rs): in the fast tier too.
ensure_venv "$venv-iceberg" tests/python/iceberg/requirements.txt
export ATTEMPT_LEDGER_TEST_PYTHON_ICEBERG="$venv-iceberg/bin/python"
# An Iceberg REST catalog server (lakana-server), which the REST test commits
# through: in the fast tier too, it starts in a few seconds.
ensure_venv "$venv-rest-catalog" tests/python/rest_catalog/requirements.txt
export ATTEMPT_LEDGER_TEST_PYTHON_REST_CATALOG="$venv-rest-catalog/bin/python"
# Spark and chdb, the engines that read the attempt lake (tests/it/lake.rs;
# not in the fast tier).
if [[ "${ATTEMPT_LEDGER_TEST_FAST:-0}" != 1 ]]; then
  ensure_venv "$venv-lake" tests/python/lake/requirements.txt
  export ATTEMPT_LEDGER_TEST_PYTHON_LAKE="$venv-lake/bin/python"
fi
