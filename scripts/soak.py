"""The soak test: above the writer's capacity for minutes, memory stays flat
and the only refusals are backpressure.

    scripts/soak.sh [SECONDS]       (default 300)

Runs `attempt-ledger serve` with a small queue (--queue 8, --queue-mib 64)
and DuckDB's memory limit at MEMORY_LIMIT (so the buffer pool is full early)
on a new database while CLIENTS threads post batches of new records as fast
as they can, a third of them gzip-compressed, resending a batch until it is
acknowledged. More clients than queue slots keep the service above what it
can commit, so it must refuse some requests: 503 with Retry-After is the
only refusal allowed. Every SAMPLE_S it reads the service's resident memory
(VmRSS). At the end it checks:
  - every answer was 200 or 503-with-Retry-After (any other: an error);
  - the report counts exactly the acknowledged records (none lost, none twice);
  - memory is bounded: the peak stays under CEILING_MIB (DuckDB's limit,
    the byte budget, and room for the process's own buffers);
  - memory is flat, on runs of 3 minutes or more: the peak of the last third
    is at most FLAT_RATIO times the peak of the middle third (the first
    third is warm-up: DuckDB's buffer pool fills up to its memory limit,
    which takes longer than a short run lasts);
and prints the figures. Exits 1 if a check fails.
"""

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

CLIENTS = 12
RECORDS_PER_BATCH = 2000
SAMPLE_S = 2.0
FLAT_RATIO = 1.15
MEMORY_LIMIT = "256MB"
QUEUE_MIB = 64
CEILING_MIB = 256 + QUEUE_MIB + 192
FLAT_MIN_SECONDS = 180


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def batch_body(client, number):
    return "".join(
        json.dumps({
            "attempt_id": f"s{client}-b{number}-r{i}",
            "workflow_id": f"s{client}-b{number}-w{i // 3}",
            "attempt": i % 3 + 1,
            "started_at": 1795831200000 + number * 10_000 + i,
            "workflow": f"soak-{client % 4}",
            "provider": "openai" if i % 3 < 2 else "anthropic",
            "model": "gpt-4o-mini" if i % 3 < 2 else "claude-sonnet-4.5",
            "status": "ok" if i % 3 == 2 else "error",
            "error_class": None if i % 3 == 2 else "transient",
            "http_status": 200 if i % 3 == 2 else 529,
            "input_tokens": 1000 + i,
            "output_tokens": 0 if i % 3 < 2 else 200,
        }) + "\n"
        for i in range(RECORDS_PER_BATCH)
    ).encode()


class Client(threading.Thread):
    def __init__(self, index, http, stop, answers, lock):
        super().__init__(daemon=True)
        self.index, self.http, self.stop, self.answers, self.lock = index, http, stop, answers, lock
        self.acknowledged = 0

    def count(self, key):
        with self.lock:
            self.answers[key] = self.answers.get(key, 0) + 1

    def run(self):
        number = 0
        body = batch_body(self.index, number)
        while not self.stop.is_set():
            headers = {"Content-Type": "application/x-ndjson"}
            data = body
            if number % 3 == 0:
                data, headers["Content-Encoding"] = gzip.compress(body, 1), "gzip"
            request = urllib.request.Request(f"http://{self.http}/v1/attempts", data=data, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    counts = json.load(answer)
                    stored = counts["accepted"] + counts["duplicates"]
                    if stored != RECORDS_PER_BATCH or counts["rejected_total"]:
                        self.count(f"error: {counts['rejected_total']} records rejected, {stored} stored")
                    self.count("200")
                    self.acknowledged += 1
                    number += 1
                    body = batch_body(self.index, number)
            except urllib.error.HTTPError as refused:
                refused.read()
                if refused.code == 503 and refused.headers.get("Retry-After") == "1":
                    self.count("503 backpressure")
                    time.sleep(0.05)
                else:
                    self.count(f"error {refused.code}")
            except (urllib.error.URLError, OSError) as broken:
                self.count(f"error {type(broken).__name__}")
                time.sleep(0.1)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 300
    binary = os.environ["ATTEMPT_LEDGER_BIN"]
    work = tempfile.mkdtemp(prefix="attempt-ledger-soak-")
    db = os.path.join(work, "soak.duckdb")
    child = subprocess.Popen(
        [binary, "serve", "--db", db, "--listen", "127.0.0.1:0", "--otlp-grpc", "127.0.0.1:0",
         "--queue", "8", "--queue-mib", str(QUEUE_MIB)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "ATTEMPT_LEDGER_MEMORY_LIMIT": MEMORY_LIMIT},
    )
    line = child.stdout.readline()
    if "http=" not in line:
        sys.exit(f"the service did not start: {line!r}")
    http = next(w.split("=", 1)[1] for w in line.split() if w.startswith("http="))

    stop, lock, answers = threading.Event(), threading.Lock(), {}
    clients = [Client(i, http, stop, answers, lock) for i in range(CLIENTS)]
    for c in clients:
        c.start()
    samples = []
    began = time.monotonic()
    while (elapsed := time.monotonic() - began) < seconds:
        samples.append((elapsed, rss_mib(child.pid)))
        time.sleep(SAMPLE_S)
    stop.set()
    for c in clients:
        c.join(timeout=120)

    # A report waits 2 s at most for derivation, then states its lag: ask
    # again until it reflects every acknowledged write (a minute at most),
    # as a client that needs a complete answer does.
    deadline = time.monotonic() + 60
    while True:
        with urllib.request.urlopen(f"http://{http}/api/v1/report", timeout=120) as answer:
            report = json.load(answer)
        if report.get("derivation", {}).get("complete", True) or time.monotonic() > deadline:
            break
    child.terminate()
    child.wait(timeout=60)

    third = seconds / 3
    middle = max((m for t, m in samples if third <= t < 2 * third), default=0.0)
    last = max((m for t, m in samples if t >= 2 * third), default=0.0)
    acknowledged = sum(c.acknowledged for c in clients) * RECORDS_PER_BATCH
    errors = {k: v for k, v in answers.items() if k.startswith("error")}
    figures = {
        "seconds": round(seconds),
        "clients": CLIENTS,
        "batches_acknowledged": answers.get("200", 0),
        "records_acknowledged": acknowledged,
        "records_per_second": round(acknowledged / seconds),
        "refused_with_backpressure": answers.get("503 backpressure", 0),
        "errors": errors,
        "records_in_report": report["attempts"]["total"],
        "report_complete": report.get("derivation", {}).get("complete"),
        "rss_mib_first_sample": round(samples[0][1]),
        "rss_mib_peak_middle_third": round(middle),
        "rss_mib_peak_last_third": round(last),
        "rss_mib_peak": round(max(m for _, m in samples)),
        "rss_mib_by_tenth": [round(max((m for t, m in samples if k * seconds / 10 <= t < (k + 1) * seconds / 10), default=0)) for k in range(10)],
    }
    print(json.dumps(figures, indent=2))
    failures = []
    if errors:
        failures.append(f"answers other than 200 and backpressure: {errors}")
    if report["attempts"]["total"] != acknowledged:
        failures.append(f"the report counts {report['attempts']['total']} records, {acknowledged} were acknowledged")
    if not answers.get("503 backpressure"):
        failures.append("never above capacity: no request was refused, so this soaked nothing")
    peak = max(m for _, m in samples)
    if peak > CEILING_MIB:
        failures.append(f"memory peaked at {peak:.0f} MiB, over the {CEILING_MIB} MiB ceiling")
    if seconds >= FLAT_MIN_SECONDS and middle and last > FLAT_RATIO * middle:
        failures.append(f"memory grew: last-third peak {last:.0f} MiB > {FLAT_RATIO} x middle-third peak {middle:.0f} MiB")
    if failures:
        sys.exit("soak test failed: " + "; ".join(failures) + f" (database kept in {work})")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
