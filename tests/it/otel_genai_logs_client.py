"""A GenAI call told by all three signals of the official OpenTelemetry
Python SDK, as a 2026 instrumentation tells it, to attempt-ledger:

    python3 otel_genai_logs_client.py grpc|http ENDPOINT

- traces: a `chat gpt-4o-mini` span covering the whole call (status left
  unset, as the conventions' "with all retries" span), with one HTTP client
  span per try: a 429, then a try whose connection failed (no status);
- logs: the `gen_ai.client.operation.exception` event, emitted inside the
  call's span (the SDK stamps its trace and span ids) and exported BEFORE
  the spans; a gateway's access log of another request (its own span ids,
  a 503), one without span ids (`attempt.workflow_id`, a 200 with tokens),
  and an application log, ignored;
- metrics: a counter, which the ledger answers and drops.

Exits non-zero when any export fails: the SDK only logs that.
"""

import sys

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExportResult, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import SpanKind

protocol, endpoint = sys.argv[1], sys.argv[2]
if protocol == "grpc":
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    logs, metrics, spans = (
        OTLPLogExporter(endpoint=endpoint, insecure=True),
        OTLPMetricExporter(endpoint=endpoint, insecure=True),
        OTLPSpanExporter(endpoint=endpoint, insecure=True),
    )
else:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    logs, metrics, spans = (
        OTLPLogExporter(endpoint=endpoint + "/v1/logs"),
        OTLPMetricExporter(endpoint=endpoint + "/v1/metrics"),
        OTLPSpanExporter(endpoint=endpoint + "/v1/traces"),
    )

failures = []


def checked(exporter, success):
    export = exporter.export

    def wrapped(batch, *args, **kwargs):
        result = export(batch, *args, **kwargs)
        if result is not success:
            failures.append(f"{type(exporter).__name__}: {result}")
        return result

    exporter.export = wrapped
    return exporter


resource = Resource.create({"service.name": "genai-logs-test"})
# Spans are held until the end: the exception event reaches the ledger first.
held_spans = []


class Held:
    def export(self, batch):
        held_spans.extend(batch)
        return SpanExportResult.SUCCESS

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis=30_000):
        return True


tracer_provider = TracerProvider(resource=resource)
tracer_provider.add_span_processor(SimpleSpanProcessor(Held()))
tracer = tracer_provider.get_tracer("genai-instrumentation")
logger_provider = LoggerProvider(resource=resource)
logger_provider.add_log_record_processor(SimpleLogRecordProcessor(checked(logs, LogRecordExportResult.SUCCESS)))
logger = logger_provider.get_logger("genai-instrumentation")
reader = PeriodicExportingMetricReader(checked(metrics, MetricExportResult.SUCCESS), export_interval_millis=3_600_000)
meter_provider = MeterProvider(resource=resource, metric_readers=[reader])

# 2026-11-28T02:00:00Z, in nanoseconds.
T0 = 1_795_831_200_000_000_000
MS = 1_000_000
call = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "server.address": "api.openai.com",
}
span = tracer.start_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=call, start_time=T0)
with trace.use_span(span, end_on_exit=False):
    first = tracer.start_span(
        "POST", kind=SpanKind.CLIENT, start_time=T0 + 10 * MS,
        attributes={"http.request.method": "POST", "http.response.status_code": 429, "server.address": "api.openai.com"},
    )
    first.end(end_time=T0 + 60 * MS)
    second = tracer.start_span(
        "POST", kind=SpanKind.CLIENT, start_time=T0 + 1_000 * MS,
        attributes={"http.request.method": "POST", "server.address": "api.openai.com"},
    )
    second.end(end_time=T0 + 31_000 * MS)
    logger.emit(
        timestamp=T0 + 31_000 * MS,
        event_name="gen_ai.client.operation.exception",
        severity_number=SeverityNumber.WARN,
        attributes={
            "error.type": "APIConnectionError",
            "exception.type": "openai.APIConnectionError",
            "exception.message": "Connection error.",
        },
    )
span.end(end_time=T0 + 31_010 * MS)

access = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "anthropic",
    "gen_ai.request.model": "claude-sonnet-4",
    "gen_ai.usage.input_tokens": 1000,
    "gen_ai.usage.output_tokens": 100,
}
# A gateway's request span, never exported: its access log stands for it.
gateway_request = tracer_provider.get_tracer("gateway").start_span("gateway request", start_time=T0 + 40_000 * MS)
with trace.use_span(gateway_request, end_on_exit=False):
    logger.emit(timestamp=T0 + 40_000 * MS, attributes=dict(access, **{"http.response.status_code": 503, "attempt.duration_ms": 120.0}))
logger.emit(
    timestamp=T0 + 41_000 * MS,
    attributes=dict(access, **{"http.response.status_code": 200, "attempt.workflow_id": "gateway-job-1", "attempt.duration_ms": 900.0}),
)
logger.emit(timestamp=T0 + 42_000 * MS, body="request served", attributes={"component": "router"})

meter_provider.get_meter("genai-instrumentation").create_counter("gen_ai.client.calls").add(3, {"gen_ai.provider.name": "openai"})
meter_provider.shutdown()
logger_provider.shutdown()
# Now the spans, after their event.
checked(spans, SpanExportResult.SUCCESS).export(held_spans)
tracer_provider.shutdown()
spans.shutdown()
# The workflows the ledger will hold: the call's trace and the gateway's.
print(format(span.get_span_context().trace_id, "032x"), format(gateway_request.get_span_context().trace_id, "032x"))
if failures:
    print("\n".join(failures), file=sys.stderr)
sys.exit(1 if failures else 0)
