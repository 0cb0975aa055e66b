"""The crash test: nothing acknowledged is lost, nothing is stored twice.

    scripts/crash-test.sh [ROUNDS]       (default 20)

Runs `attempt-ledger serve` on a new database while a client posts batches
of records with known ids, as fast as it can, in several threads. Each
round SIGKILLs the service at a random moment (mid-request, mid-commit,
mid-checkpoint: wherever it happens to be), restarts it on the same file,
checks it answers `/readyz`, and the clients resend every batch that was
not acknowledged (a 200). Writes are derived after they are acknowledged,
so most kills land with derivation pending or under way (counted from
`/readyz` just before each kill). At the end it reads the database with
DuckDB itself and checks that every acknowledged record is there exactly
once (records of batches never acknowledged may be there too: a kill after
the commit and before the answer), then that the report the derived tables
give (the next open derives what a kill left pending) counts every stored
attempt and equals the report after `rebuild` derives everything from
scratch. Prints the figures; exits 1 on any loss, duplicate, unhealthy
restart or derived table that differs from a rebuild.
"""

import json
import os
import shutil
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

RECORDS_PER_BATCH = 500
CLIENTS = 3


def start(binary, db):
    child = subprocess.Popen(
        [binary, "serve", "--db", db, "--listen", "127.0.0.1:0", "--otlp-grpc", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = child.stdout.readline()
    if "http=" not in line:
        sys.exit(f"the service did not start: {line!r}")
    http = next(w.split("=", 1)[1] for w in line.split() if w.startswith("http="))
    return child, http


def ready(http, deadline_s=60):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{http}/readyz", timeout=5) as answer:
                if answer.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    return False


def pending_commits(http):
    """Acknowledged writes the service has not derived yet (0 if unknown)."""
    try:
        with urllib.request.urlopen(f"http://{http}/readyz", timeout=5) as answer:
            return json.load(answer).get("derivation", {}).get("pending_commits", 0)
    except (urllib.error.URLError, OSError, ValueError):
        return 0


def report(binary, db, command="report"):
    """The JSON report (`report` opens the database, deriving what is
    pending), or runs `rebuild`."""
    args = [binary, command, "--db", db] + (["--format", "json", "--no-audit"] if command == "report" else [])
    out = subprocess.run(args, check=True, capture_output=True)
    return json.loads(out.stdout) if command == "report" else None


def batch_body(client, number):
    lines = []
    for i in range(RECORDS_PER_BATCH):
        lines.append(json.dumps({
            "attempt_id": f"c{client}-b{number}-r{i}",
            "workflow_id": f"c{client}-b{number}-w{i // 2}",
            "attempt": i % 2 + 1,
            "started_at": 1795831200000 + number * 1000 + i,
            "workflow": f"crash-{client}",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "status": "ok" if i % 2 else "error",
            "error_class": None if i % 2 else "transient",
            "input_tokens": 100,
        }))
    return ("\n".join(lines) + "\n").encode()


class Client(threading.Thread):
    def __init__(self, index, state):
        super().__init__(daemon=True)
        self.index = index
        self.state = state
        self.acknowledged = []
        self.next_batch = 0
        self.pending = None

    def run(self):
        while not self.state["stop"]:
            if self.pending is None:
                self.pending = self.next_batch
                self.next_batch += 1
            http = self.state["http"]
            request = urllib.request.Request(
                f"http://{http}/v1/attempts",
                data=batch_body(self.index, self.pending),
                headers={"Content-Type": "application/x-ndjson"},
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    if answer.status == 200:
                        self.acknowledged.append(self.pending)
                        self.pending = None
            except (urllib.error.URLError, OSError, ConnectionError):
                # Killed, restarting, or 503: the same batch goes again.
                time.sleep(0.05)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    binary = os.environ["ATTEMPT_LEDGER_BIN"]
    rng = random.Random(int(os.environ.get("CRASH_TEST_SEED", "7")))
    work = tempfile.mkdtemp(prefix="attempt-ledger-crash-")
    db = os.path.join(work, "crash.duckdb")
    child, http = start(binary, db)
    state = {"http": http, "stop": False}
    clients = [Client(i, state) for i in range(CLIENTS)]
    for c in clients:
        c.start()
    unhealthy = 0
    during_derivation = 0
    began = time.monotonic()
    for _ in range(rounds):
        time.sleep(rng.uniform(0.2, 1.5))
        if pending_commits(http) > 0:
            during_derivation += 1
        child.send_signal(signal.SIGKILL)
        child.wait()
        child, http = start(binary, db)
        state["http"] = http
        if not ready(http):
            unhealthy += 1
    # Let every client get its pending batch acknowledged, then stop.
    time.sleep(1.0)
    state["stop"] = True
    for c in clients:
        c.join(timeout=60)
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=60)

    import duckdb

    conn = duckdb.connect(db, read_only=True)
    stored = dict(conn.execute("SELECT attempt_id, count(*) FROM attempts GROUP BY attempt_id").fetchall())
    conn.close()
    acknowledged_ids = [
        f"c{c.index}-b{b}-r{i}" for c in clients for b in c.acknowledged for i in range(RECORDS_PER_BATCH)
    ]
    lost = sum(1 for i in acknowledged_ids if i not in stored)
    twice = sum(1 for n in stored.values() if n > 1)
    derived = report(binary, db)
    report(binary, db, "rebuild")
    rebuilt = report(binary, db)
    derived_differs = derived != rebuilt or derived["attempts"]["total"] != sum(stored.values())
    figures = {
        "kills": rounds,
        "kills_with_derivation_pending": during_derivation,
        "unhealthy_restarts": unhealthy,
        "batches_acknowledged": sum(len(c.acknowledged) for c in clients),
        "records_acknowledged": len(acknowledged_ids),
        "records_stored": sum(stored.values()),
        "acknowledged_lost": lost,
        "stored_twice": twice,
        "derived_differs_from_rebuild": derived_differs,
        "seconds": round(time.monotonic() - began, 1),
    }
    print(json.dumps(figures, indent=2))
    if lost or twice or unhealthy or derived_differs or not acknowledged_ids:
        sys.exit(f"crash test failed; the database is kept in {work}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
