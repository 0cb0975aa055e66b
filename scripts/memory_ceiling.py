"""Decoded memory stays in the byte budget: four clients send OTLP requests of
100,000 small spans each at once, and the service's peak memory stays under
its ceiling while every span is stored; then the same with OTLP logs: four
requests of 50,000 gateway access logs, each an attempt record (what a
record keeps is the largest part of a logs export).

    scripts/memory-ceiling.sh [traces|logs]   (default: both, in turn)

Runs `attempt-ledger serve` with a byte budget of QUEUE_MIB and DuckDB's
memory limit at MEMORY_LIMIT, then has CLIENTS threads (half OTLP/HTTP
protobuf, half OTLP/gRPC) each send one request of SPANS model spans (15 MiB
of protobuf, 45 MiB once decoded), resending it after a refusal until it is
acknowledged, as OTLP exporters do. At the end it checks:
  - every refusal was backpressure (HTTP 503 with Retry-After, gRPC
    UNAVAILABLE), and at least one came: four decoded requests do not fit in
    the budget together, so the budget must have refused some;
  - the report counts exactly CLIENTS x SPANS attempts;
  - the service's peak resident memory (VmHWM) stays under CEILING_MIB:
    DuckDB's limit, the byte budget, and 256 MiB for the process's own
    (its code and idle buffers, a derivation round, the writer's group
    commit of two of these requests);
and prints the figures. Exits 1 if a check fails.
"""

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

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

CLIENTS = 4
SPANS = 100_000
QUEUE_MIB = 128
MEMORY_LIMIT = "256MB"
# DuckDB's limit, the budget, and the process's own: its code and idle
# buffers (about 64 MiB), a derivation round and the writer's group commit
# (two of these requests: 200,000 spans).
CEILING_MIB = 256 + QUEUE_MIB + 256
GIVE_UP_S = 180
LOG_RECORDS = 50_000
EXPORT = {
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}
SENT = {"traces": SPANS, "logs": LOG_RECORDS}


def body(signal, client):
    return logs_body(client) if signal == "logs" else spans_body(client)


def logs_body(client):
    request = ExportLogsServiceRequest()
    records = request.resource_logs.add().scope_logs.add()
    for i in range(LOG_RECORDS):
        record = records.log_records.add()
        record.time_unix_nano = 1795831200000000000 + i
        record.attributes.add(key="gen_ai.provider.name", value=AnyValue(string_value="openai"))
        record.attributes.add(key="gen_ai.request.model", value=AnyValue(string_value="gpt-4o-mini"))
        record.attributes.add(key="gen_ai.usage.input_tokens", value=AnyValue(int_value=100))
        record.attributes.add(key="attempt.workflow_id", value=AnyValue(string_value=f"c{client}-w{i // 100}"))
    return request.SerializeToString()


def spans_body(client):
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add()
    for i in range(SPANS):
        span = spans.spans.add()
        span.trace_id = (client * 10_000_000 + i // 100 + 1).to_bytes(16, "big")
        span.span_id = (i + 1).to_bytes(8, "big")
        span.name = "chat"
        span.start_time_unix_nano = 1795831200000000000 + i
        span.end_time_unix_nano = 1795831200500000000 + i
        span.attributes.add(key="gen_ai.provider.name", value=AnyValue(string_value="openai"))
        span.attributes.add(key="gen_ai.request.model", value=AnyValue(string_value="gpt-4o-mini"))
        span.attributes.add(key="gen_ai.usage.input_tokens", value=AnyValue(int_value=100))
    return request.SerializeToString()


def peak_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Client(threading.Thread):
    def __init__(self, signal, index, http, grpc_address, answers, lock):
        super().__init__(daemon=True)
        self.signal, self.index, self.http, self.grpc_address = signal, index, http, grpc_address
        self.answers, self.lock = answers, lock
        self.acknowledged = False

    def count(self, key):
        with self.lock:
            self.answers[key] = self.answers.get(key, 0) + 1

    def run(self):
        data = body(self.signal, self.index)
        send = self.send_grpc if self.index % 2 else self.send_http
        deadline = time.monotonic() + GIVE_UP_S
        while not self.acknowledged and time.monotonic() < deadline:
            send(data)

    def send_http(self, data):
        request = urllib.request.Request(
            f"http://{self.http}/v1/{self.signal}", data=data, headers={"Content-Type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                answer.read()
                self.count("200")
                self.acknowledged = True
        except urllib.error.HTTPError as refused:
            refused.read()
            if refused.code == 503 and refused.headers.get("Retry-After"):
                self.count("503 backpressure")
                time.sleep(0.25)
            else:
                self.count(f"error {refused.code}")
                time.sleep(1)

    def send_grpc(self, data):
        with grpc.insecure_channel(self.grpc_address) as channel:
            export = channel.unary_unary(EXPORT[self.signal])
            try:
                export(data, timeout=120)
                self.count("OK")
                self.acknowledged = True
            except grpc.RpcError as refused:
                if refused.code() == grpc.StatusCode.UNAVAILABLE:
                    self.count("UNAVAILABLE backpressure")
                    time.sleep(0.25)
                else:
                    self.count(f"error {refused.code().name}")
                    time.sleep(1)


def main():
    signals = sys.argv[1:] or ["traces", "logs"]
    failed = [signal for signal in signals if not ceiling(signal)]
    if failed:
        sys.exit(f"memory ceiling test failed for {', '.join(failed)}")


def ceiling(signal):
    """Runs one signal's test; whether it passed."""
    binary = os.environ["ATTEMPT_LEDGER_BIN"]
    work = tempfile.mkdtemp(prefix="attempt-ledger-ceiling-")
    child = subprocess.Popen(
        [binary, "serve", "--db", os.path.join(work, "ceiling.duckdb"), "--listen", "127.0.0.1:0",
         "--otlp-grpc", "127.0.0.1:0", "--queue-mib", str(QUEUE_MIB)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "ATTEMPT_LEDGER_MEMORY_LIMIT": MEMORY_LIMIT},
    )
    line = child.stdout.readline()
    if "http=" not in line:
        sys.exit(f"the service did not start: {line!r}")
    words = dict(w.split("=", 1) for w in line.split() if "=" in w)
    idle = peak_mib(child.pid)

    lock, answers = threading.Lock(), {}
    clients = [Client(signal, i, words["http"], words["grpc"], answers, lock) for i in range(CLIENTS)]
    began = time.monotonic()
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    seconds = time.monotonic() - began

    deadline = time.monotonic() + 120
    while True:
        with urllib.request.urlopen(f"http://{words['http']}/api/v1/report", timeout=120) as answer:
            report = json.load(answer)
        if report.get("derivation", {}).get("complete", True) or time.monotonic() > deadline:
            break
    peak = peak_mib(child.pid)
    child.terminate()
    child.wait(timeout=60)

    errors = {k: v for k, v in answers.items() if k.startswith("error")}
    refusals = sum(v for k, v in answers.items() if "backpressure" in k)
    sent = SENT[signal]
    figures = {
        "signal": signal,
        "clients": CLIENTS,
        "records_per_request": sent,
        "request_mib": round(len(body(signal, 0)) / 2**20, 1),
        "budget_mib": QUEUE_MIB,
        "duckdb_memory_limit": MEMORY_LIMIT,
        "answers": answers,
        "seconds_to_acknowledge_all": round(seconds, 1),
        "attempts_in_report": report["attempts"]["total"],
        "rss_mib_idle": round(idle),
        "rss_mib_peak": round(peak),
        "ceiling_mib": CEILING_MIB,
    }
    print(json.dumps(figures, indent=2))
    failures = []
    if errors:
        failures.append(f"answers other than success and backpressure: {errors}")
    if not all(c.acknowledged for c in clients):
        failures.append(f"not every request was acknowledged within {GIVE_UP_S} s")
    if report["attempts"]["total"] != CLIENTS * sent:
        failures.append(f"the report counts {report['attempts']['total']} attempts, {CLIENTS * sent} were sent")
    if not refusals:
        failures.append("no request was refused: the decoded requests all fit, so this checked nothing")
    if peak > CEILING_MIB:
        failures.append(f"memory peaked at {peak:.0f} MiB, over the {CEILING_MIB} MiB ceiling")
    if failures:
        print(f"{signal}: " + "; ".join(failures) + f" (database kept in {work})", file=sys.stderr)
        return False
    shutil.rmtree(work, ignore_errors=True)
    return True


if __name__ == "__main__":
    main()
