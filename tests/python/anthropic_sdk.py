"""Drives the anthropic SDK against the fake provider the ways its users
trace it, exporting over OTLP/HTTP to the ledger under test:

  openllmetry  Traceloop's OpenLLMetry instrumentation with the httpx one,
               the SDK's own tracing off: OpenLLMetry's span is never made
               current, so the SDK's HTTP spans sit beside it.
  both         the same with the SDK's own tracing on (its default once a
               tracer provider is registered): two model spans per call.
  sdk          the SDK's own tracing alone, no HTTP instrumentation: each
               call's retries are known only by its resend count.
  sdk-httpx    the SDK's own tracing with the httpx instrumentation.

Each call runs under the application's own span, one trace per call; the
SDK's default max_retries=2 retries on its own.

Usage: anthropic_sdk.py MODE OTLP_TRACES_URL PROVIDER_LOG.jsonl PLAN_JSON
"""

import json
import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from fake_provider import FakeProvider, call_each

MODES = {"openllmetry": (True, False, True), "both": (True, True, True), "sdk": (False, True, False), "sdk-httpx": (False, True, True)}


def main():
    mode, otlp_url, provider_log, plan_json = sys.argv[1:5]
    openllmetry, sdk_tracing, httpx = MODES[mode]
    plan = json.loads(plan_json)
    provider = TracerProvider(resource=Resource.create({"service.name": f"anthropic-{mode}-test-app"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_url)))
    trace.set_tracer_provider(provider)
    if httpx:
        from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor

        HTTPX2ClientInstrumentor().instrument(tracer_provider=provider)
    if openllmetry:
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

        AnthropicInstrumentor().instrument(tracer_provider=provider)

    import anthropic

    with FakeProvider(plan, provider_log) as fake:
        client = anthropic.Anthropic(
            base_url=fake.base_url, api_key="sk-ant-test", open_telemetry=None if sdk_tracing else False
        )
        outcomes = call_each(
            plan,
            lambda name: client.messages.create(
                model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": f"classify wf={name}"}]
            ),
            anthropic.APIError,
            tracer=trace.get_tracer("anthropic-test-app"),
        )
    provider.force_flush()
    provider.shutdown()
    print(json.dumps(outcomes))


if __name__ == "__main__":
    main()
