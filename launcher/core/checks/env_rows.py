"""Rows of the environment vLLM will inherit: identical except the per-node network variables. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.core.checks.check_report import Row, same
from launcher.core.plan import Plan
from launcher.core.spec.spec_checks import PER_NODE_ENV


def env_rows(plan: Plan, facts: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """The environment vLLM will see: identical except the per-node network variables."""
    effective = {}
    for node in plan.nodes:
        env = {**facts[node.name].get("env", {}), **node.env}
        effective[node.name] = {k: v for k, v in env.items() if k not in PER_NODE_ENV}
    keys = sorted({k for env in effective.values() for k in env})
    rows = [
        same(
            "env",
            k,
            {n: env.get(k, "(unset)") for n, env in effective.items()},
            f"{k} differs between the nodes' environments (their shell profiles or sshd): set it in the "
            "spec's env to make it identical, or remove it from the node",
        )
        for k in keys
    ]
    bad = [r for r in rows if not r.ok]
    return [*bad, Row("env", f"{len(rows) - len(bad)} engine variable(s) identical", {}, True)]
