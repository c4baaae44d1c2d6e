"""The probe's cache, found by the facts call: an unchanged venv node's probe is answered without
starting its vLLM, and anything the answer depends on that changes is asked anew.

The node side is real (the facts script, the probe script's own key, a venv interpreter);
the vLLM package is a stand-in of one file, which cannot resolve anything: a probe that
actually runs here fails, so a row saying "from the node's cache" proves nothing ran. The
real probe runs in the conformance tier and on the test bed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from launcher.core.render import shell_words
from launcher.node.cluster import Cluster
from launcher.node.scripts import bundle
from launcher.operations.gate import run_check
from launcher.operations.gathering.probing import probe_tag
from tests.conftest import base_spec, local_cluster

ANSWER = {"ok": True, "vllm_version": "0.32.0", "resolved": {"missing": []}}


def venv(root: Path) -> Path:
    """A venv of this interpreter holding a one-file `vllm` package, recorded as wheels record it."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = root / "lib" / version / "site-packages"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"").digest()).rstrip(b"=").decode()
    (site / "vllm-0.32.0.dist-info").mkdir()
    (site / "vllm-0.32.0.dist-info" / "RECORD").write_text(f"vllm/__init__.py,sha256={digest},0\n")
    (root / "bin").mkdir()
    # The interpreter, each start of it counted (`starts`): a probe answered by the facts call starts none.
    real = Path(sys.executable).resolve()
    (root / "bin" / "python").write_text(
        f'#!/bin/bash\necho start >> {root}/starts\nexec -a "$0" {real} "$@"\n'
    )
    (root / "bin" / "python").chmod(0o755)
    (root / "bin" / "vllm").write_text("#!/bin/sh\nexit 1\n")
    (root / "bin" / "vllm").chmod(0o755)
    (root / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).resolve().parent}\n")
    return root


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    data = base_spec("0.32.0", nodes=2)
    data["vllm"]["venv"] = str(venv(tmp_path / "venv"))
    data["model"]["path"] = str(tmp_path / "model")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"model_type": "qwen3_next"}')
    return local_cluster(data, tmp_path / "home")


def probe_key(cluster: Cluster, name: str, tmp_path: Path) -> str:
    """The key the probe itself computes on `name`, in the environment the probe runs in there."""
    script = tmp_path / "probe.py"
    script.write_text(bundle("probe"))
    node = next(n for n in cluster.plan.nodes if n.name == name)
    argv = list(node.argv[2:])  # after `vllm serve`
    code = (
        f"ns = {{'__name__': 'probe'}}; exec(open({str(script)!r}).read(), ns); "
        f"print(ns['cache_key']({{'argv': {argv!r}, 'env': {{}}}}, {probe_tag()!r}))"
    )
    words = [
        "env",
        *[f"{k}={v}" for k, v in node.env.items()],
        f"{cluster.spec.vllm.venv}/bin/python",
        "-c",
        code,
    ]
    done = cluster.executor.run(name, shell_words(words))
    assert done.ok, done.stderr
    return done.stdout.strip()


def answers(cluster: Cluster) -> dict[str, Any]:
    """The probe's answers row; {"error": per node} when a probe ran and failed."""
    rows = {r.item: r for r in run_check(cluster, probe=True, collective=False).rows}  # the probe alone
    if "vLLM resolves the command" in rows:
        return {"error": rows["vLLM resolves the command"].values}
    return dict(rows["answers"].values)


def keep(tmp_path: Path, key: str) -> None:
    """An answer in the node's probe cache under `key`, as the probe saves one."""
    cache = tmp_path / "home" / ".spark-launch" / "cache" / "probe"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / f"{key}.json").write_text(json.dumps(ANSWER))


def starts(tmp_path: Path) -> int:
    """How often the venv's interpreter was started."""
    log = tmp_path / "venv" / "starts"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_an_answer_saved_by_the_probe_is_found_by_the_facts_call(cluster: Cluster, tmp_path: Path) -> None:
    for name in cluster.names:
        keep(tmp_path, probe_key(cluster, name, tmp_path))
    before = starts(tmp_path)
    assert answers(cluster) == {"n1": "from the node's cache", "n2": "from the node's cache"}
    assert starts(tmp_path) == before  # no probe was started: each facts call found its answer


@pytest.mark.parametrize("change", ["model config", "vllm file", "another package", "node env"])
def test_a_change_the_answer_depends_on_is_asked_anew(cluster: Cluster, tmp_path: Path, change: str) -> None:
    for name in cluster.names:
        keep(tmp_path, probe_key(cluster, name, tmp_path))
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    if change == "model config":
        (tmp_path / "model" / "config.json").write_text('{"model_type": "qwen3"}')
    elif change == "vllm file":
        (site / "vllm" / "__init__.py").write_text("# patched\n")
    elif change == "another package":  # e.g. transformers upgraded: vLLM's files unchanged
        (site / "transformers-5.0.0.dist-info").mkdir()
    else:
        cluster.executor.node_env = {"n2": {"VLLM_USE_V1": "0"}}  # type: ignore[attr-defined]
    found = answers(cluster)
    if change == "node env":  # only that node: its probe really ran, and failed without a vLLM
        assert set(found["error"]) == {"n2"}
    else:
        assert set(found["error"]) == {"n1", "n2"}


def test_the_agent_reads_the_probes_answer_by_the_probes_own_marker_without_importing_it() -> None:
    """The launcher's copy of the marker is the probe script's, and the agent (imported by every
    command that reaches a node) does not import the probe script, whose imports are a vLLM
    venv's concern (importlib.metadata, argparse, sysconfig: 40 ms of every start-up)."""
    import subprocess

    from launcher.node import agent
    from launcher.node.scripts import probe

    assert agent.PROBE_MARKER == probe.MARKER
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, launcher.node.agent; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "launcher.node.scripts.probe" not in loaded
