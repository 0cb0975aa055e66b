"""A loopback stand-in for an OpenAI-compatible LLM provider that answers on a
plan, for tests only.

Each request names its workflow in the last user message (`wf=<name>`). The
plan maps a workflow name to the HTTP statuses of its successive requests
(after the list runs out, 200). Every request is appended to the provider's
own log (workflow, path, model, status), the ground truth a test compares
the ledger with.
"""

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}


class FakeProvider:
    def __init__(self, plan: dict[str, list[int]], log_path: str):
        self.plan = {name: list(statuses) for name, statuses in plan.items()}
        self.log_path = log_path
        self.lock = threading.Lock()
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
        if status == 200:
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
        handler.send_header("content-length", str(len(data)))
        if status == 429:
            # Short, so the clients' own backoff keeps the test quick.
            handler.send_header("retry-after-ms", "10")
            handler.send_header("retry-after", "0")
        handler.end_headers()
        handler.wfile.write(data)
