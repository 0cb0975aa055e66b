"""Writes the starting corpus of every fuzz target from the project's own
test fixtures (fuzz/README.md). Run with the tests' Python environment
(it has the OpenTelemetry protobuf classes): python fuzz/seed.py
A fuzzing run adds to these folders; commit what it adds after
`cargo fuzz cmin`."""

import json
import pathlib
import re

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
FIXTURES = ROOT / "tests" / "it" / "fixtures"


def put(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


attempts = (FIXTURES / "attempts.jsonl").read_text().splitlines()
litellm = (FIXTURES / "litellm_payloads.jsonl").read_text().splitlines()
for i in range(0, len(attempts), 4):
    put("attempts_jsonl", f"fixture-{i}", "\n".join(attempts[i : i + 4]) + "\n")
put("ingest_file", "attempts", "\n".join(attempts) + "\n")
for i, line in enumerate(litellm[:6]):
    put("litellm_jsonl", f"fixture-{i}", line + "\n")
put("ingest_file", "litellm", "\n".join(litellm[:3]) + "\n")

# OpenRouter's generation records, as its importer's unit tests hold them.
source = (ROOT / "crates/attempt-core/src/ingest/openrouter.rs").read_text()
for i, raw in enumerate(re.findall(r'r#"(\{.*?\})"#', source, re.S)):
    line = json.dumps(json.loads(raw))
    put("openrouter_jsonl", f"unit-{i}", line + "\n")
    put("ingest_file", f"openrouter-{i}", line + "\n")

for path in sorted((FIXTURES / "gateways").glob("*.json")):
    export = json.loads(path.read_text())
    line = json.dumps(export)
    put("otlp_json", path.stem, line)
    put("ingest_file", f"otlp-{path.stem}", line + "\n")
    message = json_format.ParseDict(export, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    put("otlp_protobuf", path.stem, message.SerializeToString())

# Log records of each kind the logs receiver keeps or ignores: a breaker
# state change, a GenAI exception event, access logs with and without span
# ids, an application log.
def attrs(**values):
    out = []
    for key, value in values.items():
        key = key.replace("__", ".")
        kind = "intValue" if isinstance(value, int) else "doubleValue" if isinstance(value, float) else "stringValue"
        out.append({"key": key, "value": {kind: value}})
    return out


trace, span = "cd" * 16, "ab" * 8
access = attrs(gen_ai__operation__name="chat", gen_ai__provider__name="openai", gen_ai__request__model="gpt-4o-mini",
               gen_ai__usage__input_tokens=120, gen_ai__usage__output_tokens=8, http__response__status_code=429,
               attempt__duration_ms=350.0)
records = [
    {"timeUnixNano": "1795831200000000000", "eventName": "circuit.state_change",
     "attributes": attrs(attempt__provider="openai", attempt__model="gpt-4o", attempt__state="open")},
    {"timeUnixNano": "1795831201000000000", "eventName": "gen_ai.client.operation.exception", "traceId": trace,
     "spanId": span, "severityNumber": 13,
     "attributes": attrs(error__type="RateLimitError", exception__message="Rate limit reached")},
    {"timeUnixNano": "1795831202000000000", "traceId": trace, "spanId": "ef" * 8, "attributes": access},
    {"timeUnixNano": "1795831203000000000", "attributes": access + attrs(attempt__workflow_id="job-7")},
    {"timeUnixNano": "1795831204000000000", "body": {"stringValue": "GET /health 200"}},
]
logs = json_format.ParseDict({"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}, ExportLogsServiceRequest())
put("otlp_logs", "every-kind", logs.SerializeToString())
for i, record in enumerate(records):
    one = json_format.ParseDict({"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}, ExportLogsServiceRequest())
    put("otlp_logs", f"record-{i}", one.SerializeToString())

put("alert_rules", "example", (ROOT / "examples" / "alerts.toml").read_bytes())
put("policy_file", "example", (ROOT / "examples" / "policy.toml").read_bytes())
for i, text in enumerate(
    ["[default]\nretry_budget = 0.25\nretry_budget_floor = 3\n",
     "[[workflow]]\nname = \"a\"\napproved_fallbacks = [\"openai/gpt-4o\"]\nmax_extra_cost_usd = 0.01\n",
     "[default]\nmax_elapsed_ms = 1e308\nfail_closed_on_commit = [\"unknown\"]\n"]
):
    put("policy_file", f"seed-{i}", text)
for i, text in enumerate(
    ["2026-11-30T10:00:00Z", "2026-11-30", "90m", "now", "team=extra.team\ncustomer=extra.customer_id",
     "gateway=route_group", "x=extra.a.b"]
):
    put("report_arguments", f"seed-{i}", text)
# body_accounting: the first byte picks the framing (bit 0: 0 lines, 1 a
# document) and the format (the rest: none, attempts, litellm, openrouter,
# otlp); the bodies mix good records, arrays and bad lines.
good = attempts[:3]
bodies = {
    "ndjson-array-first": "[1, 2]\n" + "\n".join(good) + "\n",
    "array": "[" + ",\n".join(good) + ", 7]",
    "one-pretty": json.dumps(json.loads(good[0]), indent=2),
    "lines-with-blanks": "\n\n" + good[0] + "\n\nnot json\n" + good[1] + "\n",
    "litellm-array": "[" + ",".join(litellm[:2]) + "]",
}
for name, body in bodies.items():
    for pick in (0, 1, 2, 3, 4, 5):
        put("body_accounting", f"{name}-{pick}", bytes([pick]) + body.encode())

print("seeded", sum(1 for _ in CORPUS.rglob("*") if _.is_file()), "inputs under", CORPUS)
