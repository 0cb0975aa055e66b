"""The benchmark harness: attempt-ledger against DuckDB itself, on one file.

    scripts/bench.sh [ATTEMPTS]          (default 1,000,000)

Generates ATTEMPTS attempts with `attempt-ledger simulate` (the overnight 529
storm), then times, each as its own process:
- `attempt-ledger ingest` of the file into a new database, and the peer:
  DuckDB's `CREATE TABLE ... AS SELECT ... FROM read_json(file, columns=...)`
  (the `duckdb` Python package, pinned to 2.0.0, the engine the product
  bundles) on the same file; the ratio is peer time / ingest time, so >= 1.0
  means ingest keeps up with DuckDB's own loader;
- the full report, a 1-hour-window report, and one evaluation of every rule
  in examples/alerts.toml (`alerts --check` over a single instant).
For each it records wall time and the peak RSS of the process. It prints a
table and writes the figures as JSON (bench-results.json in the work
directory; the inputs and databases are deleted). Figures, not assertions:
compare runs on the same machine.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The columns of `simulate`'s records, typed as attempt-ledger reads them.
COLUMNS = {
    "workflow_id": "VARCHAR",
    "attempt_id": "VARCHAR",
    "attempt": "BIGINT",
    "started_at": "TIMESTAMPTZ",
    "workflow": "VARCHAR",
    "layer": "VARCHAR",
    "provider": "VARCHAR",
    "model": "VARCHAR",
    "route": "VARCHAR",
    "status": "VARCHAR",
    "duration_ms": "DOUBLE",
    "http_status": "INTEGER",
    "error_code": "VARCHAR",
    "input_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "cached_input_tokens": "BIGINT",
    "decision": "VARCHAR",
}


def run(args, stdout=subprocess.DEVNULL):
    """Runs a command; returns (seconds, peak RSS in MiB) of that process."""
    began = time.perf_counter()
    child = subprocess.Popen(args, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    stderr = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if child.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed ({child.returncode}):\n{stderr}")
    return seconds, usage.ru_maxrss / 1024


def peer_load(file: Path, db: Path):
    """DuckDB's own JSON loader, in a child process so its RSS is its own."""
    return run([sys.executable, __file__, "--peer", db, file])


def peer_child(db: str, file: str):
    import duckdb

    columns = "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in COLUMNS.items()) + "}"
    conn = duckdb.connect(db)
    conn.execute(
        f"CREATE TABLE attempts AS SELECT * FROM read_json(?, format = 'newline_delimited', columns = {columns})",
        [file],
    )
    conn.close()


def main():
    attempts = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    binary = Path(os.environ.get("ATTEMPT_LEDGER_BIN", ROOT / "target/release/attempt-ledger"))
    import duckdb

    work = Path(tempfile.mkdtemp(prefix="attempt-ledger-bench-"))
    results = {"attempts_requested": attempts, "duckdb": duckdb.__version__, "rows": []}

    def record(name, seconds, rss_mib, **extra):
        results["rows"].append({"step": name, "seconds": round(seconds, 3), "peak_rss_mib": round(rss_mib), **extra})

    # The storm averages a little over 1.5 attempts per workflow.
    file = work / "attempts.jsonl"
    with open(file, "wb") as out:
        seconds, rss = run(
            [binary, "simulate", "--scenario", "overnight-529-storm", "--seed", "1",
             "--workflows", str(max(1, attempts * 10 // 16))],
            stdout=out,
        )
    lines = sum(1 for _ in open(file, "rb"))
    results["attempts"] = lines
    record("simulate", seconds, rss)

    db = work / "ledger.duckdb"
    ingest_s, rss = run([binary, "ingest", "--no-progress", "--db", db, file])
    record("ingest (file)", ingest_s, rss, records_per_s=round(lines / ingest_s))
    peer_s, rss = peer_load(file, work / "peer.duckdb")
    record("peer: DuckDB read_json CTAS", peer_s, rss, records_per_s=round(lines / peer_s))
    results["ingest_vs_read_json"] = round(peer_s / ingest_s, 2)

    seconds, rss = run([binary, "report", "--db", db, "--format", "json"])
    record("report (all)", seconds, rss)
    # The storm starts at 02:00 on its default day.
    window = ["--since", "2026-11-28T02:30:00Z", "--until", "2026-11-28T03:30:00Z"]
    seconds, rss = run([binary, "report", "--db", db, "--format", "json", *window])
    record("report (1-hour window)", seconds, rss)
    # One evaluation: at `until`, one step after `since`.
    since, until = "2026-11-28T02:59:59Z", "2026-11-28T03:00:00Z"
    seconds, rss = run(
        [binary, "alerts", "--check", "--db", db, "--rules", ROOT / "examples/alerts.toml",
         "--since", since, "--until", until, "--step", "1s", "--format", "json"]
    )
    record("alert evaluation (example rules, once)", seconds, rss)

    print(f"attempt-ledger benchmark: {lines} attempts, DuckDB {duckdb.__version__} as the peer ({work})")
    print(f"{'step':<42} {'seconds':>9} {'peak RSS MiB':>13} {'records/s':>11}")
    for row in results["rows"]:
        rate = row.get("records_per_s", "")
        print(f"{row['step']:<42} {row['seconds']:>9.3f} {row['peak_rss_mib']:>13} {rate:>11}")
    print(f"ingest vs DuckDB read_json: {results['ingest_vs_read_json']:.2f}x (>= 1.0: keeps up)")
    (work / "bench-results.json").write_text(json.dumps(results, indent=2))
    # The inputs and databases are large: only the figures are kept.
    for path in work.iterdir():
        if path.name != "bench-results.json":
            path.unlink()
    print(f"figures: {work / 'bench-results.json'}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--peer"]:
        peer_child(sys.argv[2], sys.argv[3])
    else:
        main()
