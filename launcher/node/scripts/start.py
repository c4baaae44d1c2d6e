"""Start the job on stdin detached, in its own session.

The job (JSON, secret values included) comes on stdin, so it never touches the node's disk;
with it, for the head, the run's receipt to keep beside the run directories (`keep`): one call
starts a node, whatever its login shell costs.

venv runtime: the argv runs under a small bash wrapper that records its exit status.
docker runtime: `docker run --detach`; the container is the process group.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .common import (
    MARKER,
    container_state,
    docker,
    emit,
    keep_file,
    node_prefix,
    our_processes,
    private_dirs,
    proc_stat,
    read_json,
    run_directory,
    state_path,
    write_json,
)

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

# The wrapper records vLLM's exit status where `status` can read it after the process is gone.
WRAPPER = '"$@"; code=$?; echo "$code" > "$SPARK_LAUNCH_EXIT_FILE"; exit "$code"'


def read_job(text: str) -> dict[str, Any] | None:
    """The job from stdin's text (None when it is not one)."""
    try:
        job = json.loads(text)
    except ValueError:
        return None
    return job if isinstance(job, dict) else None


def start(directory: str, text: str) -> None:
    """Start the job in `text` (stdin's) detached, in its own session."""
    job = read_job(text)
    if job is None:
        return emit(ok=False, error="no job on stdin")
    try:
        private_dirs(os.path.join(directory, "logs"))
    except OSError as exc:
        return emit(ok=False, error=f"cannot create the run directory {directory}: {exc.strerror or exc}")
    keep = job.get("keep")
    if isinstance(keep, dict):  # best effort: a receipt that cannot be kept never stops a start
        keep_file(str(keep.get("path")), str(keep.get("text")))
    if job.get("container"):
        return start_container(directory, job)
    prefix = node_prefix(directory)
    if our_processes(directory):
        return emit(ok=False, error="already running", state=read_json(state_path(directory)))
    run_id = job["run_id"]
    log = os.path.join(directory, "logs", run_id + ".log")
    exit_file = os.path.join(directory, "logs", run_id + ".exit")
    env = dict(os.environ)
    env.update(job["env"])
    env[MARKER] = prefix + run_id
    env["SPARK_LAUNCH_EXIT_FILE"] = exit_file
    # A program under `~/` is the node user's: the endpoint's router, where the launcher keeps it.
    argv = [os.path.expanduser(job["argv"][0]), *job["argv"][1:]] if job["argv"] else []
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            ["bash", "-c", WRAPPER, "spark-launch-" + job["cluster"], *argv],
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    leader = proc_stat(proc.pid)  # the run's session: its leader's pid, told apart by its start
    state = {
        "cluster": job["cluster"],
        "node": job["node"],
        "run_id": run_id,
        "pid": proc.pid,
        "pgid": proc.pid,
        "sid": proc.pid,
        "leader_start": leader[3] if leader else None,
        "started_at": time.time(),
        "digest": job["digest"],
        "log": log,
        "exit_file": exit_file,
        "argv": job["argv"],
        "env_names": sorted(job["env"]),
    }
    write_json(state_path(directory), state)
    return emit(ok=True, state=state)


def start_container(directory: str, job: dict[str, Any]) -> None:
    """`docker run --detach` the planned command; its env file (secrets too) lives only meanwhile."""
    name = job["container"]
    found = container_state(name)
    if found["running"]:
        return emit(ok=False, error=f"container {name} is already running")
    if found["exists"] and found["label"] != job["cluster"]:
        return emit(
            ok=False,
            error=f"a container named {name} that spark-launch did not start exists: remove or rename it",
        )
    docker("rm", "--force", name)  # a stopped container of an earlier run holds the name
    env = {**job["env"], MARKER: node_prefix(directory) + job["run_id"]}
    if any("\n" in value for value in env.values()):
        return emit(ok=False, error="docker env files cannot hold a value with a newline")
    env_file = os.path.join(directory, "node.env")
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.writelines(f"{key}={value}\n" for key, value in env.items())
    try:
        done = subprocess.run(job["argv"], cwd=directory, capture_output=True, text=True, check=False)
    finally:
        os.remove(env_file)
    if done.returncode != 0:
        return emit(ok=False, error=f"docker run failed: {done.stderr.strip()[-500:]}")
    state = {
        "cluster": job["cluster"],
        "node": job["node"],
        "run_id": job["run_id"],
        "pid": None,
        "container": name,
        "container_id": done.stdout.strip(),
        "started_at": time.time(),
        "digest": job["digest"],
        "log": os.path.join(directory, "logs", job["run_id"] + ".log"),
        "argv": job["argv"],
        "env_names": sorted(job["env"]),
    }
    write_json(state_path(directory), state)
    return emit(ok=True, state=state)


def main(argv: list[str]) -> None:
    """start DIR < JOB"""
    start(run_directory(argv), sys.stdin.read())


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
