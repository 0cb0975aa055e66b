"""A loopback stand-in for an OpenAI-compatible LLM provider (and Anthropic's
Messages API, on paths ending in /messages) that answers on a plan, for tests
only.

Each request names its workflow in the last user message (`wf=<name>`). The
plan maps a workflow name to the HTTP statuses of its successive requests
(after the list runs out, 200). Every request is appended to the provider's
own log (workflow, path, model, status), the ground truth a test compares
the ledger with.

With a request limit (`request_limit`, else FAKE_PROVIDER_REQUEST_LIMIT from
the environment), every response states the rate-limit headroom as the
providers do (OpenAI's `x-ratelimit-*` with a duration reset, Anthropic's
`anthropic-ratelimit-*` with an RFC 3339 instant): each request uses one of
the limit's requests and 150 of its twice as many requests' tokens, and once the requests are used
up, every further request is answered 429 whatever the plan says.
"""

import json
import os
import re
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# A reasoning model's usage: 12 of the 30 output tokens were reasoning.
USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 30,
    "total_tokens": 150,
    "completion_tokens_details": {"reasoning_tokens": 12},
}

# Anthropic's usage counts cache reads and writes apart from input_tokens:
# 130 input tokens in all, 20 of them read from the cache, 10 written to it.
ANTHROPIC_USAGE = {
    "input_tokens": 100,
    "output_tokens": 30,
    "cache_read_input_tokens": 20,
    "cache_creation_input_tokens": 10,
}
ANTHROPIC_ERRORS = {429: "rate_limit_error", 529: "overloaded_error", 400: "invalid_request_error"}


def stream_chat_completion(handler, workflow: str, body: dict, headroom: dict[str, str]):
    """An OpenAI chat completion as server-sent events, with the usage chunk
    when the request asks for it (`stream_options.include_usage`)."""
    base = {
        "id": f"chatcmpl-{workflow}-{time.time_ns()}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model") or "unknown",
    }
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": USAGE})
    data = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    encoded = data.encode()
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("content-length", str(len(encoded)))
    for name, value in headroom.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(encoded)


def anthropic_payload(workflow: str, body: dict, status: int) -> dict:
    """A Messages API answer: the message, or its error envelope."""
    if status != 200:
        kind = ANTHROPIC_ERRORS.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": f"planned {status}"}}
    return {
        "id": f"msg_{workflow}_{time.time_ns()}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model") or "unknown",
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": ANTHROPIC_USAGE,
    }


REQUEST_TOKENS = USAGE["total_tokens"]


def headroom_headers(path: str, limit: int, used: int) -> dict[str, str]:
    """What a provider states of its limits after `used` of `limit` requests."""
    requests_left = max(limit - used, 0)
    # Twice the requests' worth of tokens: the requests run out first.
    tokens_limit = 2 * limit * REQUEST_TOKENS
    tokens_left = max(tokens_limit - used * REQUEST_TOKENS, 0)
    if path.endswith("/messages"):
        reset = (datetime.now(timezone.utc) + timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "anthropic-ratelimit-requests-limit": str(limit),
            "anthropic-ratelimit-requests-remaining": str(requests_left),
            "anthropic-ratelimit-requests-reset": reset,
            "anthropic-ratelimit-tokens-limit": str(tokens_limit),
            "anthropic-ratelimit-tokens-remaining": str(tokens_left),
            "anthropic-ratelimit-tokens-reset": reset,
        }
    return {
        "x-ratelimit-limit-requests": str(limit),
        "x-ratelimit-remaining-requests": str(requests_left),
        "x-ratelimit-reset-requests": "1m0s",
        "x-ratelimit-limit-tokens": str(tokens_limit),
        "x-ratelimit-remaining-tokens": str(tokens_left),
        "x-ratelimit-reset-tokens": "20ms",
    }


class FakeProvider:
    def __init__(self, plan: dict[str, list[int]], log_path: str, request_limit: int | None = None):
        self.plan = {name: list(statuses) for name, statuses in plan.items()}
        self.log_path = log_path
        self.lock = threading.Lock()
        if request_limit is None and os.environ.get("FAKE_PROVIDER_REQUEST_LIMIT"):
            request_limit = int(os.environ["FAKE_PROVIDER_REQUEST_LIMIT"])
        self.request_limit = request_limit
        self.used = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                provider.answer(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address
        return f"http://{host}:{port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()

    def answer(self, handler, body):
        messages = body.get("messages") or []
        text = messages[-1].get("content", "") if messages else str(body.get("input", ""))
        match = re.search(r"wf=([\w.-]+)", text if isinstance(text, str) else json.dumps(text))
        workflow = match.group(1) if match else "unknown"
        with self.lock:
            statuses = self.plan.get(workflow, [])
            status = statuses.pop(0) if statuses else 200
            headroom = {}
            if self.request_limit is not None:
                self.used += 1
                if self.used > self.request_limit:
                    status = 429
                headroom = headroom_headers(handler.path, self.request_limit, self.used)
            with open(self.log_path, "a") as log:
                log.write(
                    json.dumps(
                        {
                            "workflow": workflow,
                            "path": handler.path,
                            "model": body.get("model"),
                            "status": status,
                            "at": time.time(),
                        }
                    )
                    + "\n"
                )
        if handler.path.endswith("/messages"):
            payload = anthropic_payload(workflow, body, status)
        elif status == 200 and body.get("stream"):
            return stream_chat_completion(handler, workflow, body, headroom)
        elif status == 200:
            payload = {
                "id": f"chatcmpl-{workflow}-{time.time_ns()}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model") or "unknown",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "done"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": USAGE,
            }
        else:
            kind = "rate_limit_exceeded" if status == 429 else "server_error"
            payload = {"error": {"message": f"planned {status}", "type": kind, "code": kind}}
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("request-id", f"req_{workflow}_{time.time_ns()}")
        handler.send_header("content-length", str(len(data)))
        for name, value in headroom.items():
            handler.send_header(name, value)
        if status == 429:
            # Short, so the clients' own backoff keeps the test quick.
            handler.send_header("retry-after-ms", "10")
            handler.send_header("retry-after", "0")
        handler.end_headers()
        handler.wfile.write(data)


def call_each(plan: dict, call, errors, tracer=None) -> dict:
    """Calls `call(name)` for each workflow of the plan, one at a time (so
    the provider's log is each workflow's attempt order), each under an
    application span when `tracer` is given; returns each workflow's
    outcome: "ok", or the class name of the `errors` exception it raised."""
    import contextlib

    outcomes = {}
    for name in plan:
        span = tracer.start_as_current_span(f"handle {name}") if tracer else contextlib.nullcontext()
        with span:
            try:
                call(name)
                outcomes[name] = "ok"
            except errors as err:
                outcomes[name] = type(err).__name__
    return outcomes


def openai_chat_each(plan: dict, provider_log: str, tracer=None) -> dict:
    """`call_each` with the openai SDK's chat completions against a fake
    provider serving `plan`: what every openai instrumentation test drives."""
    import openai

    with FakeProvider(plan, provider_log) as fake:
        client = openai.OpenAI(base_url=f"{fake.base_url}/v1", api_key="sk-test")
        return call_each(
            plan,
            lambda name: client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": f"classify wf={name}"}]
            ),
            openai.APIError,
            tracer=tracer,
        )


if __name__ == "__main__":
    # Standalone, for clients in other languages: serves PLAN_JSON, logging
    # to LOG, prints its base URL, and stops when its standard input closes.
    import sys

    plan_json, log = sys.argv[1:3]
    with FakeProvider(json.loads(plan_json), log) as fake:
        print(fake.base_url, flush=True)
        sys.stdin.read()
