#!/usr/bin/env bash
# Regenerates the README's picture of the dashboard: the demo's night of
# incidents on the overview page, as Debian's headless Chromium draws it.
#   scripts/screenshot.sh [OUT.png]    (default docs/dashboard.png)
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-docs/dashboard.png}")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/attempt-ledger-target}"
source scripts/debian-packages.sh
cargo build --release --locked --features iceberg --quiet
bin="$CARGO_TARGET_DIR/release/attempt-ledger"
dir="$(mktemp -d)"
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
"$bin" demo --dir "$dir" > /dev/null 2>&1
"$bin" serve --db "$dir/demo.duckdb" --listen 127.0.0.1:0 --otlp-grpc 127.0.0.1:0 > "$dir/serve.out" 2> "$dir/serve.err" &
pid=$!
for _ in $(seq 100); do
  grep -q "http=" "$dir/serve.out" 2> /dev/null && break
  sleep 0.1
done
addr="$(grep -o 'http=[^ ]*' "$dir/serve.out" | cut -d= -f2)"
[[ -n "$addr" ]] || { cat "$dir/serve.err" >&2; exit 1; }
chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
  --disable-background-networking --disable-component-update --disable-sync --no-first-run \
  --user-data-dir="$dir/profile" --hide-scrollbars --window-size=1280,1500 \
  --screenshot="$out" "http://$addr/" 2> /dev/null
file_size=$(stat -c %s "$out")
echo "wrote $out ($file_size bytes)"
