"""Capture every process of ours on this node: its Python stacks (py-spy) and the log's tail.

Run when a rank died or the engine is wedged, before anything is stopped, so the evidence of
where each rank sat (which collective, which wait) outlives the restart. py-spy first dumps a
process the usual way (pausing it for a consistent stack); a process that cannot be paused (a
frozen one, SIGSTOP) is read without pausing. The files go to DIR/evidence/<run id>-<time>/.

py-spy reads a process's memory through ptrace: whoever may do that reads everything the
process holds (API keys, prompts), not only its stacks. So the least right that works, per
process: py-spy itself when this user may trace it (root; or the process is this user's own and
kernel.yama.ptrace_scope is 0); else `sudo -n <py-spy's absolute path> dump --pid N`, which one
sudoers line allows and nothing else (deploy/upgrading-safely.md), and only with a py-spy this
user cannot change (else that line would make it root). A refusal is the evidence's answer for
that process, never a failure of the capture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from launcher.node.scripts.common import (  # inlined when sent
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
RUNBOOK = "the sudoers line for py-spy: deploy/upgrading-safely.md"
SYSTEM = ("/usr/local/bin/py-spy", "/usr/bin/py-spy")  # where root installs it for everyone
# kernel.yama.ptrace_scope: who may attach to a process (ptrace, as py-spy does).
SCOPES = {
    "0": "classic: a process may read any other of its user, root any",
    "1": "restricted: a process may read only its own descendants (no vLLM process is py-spy's), root any",
    "2": "admin-only: root (CAP_SYS_PTRACE) alone may read a process",
    "3": "none: no process may be read, root included, until a reboot",
}


def candidates(venv: str | None) -> list[str]:
    """Where py-spy may be: PATH, the vLLM venv, ~/.local/bin (pip --user), the system's folders."""
    found = [which("py-spy")]
    found += [os.path.join(venv, "bin", "py-spy")] if venv else []
    found += [os.path.expanduser("~/.local/bin/py-spy"), *SYSTEM]
    usable = [os.path.abspath(c) for c in found if c and os.access(c, os.X_OK) and not os.path.isdir(c)]
    return list(dict.fromkeys(usable))


def find_py_spy(venv: str | None) -> str | None:
    """The py-spy this user runs itself."""
    return next(iter(candidates(venv)), None)


def changeable(path: str, euid: int) -> bool:
    """Whether this user (or any user but root) can replace the file: it, its folder, or the
    folder of a link to it is owned by this user or writable by its group or by everyone."""
    real = os.path.realpath(path)
    for each in (os.path.dirname(path), real, os.path.dirname(real)):
        info = os.stat(each)
        if info.st_uid == euid or info.st_mode & 0o022:
            return True
    return False


def sudo_py_spy(venv: str | None, euid: int) -> str | None:
    """The py-spy that `sudo -n` may run: one that root owns and this user cannot change."""
    return next((c for c in candidates(venv) if not changeable(c, euid)), None)


def file_capability(path: str | None) -> bool:
    """Whether the file carries file capabilities (`setcap`): then every user who runs it gets them."""
    try:
        return bool(path) and bool(os.getxattr(str(path), "security.capability"))
    except OSError:
        return False


def ptrace_scope() -> str | None:
    """kernel.yama.ptrace_scope, or None without Yama (then the classic rule: as 0)."""
    return (read_text("/proc/sys/kernel/yama/ptrace_scope") or "").strip() or None


def owner(pid: int) -> int | None:
    """The uid a process runs as (None: gone)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def direct(scope: str | None, euid: int, uid: int | None) -> bool:
    """Whether py-spy run as this user may read a process of `uid` without any help."""
    if scope == "3":
        return False
    return euid == 0 or (uid == euid and scope in (None, "0"))


def sudo_allowed(command: list[str]) -> bool:
    """Whether sudo would run exactly `command` for this user without a password (`sudo -n -l`
    asks the policy, running nothing)."""
    sudo = which("sudo")
    if not sudo:
        return False
    try:
        done = subprocess.run(
            [sudo, "-n", "-l", "--", *command], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def rights(venv: str | None) -> dict[str, Any]:
    """How py-spy will read our processes here: directly (root, or this user's own processes under
    ptrace_scope 0), through `sudo -n` for the rest, or not at all, and why."""
    scope, euid = ptrace_scope(), os.geteuid()
    elevated = sudo_py_spy(venv, euid)
    said = f"ptrace_scope={scope or 'none (no Yama)'}"
    capped = [c for c in candidates(venv) if file_capability(c)]
    if capped:
        return {
            "ok": False,
            "how": f"{capped[0]} carries a file capability (setcap): every user who can run it reads "
            f"every process's memory; remove it: sudo setcap -r {capped[0]}",
        }
    if scope == "3":
        return {"ok": False, "how": f"{said}: {SCOPES['3']}"}
    if euid == 0:
        return {"ok": True, "how": "root"}
    own = scope in (None, "0")
    sudo = elevated is not None and sudo_allowed([elevated, "dump", "--pid", "1"])
    why = f"no sudo rule for {elevated}" if elevated else "no py-spy that root owns, for a sudo rule"
    if own:
        others = f"others through sudo -n {elevated}" if sudo else f"others (a container's): {why}"
        return {"ok": True, "how": f"{said}: own processes directly, {others}"}
    if sudo:
        return {"ok": True, "how": f"{said}: through sudo -n {elevated}"}
    return {"ok": False, "how": f"{said} ({SCOPES.get(scope or '0', '?')}): {why} ({RUNBOOK})"}


def tool_facts(venv: str | None) -> dict[str, Any]:
    """For `check`: where py-spy is (None: missing), and whether it may read our processes."""
    found = rights(venv)
    return {"py_spy": find_py_spy(venv), "ptrace": found["how"], "ptrace_ok": found["ok"]}


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


def command_for(pid: int, scope: str | None, venv: str | None) -> list[str] | str:
    """The command that dumps process `pid` with the least right that works (without its
    `dump --pid` words), or why there is none."""
    euid, uid = os.geteuid(), owner(pid)
    py_spy, sudo = find_py_spy(venv), which("sudo")
    if py_spy and direct(scope, euid, uid):
        return [py_spy]
    if uid is None:
        return "the process is gone"
    if scope == "3":
        return f"ptrace_scope=3: {SCOPES['3']}"
    whose = "this user's process" if uid == euid else f"a process of uid {uid}"
    needs = f"{whose}, under ptrace_scope={scope or 'none (no Yama)'}, needs sudo -n py-spy"
    elevated = sudo_py_spy(venv, euid)
    if not sudo:
        return f"{needs}, and sudo is not installed ({RUNBOOK})"
    if not elevated:
        return (
            f"{needs}, and no py-spy here is root's alone (a sudo rule for one this user can change "
            f"would make it root; {RUNBOOK})"
        )
    return [sudo, "-n", "--", elevated]


def dump(command: list[str], pid: int) -> dict[str, Any]:
    """py-spy's dump of one process: paused if it can be, else read as it stands. A refusal of
    sudo is said as such, and not tried again."""
    cmdline = (read_text(f"/proc/{pid}/cmdline") or "").replace("\0", " ").strip()
    answer: dict[str, Any] = {"pid": pid, "cmdline": cmdline[:300]}
    elevated = os.path.basename(command[0]) == "sudo"
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
            return {
                **answer,
                "ok": True,
                "paused": not extra,
                "sudo": elevated,
                "stacks": done.stdout[:LIMIT],
            }
        first = (done.stderr.strip().splitlines() or ["?"])[0][:300]
        if elevated and first.startswith(("sudo:", "Sorry,")):
            return {**answer, "ok": False, "error": f"sudo -n refused {command[-1]}: {first} ({RUNBOOK})"}
        answer.update(ok=False, error=first)
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
            + (", through sudo -n" if d.get("sudo") else "")
            if d["ok"]
            else f"FAILED: {d.get('error')}"
        )
        parts.append(f"## pid {d['pid']} ({how}): {d['cmdline']}\n{d.get('stacks', '')}")
    return "\n".join(parts)


def dump_one(pid: int, scope: str | None, venv: str | None) -> dict[str, Any]:
    """One process's dump, or why it could not be read."""
    command = command_for(pid, scope, venv)
    if isinstance(command, list):
        return dump(command, pid)
    cmdline = (read_text(f"/proc/{pid}/cmdline") or "").replace("\0", " ").strip()
    return {"pid": pid, "cmdline": cmdline[:300], "ok": False, "error": command}


def summary(dumps: list[dict[str, Any]], scope: str | None) -> str:
    """How the processes were read: for the answer's `ptrace`."""
    if os.geteuid() == 0 and scope != "3":
        return "root"
    counts = {
        "directly": sum(bool(d["ok"] and not d.get("sudo")) for d in dumps),
        "through sudo -n": sum(bool(d["ok"] and d.get("sudo")) for d in dumps),
        "not read": sum(not d["ok"] for d in dumps),
    }
    return f"ptrace_scope={scope or 'none (no Yama)'}: " + ", ".join(
        f"{n} {how}" for how, n in counts.items()
    )


def capture(directory: str, request: dict[str, Any]) -> None:
    """Dump every Python process of ours in parallel, write the files, answer with their text."""
    state = read_json(state_path(directory))
    venv = request.get("venv")
    py_spy, scope = find_py_spy(venv), ptrace_scope()
    pids = python_processes(directory, state)
    dumps: list[dict[str, Any]] = []
    if py_spy:
        threads = [threading.Thread(target=lambda p=p: dumps.append(dump_one(p, scope, venv))) for p in pids]
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
        ptrace=summary(dumps, scope),
        processes=[{k: v for k, v in d.items() if k not in ("stacks", "sudo")} for d in dumps],
        python_pids=pids,
        folder=folder,
        files={name: os.path.join(folder, name) for name in texts},
        texts=texts,
    )


def main(argv: list[str]) -> None:
    """stacks DIR REQUEST_JSON"""
    capture(run_directory(argv), json.loads(argv[1]))


if __name__ == "__main__":  # python3 - NAME DIR ARGS...
    main(sys.argv[2:])
