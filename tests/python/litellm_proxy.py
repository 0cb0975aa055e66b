"""Drives the LiteLLM proxy server, the way most platform teams run LiteLLM:
`litellm --config` from a config file with a model group, the Router's
retries and a fallback group, its OpenTelemetry callback exporting over
OTLP/HTTP and its generic API logger posting StandardLoggingPayloads, each to
a ledger under test. The openai SDK is the proxy's client (its own retries
off: every retry is the proxy's), in front of the fake provider.

Runs in the proxy's own environment (tests/python/litellm_proxy/).

Usage: litellm_proxy.py OTLP_TRACES_URL PAYLOADS_URL PROVIDER_LOG.jsonl PLAN_JSON
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from fake_provider import FakeProvider, call_each

MASTER_KEY = "sk-attempt-ledger-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(fake_url: str) -> str:
    deployment = {"api_key": "sk-test", "max_retries": 0, "timeout": 10}
    return json.dumps(
        {
            "model_list": [
                {"model_name": "chat", "litellm_params": {"model": "openai/gpt-4o-mini", "api_base": f"{fake_url}/v1", **deployment}},
                {"model_name": "chat-backup", "litellm_params": {"model": "openai/gpt-4o", "api_base": f"{fake_url}/v1", **deployment}},
            ],
            "router_settings": {
                "num_retries": 2,
                "retry_after": 0,
                "fallbacks": [{"chat": ["chat-backup"]}],
                "disable_cooldowns": True,
            },
            "litellm_settings": {"callbacks": ["otel", "generic_api"]},
            "general_settings": {"master_key": MASTER_KEY},
        }
    )


def wait_until_up(port: int, proxy: subprocess.Popen, log: str):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proxy.poll() is not None:
            sys.exit(f"the proxy exited with {proxy.returncode}:\n{open(log).read()[-4000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health/liveliness", timeout=1)
            return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"the proxy did not come up:\n{open(log).read()[-4000:]}")


def main():
    otlp_url, payloads_url, provider_log, plan_json = sys.argv[1:5]
    plan = json.loads(plan_json)
    work = tempfile.mkdtemp(prefix="litellm-proxy-")
    port = free_port()
    with FakeProvider(plan, provider_log) as fake:
        # YAML is a superset of JSON.
        config_path = os.path.join(work, "config.yaml")
        with open(config_path, "w") as out:
            out.write(config(fake.base_url))
        env = {
            **os.environ,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "OTEL_EXPORTER": "otlp_http",
            "OTEL_ENDPOINT": otlp_url,
            "GENERIC_LOGGER_ENDPOINT": payloads_url,
            "DEFAULT_FLUSH_INTERVAL_SECONDS": "1",
            # Spans leave the batch processor within 200 ms, not 5 s.
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }
        log_path = os.path.join(work, "proxy.log")
        litellm = os.path.join(os.path.dirname(sys.executable), "litellm")
        with open(log_path, "w") as log:
            proxy = subprocess.Popen(
                [litellm, "--config", config_path, "--host", "127.0.0.1", "--port", str(port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until_up(port, proxy, log_path)
            import openai

            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=MASTER_KEY, max_retries=0)
            outcomes = call_each(
                plan,
                lambda name: client.chat.completions.create(
                    model="chat", messages=[{"role": "user", "content": f"summarise wf={name}"}]
                ),
                openai.APIError,
            )
            # Both loggers send what they hold within a second or so.
            time.sleep(4)
        finally:
            proxy.terminate()
            proxy.wait(timeout=30)
    print(json.dumps(outcomes))


if __name__ == "__main__":
    main()
