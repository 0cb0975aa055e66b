#!/usr/bin/env bash
# Regenerates the shipped price table, prices/prices.toml, from the pinned
# copy of LiteLLM's price map: the model_prices_and_context_window.json that
# ships in the litellm package pinned (by version and hash) in
# tests/python/requirements.txt. Every chat, completion, responses and
# embedding model of the providers prices/providers.toml names is converted
# by the product's own `prices import` (docs/prices.md). To move the pin:
# change litellm's version in tests/python/requirements.in, lock it again,
# set AS_OF below to the day you did, run this, and review the diff.
#
#   scripts/prices.sh [--out FILE]   (default prices/prices.toml)
#
# ATTEMPT_LEDGER_BIN names a built binary to run instead of `cargo run`;
# ATTEMPT_LEDGER_TEST_PYTHON an interpreter that has the pinned litellm
# (scripts/python-env.sh makes one). tests/it/prices.rs checks that the
# committed table is this script's output.
set -euo pipefail
cd "$(dirname "$0")/.."

# The day the pinned map was read: each row's as-of date.
AS_OF=2026-12-06

out=prices/prices.toml
if [[ "${1:-}" == "--out" ]]; then
  out="$2"
fi
if [[ -z "${ATTEMPT_LEDGER_TEST_PYTHON:-}" ]]; then
  # shellcheck source=scripts/python-env.sh
  source scripts/python-env.sh
fi
read -r version map < <("$ATTEMPT_LEDGER_TEST_PYTHON" - <<'PY'
import importlib.metadata, importlib.util, os
spec = importlib.util.find_spec("litellm")
folder = spec.submodule_search_locations[0]
print(importlib.metadata.version("litellm"), os.path.join(folder, "model_prices_and_context_window_backup.json"))
PY
)
if [[ -n "${ATTEMPT_LEDGER_BIN:-}" ]]; then
  run=("$ATTEMPT_LEDGER_BIN")
else
  run=(cargo run --release --locked --features iceberg --quiet --)
fi
"${run[@]}" prices import --from litellm "$map" --as-of "$AS_OF" \
  --source "LiteLLM $version, model_prices_and_context_window.json" --out "$out"
