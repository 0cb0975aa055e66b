# Sourced by scripts/test.sh: installs the Debian packages the tests drive,
# only those missing (so a machine that has them needs no root and no
# network). Add a package here, never as a manual step in the README.
#   openssl: makes the throw-away CA and certificate of the TLS tests;
#   postgresql: the Iceberg catalog of the lake's table tests, a server each
#   test starts in a folder of its own (tests/it/lake_iceberg.rs);
#   prometheus: scrapes the service and evaluates dashboards/ (promtool too);
#   prometheus-alertmanager: receives the alertmanager receiver's alerts;
#   chromium, chromium-driver: load the built-in dashboard's pages (WebDriver);
#   nodejs, npm: only when npm is missing, to install tests/js (npm ci); the
#   tests run the Node 22 those packages ship, whatever node this one is;
#   default-jre-headless: only when java is missing, for Spark (the lake
#   test; Spark 4 runs on the Java 17 or 21 Debian ships).
# The fast tier (scripts/test.sh --fast) drives none of them but openssl and
# postgresql.
debian_packages=(openssl postgresql)
if [[ "${ATTEMPT_LEDGER_TEST_FAST:-0}" != 1 ]]; then
  debian_packages+=(prometheus prometheus-alertmanager chromium chromium-driver)
  command -v npm >/dev/null || debian_packages+=(nodejs npm)
  command -v java >/dev/null || debian_packages+=(default-jre-headless)
fi
missing=()
for package in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "installing Debian packages: ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
