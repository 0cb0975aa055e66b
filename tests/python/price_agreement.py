"""Cases for tests/it/prices.rs's agreement with LiteLLM's own cost calculator.

For a seeded sample of every provider's chat, completion, responses and
embedding models in the pinned LiteLLM price map, every service tier (the
Batch API included), prompt size (below and past each long-context
threshold) and kind of token (cache reads, five-minute and one-hour cache
writes, reasoning, web searches) that LiteLLM states a price for with a key
of its own, writes one JSON line: the call as a LiteLLM user would make it
(custom_llm_provider and model), the tier, the usage, and what LiteLLM's
calculator charges for it in USD (its float, written with repr).

Left out, as the price file cannot state them (docs/prices.md, "Where the
ledger differs from LiteLLM"): a kind, tier or prompt size LiteLLM prices
only by falling back to another key (the ledger calls that cost unknown),
off-peak hours, tiered_pricing tables and regional uplifts (none of which a
sampled attempt carries), web searches of providers other than OpenAI and
Anthropic (Google's free daily grounding requests), and rows that state no
price of their own (LiteLLM prices `chatgpt/...` subscription rows at 0 and
would look others up under another name).

Where LiteLLM's calculator for a provider reads fewer of the map's keys
than the map states (GENERIC below, each with the code that skips them),
the case is priced by LiteLLM's generic_cost_per_token, the routine every
other provider's row goes through, so the map's own prices are compared.

    python price_agreement.py --seed 1 --per-provider 6 --out cases.jsonl

(A file, not stdout: LiteLLM prints to stdout when a name does not resolve.)
"""

import argparse
import json
import os
import random
import re

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
from litellm.cost_calculator import batch_cost_calculator  # noqa: E402
from litellm.litellm_core_utils.llm_cost_calc.utils import generic_cost_per_token  # noqa: E402
from litellm.litellm_core_utils.llm_cost_calc.tool_call_cost_tracking import (  # noqa: E402
    StandardBuiltInToolCostTracking,
)
from litellm.types.utils import (  # noqa: E402
    CacheCreationTokenDetails,
    CompletionTokensDetailsWrapper,
    PromptTokensDetailsWrapper,
    ServerToolUse,
    Usage,
)

MODES = {"chat", "completion", "responses", "embedding"}
TIERS = {"flex", "priority", "ultrafast", "balanced", "decisions"}
SEARCH_PROVIDERS = {"openai", "anthropic"}
THRESHOLD = re.compile(r"^input_cost_per_token_above_(\d+)(k?)_tokens$")

# Providers whose own cost_per_token drops prices their rows state (the
# rows' `source` is the provider's price page, which charges them).
GENERIC = {
    # llms/fireworks_ai/cost_calculator.py calls generic_cost_per_token
    # without the service_tier: the _priority prices of
    # docs.fireworks.ai/serverless/pricing are never applied.
    "fireworks_ai": "service tier dropped",
    # llms/perplexity/cost_calculator.py reads only the base input, output
    # and cache-read prices: the _above_200k_tokens prices of
    # docs.perplexity.ai/docs/agent-api/models are never applied.
    "perplexity": "long-context prices dropped",
}


def call_of(key, entry):
    """(custom_llm_provider, model) as a LiteLLM user names the call."""
    provider = entry["litellm_provider"]
    if provider.startswith(("vertex_ai-", "fireworks_ai-")):
        provider = provider.split("-", 1)[0]
    route, _, rest = key.partition("/")
    if rest and (route in litellm.provider_list or route == provider):
        return route, rest
    return provider, key


def usage(prompt, cached, written, written_1h, output, reasoning, searches):
    details = PromptTokensDetailsWrapper(
        cached_tokens=cached,
        cache_creation_tokens=written,
        cache_creation_token_details=CacheCreationTokenDetails(
            ephemeral_5m_input_tokens=written - written_1h, ephemeral_1h_input_tokens=written_1h
        )
        if written
        else None,
    )
    extra = {"server_tool_use": ServerToolUse(web_search_requests=searches)} if searches else {}
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=output,
        total_tokens=prompt + output,
        prompt_tokens_details=details,
        completion_tokens_details=CompletionTokensDetailsWrapper(reasoning_tokens=reasoning) if reasoning else None,
        **extra,
    )


def litellm_cost(provider, model, tier, u, searches):
    if tier == "batch":
        prompt, completion = batch_cost_calculator(u, model, provider)
    elif provider in GENERIC:
        prompt, completion = generic_cost_per_token(
            model=model, usage=u, custom_llm_provider=provider, service_tier=None if tier == "standard" else tier
        )
    else:
        prompt, completion = litellm.cost_per_token(
            model=model, custom_llm_provider=provider, usage_object=u, service_tier=None if tier == "standard" else tier
        )
    cost = prompt + completion
    if searches:
        cost += StandardBuiltInToolCostTracking.get_cost_for_built_in_tools(
            model=model, response_object=None, usage=u, custom_llm_provider=provider
        )
    return cost


def suffix(tier):
    return {"standard": "", "batch": "_batches"}.get(tier, f"_{tier}")


def rows_of(info, provider):
    """(tier, threshold or None, inclusive) rows LiteLLM prices with keys of their own."""
    thresholds = sorted(
        int(m.group(1)) * (1000 if m.group(2) else 1) for k in info if (m := THRESHOLD.match(k)) and info[k] is not None
    )
    labels = {int(m.group(1)) * (1000 if m.group(2) else 1): m.group(1) + m.group(2) for k in info if (m := THRESHOLD.match(k))}
    tiers = ["standard"] + [
        t for t in sorted(TIERS | {"batch"}) if info.get(f"input_cost_per_token{suffix(t)}") is not None
    ]
    for tier in tiers:
        if info.get(f"output_cost_per_token{suffix(tier)}") is None:
            continue
        yield tier, None, thresholds
        for threshold in thresholds:
            label = labels[threshold]
            keys = [f"{kind}_above_{label}_tokens{suffix(tier)}" for kind in ("input_cost_per_token", "output_cost_per_token")]
            if all(info.get(k) is not None for k in keys):
                yield tier, (threshold, label), thresholds


def kinds_of(info, tier, threshold):
    """The cache kinds the row states with keys of its own."""
    above = f"_above_{threshold[1]}_tokens" if threshold else ""
    key = lambda kind: f"{kind}{above}{suffix(tier)}"  # noqa: E731
    return {
        "cached": info.get(key("cache_read_input_token_cost")) is not None,
        "written": info.get(key("cache_creation_input_token_cost")) is not None,
        "written_1h": info.get(key("cache_creation_input_token_cost_above_1hr")) is not None,
    }


def cases(rng, per_provider):
    cost_map = litellm.model_cost
    by_provider = {}
    for key, entry in sorted(cost_map.items()):
        if not isinstance(entry, dict) or entry.get("mode") not in MODES or "litellm_provider" not in entry:
            continue
        if entry.get("off_peak_pricing") or entry.get("tiered_pricing"):
            continue
        if entry.get("input_cost_per_token") is None:
            continue
        by_provider.setdefault(entry["litellm_provider"], []).append(key)
    for litellm_provider, keys in sorted(by_provider.items()):
        for key in rng.sample(keys, min(per_provider, len(keys))):
            provider, model = call_of(key, cost_map[key])
            try:
                info = litellm.get_model_info(model=model, custom_llm_provider=provider)
            except Exception:  # noqa: BLE001: a name LiteLLM cannot look up is not a case
                continue
            if info.get("input_cost_per_token") is None:
                continue
            inclusive = provider == "xai"
            medium = (info.get("search_context_cost_per_query") or {}).get("search_context_size_medium") or 0
            for tier, threshold, thresholds in rows_of(info, provider):
                if threshold is None:
                    ceiling = min(thresholds) - 1 if thresholds else 150_000
                    prompt = rng.randint(1_000, max(1_000, ceiling - (1 if inclusive else 0)))
                else:
                    # At the threshold for a provider that counts it in (xAI),
                    # else past it.
                    prompt = threshold[0] if inclusive and rng.random() < 0.5 else threshold[0] + rng.randint(1, 50_000)
                kinds = kinds_of(info, tier, threshold)
                mixes = [(0, 0, 0, 0, 0)]
                if kinds["cached"]:
                    mixes.append((prompt // 3, 0, 0, 0, 0))
                if kinds["written"]:
                    mixes.append((0, prompt // 4, 0, 0, 0))
                if kinds["written_1h"]:
                    both = prompt // 4 if kinds["written"] else 0
                    mixes.append((0, both + prompt // 5, prompt // 5, 0, 0))
                mixes.append((0, 0, 0, 1, 0))
                if medium > 0 and litellm_provider in SEARCH_PROVIDERS:
                    mixes.append((0, 0, 0, 0, rng.randint(1, 20)))
                for cached, written, written_1h, with_reasoning, searches in mixes:
                    output = rng.randint(1, 5_000)
                    reasoning = output // 3 if with_reasoning else 0
                    u = usage(prompt, cached, written, written_1h, output, reasoning, searches)
                    yield {
                        "litellm_key": key,
                        "provider": provider,
                        "model": model,
                        "tier": tier,
                        "input_tokens": prompt,
                        "cached_input_tokens": cached,
                        "cache_write_input_tokens": written,
                        "cache_write_1h_input_tokens": written_1h,
                        "output_tokens": output,
                        "reasoning_output_tokens": reasoning,
                        "web_search_requests": searches,
                        "litellm_usd": repr(litellm_cost(provider, model, tier, u, searches)),
                    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--per-provider", type=int, default=6)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    litellm.suppress_debug_info = True
    rng = random.Random(args.seed)
    with open(args.out, "w") as out:
        for case in cases(rng, args.per_provider):
            out.write(json.dumps(case) + "\n")


if __name__ == "__main__":
    main()
