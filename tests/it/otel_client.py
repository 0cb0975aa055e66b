"""Sends GenAI spans to attempt-ledger with the official OpenTelemetry SDK.

    python3 otel_client.py grpc|http ENDPOINT EXPECTED.jsonl

An https:// ENDPOINT is reached over TLS, trusting the CA named by the
SDK's own OTEL_EXPORTER_OTLP_CERTIFICATE.

Exports, through the real OTLP exporter of the given protocol:
  doc-1  one chat span that succeeded;
  doc-2  one chat span hiding two SDK retries (HTTP client child spans: 529, then 200);
  doc-3  a chat span failing with 429 and `attempt.decision = fallback`, then a
         fallback chat span on another provider that succeeded;
  and a database span, which is not a model call.
Writes to EXPECTED.jsonl the attempts these spans stand for, as JSONL records,
so the test can compare both ingest paths.
"""

import json
import sys
import time
from datetime import datetime, timezone

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Status, StatusCode

protocol, endpoint, expected_path = sys.argv[1], sys.argv[2], sys.argv[3]
if protocol == "grpc":
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    # An https:// endpoint uses TLS, trusting OTEL_EXPORTER_OTLP_CERTIFICATE.
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=not endpoint.startswith("https://"))
else:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=endpoint + "/v1/traces")


class Checked(SpanExporter):
    """The SDK logs a failed export and goes on; a test must fail instead."""

    def __init__(self, inner):
        self.inner, self.failed = inner, False

    def export(self, spans):
        result = self.inner.export(spans)
        self.failed |= result is not SpanExportResult.SUCCESS
        return result

    def shutdown(self):
        self.inner.shutdown()


exporter = Checked(exporter)
provider = TracerProvider(resource=Resource.create({"service.name": "otel-client-test"}))
# One batch for everything: a GenAI span and its HTTP children must reach the
# receiver in the same export to be seen together.
provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000, max_export_batch_size=512))
tracer = provider.get_tracer("attempt-ledger-test")

base = time.time_ns() - 60_000_000_000
expected = []


def rfc3339(ns):
    seconds, nanos = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


def ids(span):
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def chat(workflow_id, provider_name, model, start, end, ok=True, tokens=(0, 0), extra=None, children=()):
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name,
        "gen_ai.request.model": model,
        "gen_ai.response.model": model + "-2024-07-18" if provider_name == "openai" else model,
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
        "attempt.workflow_id": workflow_id,
        "attempt.workflow": "otel-test",
    }
    attrs.update(extra or {})
    span = tracer.start_span("chat " + model, start_time=start, attributes=attrs)
    trace_id, span_id = ids(span)
    record = {
        "workflow_id": workflow_id,
        "workflow": "otel-test",
        "provider": provider_name,
        "model": model,
        "served_model": attrs["gen_ai.response.model"],
    }
    for key in ("attempt.decision", "attempt.index"):
        if key in attrs:
            record[key.split(".")[1] if key != "attempt.index" else "attempt"] = attrs[key]
    if not children:
        expected.append(dict(record, attempt_id=trace_id + span_id, started_at=rfc3339(start),
                             duration_ms=(end - start) / 1e6, status="ok" if ok else "error", input_tokens=tokens[0], output_tokens=tokens[1],
                             **({"http_status": attrs["http.response.status_code"]} if "http.response.status_code" in attrs else {}),
                             **({"error_code": attrs["error.type"]} if "error.type" in attrs else {})))
    delivered = False
    context = trace.set_span_in_context(span)
    for index, (c_start, c_end, status_code) in enumerate(children):
        child = tracer.start_span("POST", context=context, start_time=c_start,
                                  attributes={"http.request.method": "POST", "http.response.status_code": status_code,
                                              "http.request.resend_count": index})
        child_ok = status_code < 400
        if not child_ok:
            child.set_status(Status(StatusCode.ERROR))
        child.end(end_time=c_end)
        _, child_id = ids(child)
        got = child_ok and not delivered
        delivered = delivered or child_ok
        rec = dict(record, attempt_id=trace_id + child_id, started_at=rfc3339(c_start), layer="sdk",
                   duration_ms=(c_end - c_start) / 1e6,
                   status="ok" if child_ok else "error", http_status=status_code,
                   input_tokens=tokens[0] if got else 0, output_tokens=tokens[1] if got else 0)
        rec.pop("decision", None)
        expected.append(rec)
    if not ok:
        span.set_status(Status(StatusCode.ERROR))
    span.end(end_time=end)


s = 1_000_000_000
chat("doc-1", "openai", "gpt-4o-mini", base, base + s, tokens=(1000, 50))
chat("doc-2", "anthropic", "claude-haiku-4-5", base + 2 * s, base + 5 * s, tokens=(2000, 100),
     children=[(base + 2 * s, base + 3 * s, 529), (base + 4 * s, base + 5 * s, 200)])
chat("doc-3", "openai", "gpt-4o", base + 6 * s, base + 7 * s, ok=False,
     extra={"attempt.decision": "fallback", "attempt.index": 0, "http.response.status_code": 429,
            "error.type": "RateLimitError"})
chat("doc-3", "anthropic", "claude-sonnet-4-5", base + 8 * s, base + 9 * s, tokens=(3000, 300),
     extra={"attempt.index": 1})
db = tracer.start_span("SELECT documents", start_time=base, attributes={"db.system": "postgresql"})
db.end(end_time=base + s)

if not provider.force_flush(30_000):
    sys.exit("export did not finish")
provider.shutdown()
if exporter.failed:
    sys.exit("an export failed (see the exporter's log above)")
with open(expected_path, "w") as out:
    for rec in expected:
        out.write(json.dumps(rec) + "\n")
