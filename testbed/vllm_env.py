"""The real CPU vLLM: reuse (or build) the cached venv and link it under the bed dir."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

from testbed.errors import TestbedError
from testbed.layout import VLLM_VERSION

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "vllm-venv.sh"
ROUTER_LOCK = SCRIPT.parent.parent / "launcher" / "catalogs" / "router-requirements.txt"
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


def ensure_router_wheels() -> Path:
    """The wheels of the router's lock, for this machine's CPU and Python (the nodes'), in a folder
    cached by the lock's hash: the bed's nodes reach no package index, so their pip is pointed at
    it (sshd's SetEnv, as a site points its nodes at a mirror) when `up` installs the router on
    the head. A minute the first time (every wheel's hash checked), at once after."""
    lock = ROUTER_LOCK
    key = hashlib.sha256(lock.read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("SPARK_LAUNCH_CACHE", Path.home() / ".cache" / "spark-launch"))
    folder = cache / "wheels" / f"router-{key}"
    if (folder / ".complete").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "-q", "--require-hashes", "--no-deps"]
    pip += ["--only-binary", ":all:", "-r", str(lock), "-d", str(folder)]
    if subprocess.run(pip, stdout=subprocess.DEVNULL, check=False).returncode != 0:
        raise TestbedError("downloading the router's wheels failed", f"run `{' '.join(pip)}` to see why")
    (folder / ".complete").touch()
    return folder


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
