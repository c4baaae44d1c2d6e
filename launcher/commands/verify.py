"""Proof that the served cluster works: a completion, and prefix-cache hits that grow.

On a hybrid model in align mode hits come only in whole blocks, and the last prompt
token is always recomputed, so the probe prompt spans more than one block; the same
fresh prompt is sent up to three times (the first repeat can miss on vLLM 0.32).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from launcher.core.serving.state import Check, Verification
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import NodeError
from launcher.operations.running.head_health import metric_totals

HITS = "vllm:prefix_cache_hits"
CACHE_INFO = "vllm:cache_config_info"


def cache_config(text: str) -> dict[str, str]:
    """The labels of vllm:cache_config_info: the cache config as the running server sees it."""
    for family in text_string_to_metric_families(text):
        if family.name == CACHE_INFO and family.samples:
            return dict(family.samples[0].labels)
    return {}


def verify(cluster: Cluster) -> Verification:
    """Run the checks against the head, through its SSH connection."""
    result = Verification()
    served = _model(cluster, result)
    if served is None:
        return result
    model, max_len = served
    _completion(cluster, model, result)
    metrics = _metrics(cluster)
    result.cache_config = cache_config(metrics)
    if cluster.plan.prefix_caching:
        _prefix_cache(cluster, model, int(result.cache_config.get("block_size", "16")), max_len, result)
    return result


def _post(cluster: Cluster, path: str, payload: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    status, body = cluster.http("POST", path, json.dumps(payload).encode(), timeout=timeout)
    if status != 200:
        raise SparkLaunchError(f"POST {path} answered {status}: {body[:300].decode(errors='replace')}")
    answer: dict[str, Any] = json.loads(body)
    return answer


def _metrics(cluster: Cluster) -> str:
    status, body = cluster.http("GET", "/metrics", timeout=30)
    if status != 200:
        raise SparkLaunchError(f"GET /metrics answered {status}")
    return body.decode()


def _model(cluster: Cluster, result: Verification) -> tuple[str, int] | None:
    try:
        entry = cluster.served_model()
    except NodeError as exc:
        result.checks.append(Check("models", False, exc.message))
        return None
    result.checks.append(
        Check("models", True, f"serves {entry['id']} (max_model_len {entry.get('max_model_len')})")
    )
    return str(entry["id"]), int(entry.get("max_model_len") or 1 << 20)


def _completion(cluster: Cluster, model: str, result: Verification) -> None:
    try:
        answer = _post(cluster, "/v1/completions", {"model": model, "prompt": "w5 w6 w7", "max_tokens": 8})
        text = answer["choices"][0]["text"]
        result.checks.append(
            Check("completion", True, f"{answer['usage']['completion_tokens']} token(s): {text!r}")
        )
    except (SparkLaunchError, KeyError, IndexError, ValueError) as exc:
        result.checks.append(Check("completion", False, str(exc)))


def fresh_prompt(low: int, high: int, rng: random.Random, count: Callable[[str], int]) -> str:
    """A never-seen prompt of `low` to `high` tokens, measured with the server's own tokenizer."""
    words: list[str] = []
    while count(" ".join(words)) < low:
        words += [f"w{rng.randrange(3, 1000)}" for _ in range(max(4, (low - count(" ".join(words))) // 2))]
    while count(" ".join(words)) > high:
        words.pop()
    return " ".join(words)


def _prefix_cache(cluster: Cluster, model: str, block: int, max_len: int, result: Verification) -> None:
    def count(prompt: str) -> int:
        return int(_post(cluster, "/tokenize", {"model": model, "prompt": prompt})["count"]) if prompt else 0

    # More than one whole block (the last token is always recomputed), less than two, and
    # room for one generated token.
    low, high = block + 8, min(2 * block - 1, max_len - 8)
    if low > high:
        result.checks.append(
            Check(
                "prefix cache",
                False,
                f"max_model_len {max_len} is too small to span one "
                f"{block}-token block; cannot prove prefix caching",
            )
        )
        return
    try:
        prompt = fresh_prompt(low, high, random.Random(), count)
        before = metric_totals(_metrics(cluster)).get(HITS, 0.0)
        for _ in range(3):
            _post(cluster, "/v1/completions", {"model": model, "prompt": prompt, "max_tokens": 1})
            result.hits.append(metric_totals(_metrics(cluster)).get(HITS, 0.0) - before)
            if result.hits[-1] > 0:
                break
    except (SparkLaunchError, KeyError, ValueError) as exc:
        result.checks.append(Check("prefix cache", False, str(exc)))
        return
    grew = result.hits[-1] if result.hits else 0.0
    whole = grew > 0 and grew % block == 0
    result.checks.append(
        Check(
            "prefix cache",
            whole,
            f"a {count(prompt)}-token prompt sent {len(result.hits)} time(s): "
            "vllm:prefix_cache_hits_total grew by "
            f"{', '.join(f'{h:.0f}' for h in result.hits)} (block size {block})",
        )
    )
