"""The real CPU vLLM: reuse (or build) the cached venv and link it under the bed dir."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from testbed.errors import TestbedError
from testbed.layout import VLLM_VERSION

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "vllm-venv.sh"
ROUTER_SCRIPT = SCRIPT.with_name("router-venv.sh")
# py-spy beside vLLM, as an operator installs it: the stacks a dying or wedged rank leaves.
PY_SPY = "py-spy==0.4.3"
PY_SPY_MARKER = ".testbed-py-spy"  # in the venv: the bed added py-spy, and which


def expected_venv(version: str = VLLM_VERSION) -> Path:
    """Where scripts/vllm-venv.sh puts the venv (its cache key is the script's to compute)."""
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--where", version], stdout=subprocess.PIPE, text=True, check=False
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise TestbedError(
            f"scripts/vllm-venv.sh found no Python to build the vLLM {version} venv with",
            "run `make system-deps` (it installs python3 and its venv module)",
        )
    return Path(proc.stdout.strip())


def wait_for_other_build(venv: Path, timeout: float) -> None:
    """Wait while another process builds venv: the script would delete a half-built one."""
    deadline = time.monotonic() + timeout
    announced = False
    while venv.is_dir() and not (venv / ".complete").exists():
        if time.monotonic() > deadline:
            raise TestbedError(
                f"{venv} is still incomplete after {timeout:.0f}s",
                "if no build is running, remove that dir and run `scripts/vllm-venv.sh "
                f"{VLLM_VERSION}`; or pass --venv-wait SECONDS",
            )
        if not announced:
            print(f"testbed: waiting for a vLLM venv build in progress: {venv}", file=sys.stderr)
            announced = True
        time.sleep(5)


def ensure_venv(timeout: float = 1800.0) -> Path:
    """Return the venv path, building it with the repo's script if needed (minutes)."""
    if not SCRIPT.is_file():
        raise TestbedError(f"{SCRIPT} not found", "run from a full spark-launch checkout")
    wait_for_other_build(expected_venv(), timeout)
    # The script prints only the path on stdout; its pip chatter goes to our stderr.
    proc = subprocess.run(["bash", str(SCRIPT), VLLM_VERSION], stdout=subprocess.PIPE, text=True, check=False)
    venv = Path(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    if proc.returncode != 0 or venv is None or not (venv / "bin" / "vllm").exists():
        raise TestbedError(
            f"building the vLLM {VLLM_VERSION} venv failed ({proc.returncode})",
            f"run `bash {SCRIPT} {VLLM_VERSION}` to see why",
        )
    return venv


def ensure_router(timeout: float = 1800.0) -> Path:
    """The endpoint router's venv (scripts/router-venv.sh, from its hashed lock, cached by the lock's
    hash): a minute the first time."""
    where = subprocess.run(
        ["bash", str(ROUTER_SCRIPT), "--where"], stdout=subprocess.PIPE, text=True, check=False
    )
    if where.returncode == 0 and where.stdout.strip():
        wait_for_other_build(Path(where.stdout.strip()), timeout)
    proc = subprocess.run(["bash", str(ROUTER_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False)
    built = Path(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    if proc.returncode != 0 or built is None or not (built / "bin" / "litellm").exists():
        raise TestbedError(
            f"building the router venv failed ({proc.returncode})", f"run `bash {ROUTER_SCRIPT}` to see why"
        )
    return built


def ensure_py_spy(venv: Path) -> Path:
    """py-spy in the cached vLLM venv, added once by the bed (and recorded there) so the stacks
    of a failing rank can be captured; nothing else in the venv changes (--no-deps)."""
    binary, marker = venv / "bin" / "py-spy", venv / PY_SPY_MARKER
    if binary.exists() and marker.exists() and marker.read_text().strip() == PY_SPY:
        return binary
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", PY_SPY]
    if subprocess.run(pip, check=False).returncode != 0 or not binary.exists():
        raise TestbedError(f"installing {PY_SPY} into {venv} failed", f"run `{' '.join(pip)}` to see why")
    marker.write_text(PY_SPY + "\n")
    return binary


def link(target: Path, link_path: Path) -> None:
    """Point link_path at target, replacing an old link atomically."""
    if link_path.is_symlink() and Path(os.readlink(link_path)) == target:
        return
    if link_path.exists() and not link_path.is_symlink():
        raise TestbedError(f"{link_path} exists and is not a symlink", "move it away")
    tmp = link_path.with_name(link_path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    tmp.replace(link_path)
