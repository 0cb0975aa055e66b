"""Drives the real LiteLLM gateway (its Router, with retries and a fallback
group) in front of the fake provider, with both of LiteLLM's ways into the
ledger switched on:

- its OpenTelemetry callback ("otel", with USE_OTEL_LITELLM_REQUEST_SPAN), over
  OTLP/HTTP to the ledger under test, each request inside an application span
  as a traced application would make it;
- a custom logger that writes each call's StandardLoggingPayload as a JSON
  line (what LiteLLM's custom, generic-API and bucket loggers emit).

Usage: litellm_gateway.py OTLP_TRACES_URL PAYLOADS.jsonl PROVIDER_LOG.jsonl PLAN_JSON
PLAN_JSON maps a workflow name to the statuses the provider answers with.
"""

import asyncio
import contextlib
import json
import os
import sys

os.environ["USE_OTEL_LITELLM_REQUEST_SPAN"] = "true"

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

from fake_provider import FakeProvider  # noqa: E402


def main():
    otlp_url, payloads_path, provider_log, plan_json = sys.argv[1:5]
    plan = json.loads(plan_json)

    provider = TracerProvider(resource=Resource.create({"service.name": "litellm-test-app"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_url)))
    trace.set_tracer_provider(provider)

    import litellm
    from litellm import Router
    from litellm.integrations.custom_logger import CustomLogger

    class PayloadFile(CustomLogger):
        """Writes each call's StandardLoggingPayload, success or failure."""

        def _write(self, kwargs):
            payload = kwargs.get("standard_logging_object")
            if payload is not None:
                with open(payloads_path, "a") as out:
                    out.write(json.dumps(payload, default=str) + "\n")

        async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
            self._write(kwargs)

        async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
            self._write(kwargs)

    litellm.callbacks = ["otel", PayloadFile()]

    with FakeProvider(plan, provider_log) as fake:
        deployment = {
            # The SDK's own retries are off: every retry is the Router's, so
            # LiteLLM logs each request the provider sees.
            "max_retries": 0,
            "api_key": "sk-test",
            "timeout": 10,
        }
        router = Router(
            model_list=[
                {
                    "model_name": "chat",
                    "litellm_params": {"model": "openai/gpt-4o-mini", "api_base": f"{fake.base_url}/v1", **deployment},
                },
                {
                    "model_name": "chat",
                    "litellm_params": {
                        "model": "azure/gpt-4o-mini",
                        "api_base": fake.base_url,
                        "api_version": "2024-10-21",
                        **deployment,
                    },
                },
                {
                    "model_name": "chat-backup",
                    "litellm_params": {"model": "openai/gpt-4o", "api_base": f"{fake.base_url}/v1", **deployment},
                },
            ],
            num_retries=2,
            retry_after=0,
            fallbacks=[{"chat": ["chat-backup"]}],
            disable_cooldowns=True,
        )
        tracer = trace.get_tracer("litellm-test-app")
        outcomes = {}

        # APP_SPANS=0 leaves LiteLLM's spans without a caller span, as an
        # untraced application sends them (for measuring what that loses).
        app_spans = os.environ.get("APP_SPANS", "1") != "0"

        async def one(name):
            span = tracer.start_as_current_span(f"handle {name}") if app_spans else contextlib.nullcontext()
            with span:
                try:
                    await router.acompletion(
                        model="chat", messages=[{"role": "user", "content": f"summarise wf={name}"}]
                    )
                    outcomes[name] = "ok"
                except Exception as err:  # noqa: BLE001 - the plan makes some fail
                    outcomes[name] = type(err).__name__

        async def run_all():
            # One at a time: the plan is per workflow, and the fake provider's
            # log order is then each workflow's attempt order.
            for name in plan:
                await one(name)
            # Success and failure callbacks run as tasks; let them finish.
            await asyncio.sleep(1.0)

        asyncio.run(run_all())
    provider.force_flush()
    provider.shutdown()
    print(json.dumps(outcomes))


if __name__ == "__main__":
    main()
