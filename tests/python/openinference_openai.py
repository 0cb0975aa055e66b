"""Drives the openai SDK instrumented with Arize OpenInference (and the
OpenTelemetry httpx instrumentation for the SDK's own retries, over httpx2 as
openai 3.x sends) against the fake provider, exporting over OTLP/HTTP to the
ledger under test. Each call is its own trace, as an uninstrumented app
makes them; the SDK's default `max_retries=2` retries on its own.

Usage: openinference_openai.py OTLP_TRACES_URL PROVIDER_LOG.jsonl PLAN_JSON
"""

import json
import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from openinference.instrumentation.openai import OpenAIInstrumentor

from fake_provider import openai_chat_each


def main():
    otlp_url, provider_log, plan_json = sys.argv[1:4]
    plan = json.loads(plan_json)
    provider = TracerProvider(resource=Resource.create({"service.name": "openinference-test-app"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_url)))
    trace.set_tracer_provider(provider)
    HTTPX2ClientInstrumentor().instrument(tracer_provider=provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)

    outcomes = openai_chat_each(plan, provider_log)
    provider.force_flush()
    provider.shutdown()
    print(json.dumps(outcomes))


if __name__ == "__main__":
    main()
