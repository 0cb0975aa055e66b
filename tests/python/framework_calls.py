"""Drives a framework instrumented by Arize OpenInference, whose tracer never
makes its spans current, over the openai SDK (with the OpenTelemetry httpx
instrumentation for the SDK's own retries) against the fake provider,
exporting over OTLP/HTTP to the ledger under test; with `sdk`, OpenInference's
openai instrumentation runs beside it, as a team that instruments both
layers has it. Each workflow runs under an application span of its own (its
own trace), as a request handler would.

- `langchain`: a prompt | ChatOpenAI chain (`max_retries=2`, the SDK's
  retries). LangChain's OpenInference tracer starts its spans from callbacks
  and never attaches them, so the SDK's HTTP spans are children of the
  application span, beside the chain.
- `llama_index`: LlamaIndex's OpenAI LLM (`max_retries=2`, which is both the
  SDK's retries and LlamaIndex's own retry decorator around the SDK: up to
  nine requests a call). Its span handler starts spans without attaching
  them either.

Usage: framework_calls.py FRAMEWORK sdk|no-sdk OTLP_TRACES_URL PROVIDER_LOG.jsonl PLAN_JSON
"""

import json
import sys

import openai
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from fake_provider import FakeProvider, call_each


def langchain_call(base_url: str):
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="gpt-4o-mini", base_url=base_url, api_key="sk-test", max_retries=2)
    chain = ChatPromptTemplate.from_messages([("user", "classify wf={name}")]) | llm
    return lambda name: chain.invoke({"name": name})


def llama_index_call(base_url: str):
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai import OpenAI

    llm = OpenAI(model="gpt-4o-mini", api_base=base_url, api_key="sk-test", max_retries=2)
    return lambda name: llm.chat([ChatMessage(role="user", content=f"classify wf={name}")])


def instrument_framework(framework: str, provider):
    if framework == "langchain":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
        return langchain_call
    if framework == "llama_index":
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

        LlamaIndexInstrumentor().instrument(tracer_provider=provider)
        return llama_index_call
    raise SystemExit(f"unknown framework {framework!r}: langchain or llama_index")


def main():
    framework, sdk, otlp_url, provider_log, plan_json = sys.argv[1:6]
    plan = json.loads(plan_json)
    provider = TracerProvider(resource=Resource.create({"service.name": f"{framework}-test-app"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_url)))
    trace.set_tracer_provider(provider)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    make_call = instrument_framework(framework, provider)
    if sdk == "sdk":
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("framework-test-app")
    with FakeProvider(plan, provider_log) as fake:
        call = make_call(f"{fake.base_url}/v1")
        # What the framework raises once the SDK (and the framework) gave up.
        outcomes = call_each(plan, call, (openai.APIError, Exception), tracer=tracer)
    provider.force_flush()
    provider.shutdown()
    print(json.dumps(outcomes))


if __name__ == "__main__":
    main()
