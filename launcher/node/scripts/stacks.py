"""Capture every process of ours on this node: its Python stacks (py-spy) and the log's tail.

Run when a rank died or the engine is wedged, before anything is stopped, so the evidence of
where each rank sat (which collective, which wait) outlives the restart. py-spy first dumps a
process the usual way (pausing it for a consistent stack); a process that cannot be paused (a
frozen one, SIGSTOP) is read without pausing. py-spy needs ptrace rights over the processes:
root, or CAP_SYS_PTRACE, or `kernel.yama.ptrace_scope=0` for the same user; without them it
is run through `sudo -n` when that works. The files go to DIR/evidence/<run id>-<time>/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from .common import (
    emit,
    our_processes,
    read_json,
    read_text,
    run_directory,
    state_path,
    which,
)

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

LIMIT = 200_000  # characters of one process's dump kept
INSTALL = "install py-spy on the node: `VENV/bin/pip install py-spy` (or put it on PATH)"


def find_py_spy(venv: str | None) -> str | None:
    """py-spy on PATH, in the vLLM venv, or in ~/.local/bin (pip install --user)."""
    candidates = [which("py-spy")]
    candidates += [os.path.join(venv, "bin", "py-spy")] if venv else []
    candidates.append(os.path.expanduser("~/.local/bin/py-spy"))
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def ptrace_rights() -> dict[str, Any]:
    """Whether py-spy may read our processes as this user, and the prefix that gives it the right."""
    scope = (read_text("/proc/sys/kernel/yama/ptrace_scope") or "0").strip()
    if os.geteuid() == 0:
        return {"ok": True, "how": "root", "prefix": []}
    if scope == "0":
        return {"ok": True, "how": "ptrace_scope=0 (same user)", "prefix": []}
    if (
        which("sudo")
        and subprocess.run(["sudo", "-n", "true"], capture_output=True, check=False).returncode == 0
    ):
        return {"ok": True, "how": f"ptrace_scope={scope}, through sudo -n", "prefix": ["sudo", "-n"]}
    return {
        "ok": False,
        "how": f"ptrace_scope={scope}, not root, no passwordless sudo",
        "prefix": [],
    }


def tool_facts(venv: str | None) -> dict[str, Any]:
    """For `check`: where py-spy is (None: missing), and whether it may read our processes."""
    rights = ptrace_rights()
    return {"py_spy": find_py_spy(venv), "ptrace": rights["how"], "ptrace_ok": rights["ok"]}


def python_processes(directory: str, state: dict[str, Any] | None) -> list[int]:
    """Our processes on this node that run Python (the bash wrapper and `sleep` are not)."""
    if state and state.get("container_id"):
        pids = [
            int(p)
            for p in os.listdir("/proc")
            if p.isdigit() and state["container_id"] in (read_text(f"/proc/{p}/cgroup") or "")
        ]
    else:
        pids = list(our_processes(directory))
    found = []
    for pid in sorted(pids):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        if exe.startswith("python"):
            found.append(pid)
    return found


def dump(command: list[str], pid: int) -> dict[str, Any]:
    """py-spy's dump of one process: paused if it can be, else read as it stands."""
    cmdline = (read_text(f"/proc/{pid}/cmdline") or "").replace("\0", " ").strip()
    answer: dict[str, Any] = {"pid": pid, "cmdline": cmdline[:300]}
    for extra in ([], ["--nonblocking"]):
        try:
            done = subprocess.run(
                [*command, "dump", "--pid", str(pid), *extra],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            answer.update(ok=False, error=str(exc))
            continue
        if done.returncode == 0:
            return {**answer, "ok": True, "paused": not extra, "stacks": done.stdout[:LIMIT]}
        answer.update(ok=False, error=(done.stderr.strip().splitlines() or ["?"])[0][:300])
    return answer


def tail_of(path: str | None, lines: int) -> str:
    """The last `lines` lines of the run's log (read from its last 1 MiB)."""
    try:
        with open(str(path), "rb") as f:
            f.seek(max(0, os.path.getsize(str(path)) - (1 << 20)))
            data = f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"({path}: {exc.strerror})\n"
    return "\n".join(data.splitlines()[-lines:]) + "\n"


def stacks_text(dumps: list[dict[str, Any]], why: str) -> str:
    """Every dump in one file, each under a header naming the process."""
    parts = [f"# {why}\n"]
    for d in dumps:
        how = (
            ("paused" if d.get("paused") else "read without pausing")
            if d["ok"]
            else f"FAILED: {d.get('error')}"
        )
        parts.append(f"## pid {d['pid']} ({how}): {d['cmdline']}\n{d.get('stacks', '')}")
    return "\n".join(parts)


def capture(directory: str, request: dict[str, Any]) -> None:
    """Dump every Python process of ours in parallel, write the files, answer with their text."""
    state = read_json(state_path(directory))
    py_spy = find_py_spy(request.get("venv"))
    rights = ptrace_rights()
    pids = python_processes(directory, state)
    dumps: list[dict[str, Any]] = []
    if py_spy:
        threads = [
            threading.Thread(target=lambda p=p: dumps.append(dump([*rights["prefix"], py_spy], p)))
            for p in pids
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        dumps.sort(key=lambda d: d["pid"])
    run_id = request.get("run_id") or (state or {}).get("run_id") or "unknown"
    folder = os.path.join(directory, "evidence", f"{run_id}-{time.strftime('%Y%m%dT%H%M%S')}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    texts = {"log-tail.txt": tail_of((state or {}).get("log"), int(request.get("lines", 200)))}
    if py_spy:
        texts["stacks.txt"] = stacks_text(dumps, request.get("why", ""))
    for name, text in texts.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    emit(
        ok=True,
        run_id=run_id,
        py_spy=py_spy,
        hint=None if py_spy else INSTALL,
        ptrace=rights["how"],
        processes=[{k: v for k, v in d.items() if k != "stacks"} for d in dumps],
        python_pids=pids,
        folder=folder,
        files={name: os.path.join(folder, name) for name in texts},
        texts=texts,
    )


def main(argv: list[str]) -> None:
    """stacks DIR REQUEST_JSON"""
    capture(run_directory(argv), json.loads(argv[1]))


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
