"""The node side of spark-launch: start, watch and stop one node's vLLM, and report as JSON.

Sent over SSH on every call (`python3 - OP DIR ...` with this file on stdin), so nothing
is installed on the nodes. Standard library only, Python 3.8+. DIR is the node's run
directory, `~/.spark-launch/<cluster>/<node>`: state.json (what runs), logs/, exit codes.

Every process it starts carries SPARK_LAUNCH_RUN=<cluster>/<node>/<run id> in its
environment. `stop` signals only process groups holding that marker, so it never touches
a process that is not ours, and it still finds our workers after the leader died.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

MARKER = "SPARK_LAUNCH_RUN"
# The wrapper records vLLM's exit status where `status` can read it after the process is gone.
WRAPPER = '"$@"; code=$?; echo "$code" > "$SPARK_LAUNCH_EXIT_FILE"; exit "$code"'


def emit(**fields: Any) -> None:
    """Print the one JSON line the launcher reads."""
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def read_json(path: str, default: Any = None) -> Any:
    """A JSON file's content, or `default` when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_json(path: str, data: Any) -> None:
    """Replace a JSON file atomically."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_text(path: str | None) -> str | None:
    """A small file's text, or None."""
    try:
        with open(str(path)) as f:
            return f.read()
    except OSError:
        return None


def our_processes(prefix: str) -> dict[int, int]:
    """{pid: pgid} of live (non-zombie) processes whose environment carries the marker prefix."""
    found = {}
    needle = f"{MARKER}={prefix}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            if not any(item.startswith(needle) for item in environ):
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X"):  # a zombie is gone for our purposes
            found[pid] = int(fields[2])
    return found


def node_prefix(directory: str) -> str:
    """The marker prefix of this node's processes: <cluster>/<node>/."""
    cluster, node = directory.rstrip("/").split("/")[-2:]
    return f"{cluster}/{node}/"


def start(directory: str) -> None:
    """Start the command in run.json detached, in its own session; remove run.json at once."""
    job_path = os.path.join(directory, "run.json")
    job = read_json(job_path)
    with contextlib.suppress(OSError):
        os.remove(job_path)  # it holds the secrets: gone before anything else can fail
    if job is None:
        return emit(ok=False, error=f"no readable run.json in {directory}")
    prefix = node_prefix(directory)
    if our_processes(prefix):
        return emit(ok=False, error="already running", state=read_json(os.path.join(directory, "state.json")))
    os.makedirs(os.path.join(directory, "logs"), exist_ok=True)
    run_id = job["run_id"]
    log = os.path.join(directory, "logs", run_id + ".log")
    exit_file = os.path.join(directory, "logs", run_id + ".exit")
    env = dict(os.environ)
    env.update(job["env"])
    env[MARKER] = prefix + run_id
    env["SPARK_LAUNCH_EXIT_FILE"] = exit_file
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            ["bash", "-c", WRAPPER, "spark-launch-" + job["cluster"], *job["argv"]],
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    state = {
        "cluster": job["cluster"],
        "node": job["node"],
        "run_id": run_id,
        "pid": proc.pid,
        "pgid": proc.pid,
        "started_at": time.time(),
        "digest": job["digest"],
        "log": log,
        "exit_file": exit_file,
        "argv": job["argv"],
        "env_names": sorted(job["env"]),
    }
    write_json(os.path.join(directory, "state.json"), state)
    return emit(ok=True, state=state)


def status(directory: str, offset: int | None = None) -> None:
    """What runs here: state, liveness, exit status, and the log from `offset` on."""
    state = read_json(os.path.join(directory, "state.json"))
    procs = our_processes(node_prefix(directory))
    result: dict[str, Any] = {"ok": True, "state": state, "alive": bool(procs), "processes": len(procs)}
    if state:
        code = (read_text(state.get("exit_file")) or "").strip()
        result["exit_code"] = int(code) if code.lstrip("-").isdigit() else None
        result["leader_alive"] = state["pid"] in procs
        if offset is not None:
            result.update(read_log(state["log"], offset))
    emit(**result)


def read_log(path: str, offset: int, limit: int = 262144) -> dict[str, Any]:
    """Up to `limit` bytes of the log from `offset`, and where the next read starts."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(limit)
    except OSError:
        return {"log_size": 0, "log": ""}
    return {"log_size": offset + len(data), "log": data.decode("utf-8", "replace")}


def signal_all(procs: dict[int, int], sig: int) -> None:
    """Signal every process group of ours, and each process directly (a member may have left its group)."""
    for group in set(procs.values()):
        with contextlib.suppress(OSError):
            os.killpg(group, sig)
    for pid in procs:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def wait_gone(prefix: str, seconds: float) -> dict[int, int]:
    """Wait until none of ours is left, or `seconds` pass; what is left."""
    deadline = time.time() + seconds
    left = our_processes(prefix)
    while left and time.time() < deadline:
        time.sleep(0.2)
        left = our_processes(prefix)
    return left


def stop(directory: str, grace: float) -> None:
    """SIGTERM every process of ours, SIGKILL what is left after `grace` s, verify none remain."""
    prefix = node_prefix(directory)
    procs = our_processes(prefix)
    signal_all(procs, signal.SIGTERM)
    left = wait_gone(prefix, grace)
    signal_all(left, signal.SIGKILL)
    remaining = wait_gone(prefix, 5)
    state_path = os.path.join(directory, "state.json")
    state = read_json(state_path)
    if state and procs:
        state["stopped_at"] = time.time()
        write_json(state_path, state)
    emit(
        ok=not remaining,
        found=len(procs),
        groups=len(set(procs.values())),
        killed=len(left),
        remaining=len(remaining),
    )


def logs(directory: str, lines: int, follow: bool) -> None:
    """Hand over to tail(1) on the current run's log."""
    state = read_json(os.path.join(directory, "state.json"))
    if not state or not os.path.exists(state["log"]):
        sys.stdout.write("(no log on this node yet)\n")
        return
    sys.stdout.flush()
    os.execvp("tail", ["tail", "-n", str(lines), *(["-F"] if follow else []), state["log"]])


def lock_dir(directory: str) -> str:
    """The cluster's lock: a directory beside the node directories (mkdir is atomic)."""
    return os.path.join(os.path.dirname(directory.rstrip("/")), "lock")


def lock(directory: str, holder: str) -> None:
    """Take the cluster's lock, or report who holds it."""
    path = lock_dir(directory)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.mkdir(path)
    except FileExistsError:
        return emit(ok=False, holder=read_json(os.path.join(path, "holder.json"), {}))
    write_json(os.path.join(path, "holder.json"), json.loads(holder))
    return emit(ok=True)


def unlock(directory: str, token: str) -> None:
    """Release the lock if `token` holds it ('*' forces it)."""
    path = lock_dir(directory)
    holder = read_json(os.path.join(path, "holder.json"), {})
    if token != "*" and holder.get("token") != token:
        return emit(ok=False, holder=holder)
    for name in ("holder.json", "holder.json.tmp"):
        with contextlib.suppress(OSError):
            os.remove(os.path.join(path, name))
    with contextlib.suppress(OSError):
        os.rmdir(path)
    return emit(ok=True)


def main(argv: list[str]) -> None:
    """Dispatch one operation."""
    op, directory, rest = argv[0], os.path.abspath(os.path.expanduser(argv[1])), argv[2:]
    if op == "start":
        start(directory)
    elif op == "status":
        status(directory, int(rest[0]) if rest else None)
    elif op == "stop":
        stop(directory, float(rest[0]) if rest else 10.0)
    elif op == "logs":
        logs(directory, int(rest[0]), rest[1:2] == ["follow"])
    elif op == "lock":
        lock(directory, rest[0])
    elif op == "unlock":
        unlock(directory, rest[0])
    else:
        emit(ok=False, error="unknown operation " + op)


if __name__ == "__main__":
    main(sys.argv[1:])
