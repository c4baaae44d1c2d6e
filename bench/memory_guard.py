"""What the memory guard computes for the configs/ examples on a 128 GB DGX Spark (GB10).

No GB10 is here: each node's facts are command output as a GB10 prints it
(tests/data/gb10-nvidia-smi.txt: no dedicated GPU memory; tests/data/gb10-meminfo.txt:
121.7 GiB, a large page cache after copying weights), read by the same parsing code the
node runs, and the models' published sizes (tests/data/config-models.json). Printed twice:
with that page cache, and just after `--drop-caches` (MemFree = MemAvailable).

    python bench/memory_guard.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from launcher.core.checks.budget import gib  # noqa: E402
from launcher.core.checks.memory_rows import budgets, memory_rows  # noqa: E402
from launcher.load import plan_file  # noqa: E402
from launcher.node.scripts.memory import parse_gpu_query, parse_meminfo  # noqa: E402

DATA = ROOT / "tests" / "data"
CONFIGS = ("qwen3-next-2x-spark.yaml", "qwen3-next-2x-spark-v032.yaml", "dense-2x-spark.yaml")


def gb10_facts(model_path: str, dropped: bool = False) -> dict[str, Any]:
    """One GB10 node's facts as the facts script would send them."""
    meminfo = parse_meminfo((DATA / "gb10-meminfo.txt").read_text())
    if dropped:
        meminfo["MemFree"] = meminfo["MemAvailable"]
    model = json.loads((DATA / "config-models.json").read_text())[model_path]
    return {
        "memory": {
            "meminfo": meminfo,
            "gpus": parse_gpu_query((DATA / "gb10-nvidia-smi.txt").read_text()),
            "model_config": model["config"],
        },
        "model": {"weight_bytes": model["weight_bytes"]},
    }


def guard(config: str, dropped: bool = False) -> tuple[dict[str, Any], list[Any]]:
    """The budgets and rows of one example spec with every node a GB10."""
    spec, plan = plan_file(ROOT / "configs" / config)
    facts = {n.name: gb10_facts(spec.model.path, dropped) for n in spec.nodes}
    return budgets(spec, plan, facts), memory_rows(spec, plan, facts)


def main() -> None:
    """Print one block per example and state of the page cache."""
    for config in CONFIGS:
        for dropped in (False, True):
            found, rows = guard(config, dropped)
            b = next(iter(found.values()))
            print(f"== {config} ({'just after --drop-caches' if dropped else 'page cache as left'})")
            print(
                f"   per node: {b.kind}, total {gib(b.total)} GiB, available {gib(b.available)} "
                f"(page cache {gib(b.page_cache)}); claims {gib(b.claim)} ({b.claim_how}); "
                f"needs {gib(b.need)} (weights {gib(b.weights)} + KV for one max_model_len sequence "
                f"{gib(b.kv or 0)})"
            )
            for row in rows[2:]:
                value = next(iter(row.values.values()))
                print(f"   {'ok  ' if row.ok else 'FAIL'} {row.item}: {value}")
                if row.hint:
                    print(f"        -> {row.hint}")


if __name__ == "__main__":
    main()
