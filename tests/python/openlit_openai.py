"""Drives the openai SDK instrumented by OpenLIT (its own tracer provider and
OTLP/HTTP exporter, as `openlit.init` sets them up, and its httpx spans for
the SDK's requests) against the fake provider, exporting to the ledger under
test. Each call runs under the application's span, one trace per call; the
SDK's default max_retries=2 retries on its own.

OpenLIT downloads its price list at start; this machine, like an offline
deployment, has none to give it (an empty list), so OpenLIT states a cost of
0 for every call: the case the ledger must not take for free calls.

Runs in OpenLIT's own environment (tests/python/openlit/requirements.txt).

Usage: openlit_openai.py OTLP_ENDPOINT PROVIDER_LOG.jsonl PLAN_JSON PRICES_JSON
"""

import json
import sys

from fake_provider import openai_chat_each


def main():
    otlp_endpoint, provider_log, plan_json, prices = sys.argv[1:5]
    plan = json.loads(plan_json)

    import openlit

    openlit.init(
        application_name="openlit-test-app",
        otlp_endpoint=otlp_endpoint,
        capture_message_content=False,
        disable_metrics=True,
        disable_events=True,
        pricing_json=prices,
    )
    from opentelemetry import trace

    outcomes = openai_chat_each(plan, provider_log, tracer=trace.get_tracer("openlit-test-app"))
    provider = trace.get_tracer_provider()
    provider.force_flush()
    provider.shutdown()
    print(json.dumps(outcomes))


if __name__ == "__main__":
    main()
