"""Rows of the host: the GPUs as reported, py-spy for evidence (both warn). Memory: `checks.memory`. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.core.checks.report import Row

PY_SPY_HINT = (
    "without py-spy a rank that dies or wedges leaves only its log, no Python stacks: install it on "
    "every node (`VENV/bin/pip install py-spy`, or on PATH); it needs ptrace rights over the vLLM "
    "processes: root, CAP_SYS_PTRACE (`setcap cap_sys_ptrace+ep $(which py-spy)`), passwordless "
    "`sudo -n`, or kernel.yama.ptrace_scope=0"
)


def host_rows(facts: Mapping[str, Mapping[str, Any]], nnodes: int) -> list[Row]:
    """The GPUs as nvidia-smi reports them (informational), and whether stacks can be captured."""
    host = {n: f.get("host", {}) for n, f in facts.items()}
    rows = [
        Row(
            "host",
            "gpus (nvidia-smi)",
            {n: h.get("gpus") or "none reported" for n, h in host.items()},
            True,
            level="warn",
        )
    ]
    tools = {n: f.get("tools") for n, f in facts.items()}
    if all(tools.values()):
        rows.append(_py_spy_row({n: t for n, t in tools.items() if t}))
    return rows


def _py_spy_row(tools: Mapping[str, dict[str, Any]]) -> Row:
    """Where py-spy is on each node and under which right it reads our processes (warns)."""
    values = {
        n: f"{t['py_spy']} ({t.get('ptrace')})" if t.get("py_spy") else "missing" for n, t in tools.items()
    }
    ok = all(t.get("py_spy") and t.get("ptrace_ok") for t in tools.values())
    return Row("host", "py-spy (stacks on a failure)", values, ok, None if ok else PY_SPY_HINT, "warn")
