"""Sends breaker state changes to attempt-ledger as OpenTelemetry log records,
through the official Python SDK's OTLP log exporter.

    python3 otel_logs_client.py grpc|http ENDPOINT

Emits, in one batch, a gateway breaker's incident as `circuit.state_change`
events (event_name set, `attempt.*` attributes: opened, half-opened, closed)
between two ordinary application logs, which the receiver must accept and
ignore. Exits non-zero when an export fails: the SDK only logs that.
"""

import sys

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import Resource

protocol, endpoint = sys.argv[1], sys.argv[2]
if protocol == "grpc":
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

    exporter = OTLPLogExporter(endpoint=endpoint, insecure=True)
else:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

    exporter = OTLPLogExporter(endpoint=endpoint + "/v1/logs")


class Checked(LogRecordExporter):
    def __init__(self, inner):
        self.inner, self.failed = inner, False

    def export(self, batch):
        result = self.inner.export(batch)
        self.failed |= result is not LogRecordExportResult.SUCCESS
        return result

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30_000):
        return True


checked = Checked(exporter)
provider = LoggerProvider(resource=Resource.create({"service.name": "gateway-breaker-test"}))
provider.add_log_record_processor(BatchLogRecordProcessor(checked, schedule_delay_millis=60_000))
logger = provider.get_logger("gateway.breaker")

# 2026-11-28T02:37:12Z, in nanoseconds.
OPENED = 1_795_833_432_000_000_000
SECOND = 1_000_000_000
route = {"attempt.provider": "openai", "attempt.model": "gpt-4o"}
logger.emit(body="gateway started", attributes={"component": "router"})
for offset, state, reason in [(0, "open", "5 consecutive 429s"), (60, "half_open", None), (61, "closed", None)]:
    attributes = dict(route, **{"attempt.state": state})
    if reason:
        attributes["attempt.reason"] = reason
    logger.emit(timestamp=OPENED + offset * SECOND, event_name="circuit.state_change", attributes=attributes)
logger.emit(body="request served", attributes={"http.response.status_code": 200})
provider.shutdown()
sys.exit(1 if checked.failed else 0)
