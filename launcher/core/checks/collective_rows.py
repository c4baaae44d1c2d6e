"""Rows of the collective preflight: every connection vLLM opens, then the all-reduce. Pure.

A connection row names the node that must accept it and the one that opens it; the
all-reduce row gives each node's measured latency and bandwidth, or where and why it failed.
"""

from __future__ import annotations

from collections.abc import Mapping

from launcher.core.answers.preflight_answer import PreflightAnswer
from launcher.core.checks.check_report import Row
from launcher.core.checks.connections import Connection
from launcher.core.plan import Plan


def preflight_rows(
    plan: Plan,
    connections: tuple[Connection, ...],
    backends: tuple[str, ...],
    answers: Mapping[str, PreflightAnswer],
) -> list[Row]:
    """One row per connection vLLM opens (source -> target), then one per backend's all-reduce."""
    address = {n.name: n.address for n in plan.nodes}
    rows = [_connection_row(c, answers[c.source], address) for c in connections]
    # Where only connections failed, the all-reduce was rightly not tried: those rows say why.
    only_connections = all(a.ok or a.stage == "connections" for a in answers.values())
    return rows + [_collective_row(b, plan, answers, only_connections) for b in backends]


def _connection_row(c: Connection, answer: PreflightAnswer, address: Mapping[str, str]) -> Row:
    how = answer.reached.get(c.target)
    ok = how == "ok"
    shown = how if how is not None else f"not tried: {answer.stage}: {answer.error or '?'}"
    hint = None
    if not ok and how is not None:
        hint = (
            f"{c.target} must accept TCP from {c.source} ({address[c.source]}) on any port: vLLM binds "
            f"its message queues and gloo to random ports on {address[c.target]} (VLLM_HOST_IP); a "
            f"firewall on {c.target} that drops them makes vLLM hang after the rendezvous. E.g. on "
            f"{c.target}: iptables -I INPUT -s {address[c.source]} -j ACCEPT (or ufw allow from "
            f"{address[c.source]})"
        )
    elif not ok:
        hint = f"{c.source}'s preflight stopped before its connections: see the all-reduce row"
    label = ", ".join(c.uses)
    return Row("network", f"{c.source} -> {c.target} ({label})", {c.source: shown}, ok, hint)


def _collective_row(
    backend: str, plan: Plan, answers: Mapping[str, PreflightAnswer], only_connections: bool
) -> Row:
    item = f"{backend} all-reduce ({len(plan.nodes)} nodes)"
    values = {n.name: _result(backend, answers[n.name]) for n in plan.nodes}
    ok = all(backend in a.figures for a in answers.values())
    if ok:
        return Row("network", item, values, True)
    if only_connections:
        shown = dict.fromkeys(values, "not run: a connection failed")
        return Row("network", item, shown, False, "fix the connections above first", level="warn")
    hint = (
        "the nodes could not run a collective over the plan's network settings (the env, interfaces "
        "and master address vLLM gets): check `interface` and `address` (GLOO_SOCKET_IFNAME, "
        "NCCL_SOCKET_IFNAME, VLLM_HOST_IP), `hca` (NCCL_IB_HCA) and the RoCE link"
    )
    return Row("network", item, values, False, hint)


def _result(backend: str, answer: PreflightAnswer) -> str:
    """'180 us, 1.20 GB/s' (latency of 4 bytes, bus bandwidth), or where and why it failed."""
    got = answer.figures.get(backend)
    if got:
        return f"{got.get('latency_us', 0):.0f} us, {got.get('busbw_gbps', 0):.2f} GB/s"
    if answer.ok:
        return "not run"
    return f"{answer.stage}: {answer.error or 'ended without an answer'}"


def skipped_row(plan: Plan, why: str) -> Row:
    """The preflight did not run (the cluster runs, or a node lacks the vLLM it runs under)."""
    return Row(
        "network", "collective preflight", {plan.nodes[0].name: f"skipped: {why}"}, False, level="warn"
    )
