"""Follow this node's run while `up` waits: stream its log and its death as JSON lines.

One long-lived call per node instead of a poll a second: every new piece of the log is
sent as soon as it is written ({"log": TEXT, "log_size": N}), the rank's exit as soon as
it happens ({"alive": false, "exit_code": C}, after the rest of the log), and a heartbeat
every second ({"alive": true}) so the launcher notices a lost connection within seconds.
The rank has exited when its wrapper wrote the exit file (venv runtime) or its container
stopped (docker runtime: `docker wait` says so, instead of a `docker inspect` every tick,
whose CLI starts would take the cores vLLM is starting on); a rank killed with its whole
group leaves no exit file, so the processes carrying our marker are counted too. The
script ends when the rank has exited, when the launcher stops reading (its next line
fails), or after SECONDS.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from .common import (
    container_state,
    emit,
    our_processes,
    read_json,
    read_text,
    run_directory,
    state_path,
)

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

TICK = 0.1  # seconds between looks at the log and the exit file
HEARTBEAT = 1.0
CHUNK = 262144


def follow_container_log(state: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Copy the container's log into the run's log file as it is written."""
    out = open(state["log"], "wb")  # noqa: SIM115 - the child writes to it while we watch
    return subprocess.Popen(
        ["docker", "logs", "--follow", state["container"]], stdout=out, stderr=subprocess.STDOUT
    )


class ContainerExit:
    """The container's end, as `docker wait` (one process, blocked until then) reports it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.waiter = self._wait()

    def _wait(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["docker", "wait", self.name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def exited(self) -> tuple[bool, int | None]:
        """(exited, code): `docker inspect` only once `docker wait` has returned, to be sure."""
        if self.waiter.poll() is None:
            return False, None
        info = container_state(self.name)
        if info["running"]:  # the wait itself failed (the engine restarted, say): wait again
            self.waiter = self._wait()
        return (not info["running"], info["exit_code"])

    def close(self) -> None:
        """Stop waiting."""
        if self.waiter.poll() is None:
            self.waiter.terminate()
            self.waiter.wait()


def exit_code(
    state: dict[str, Any], directory: str, last_scan: list[float], container: ContainerExit | None
) -> tuple[bool, int | None]:
    """(exited, code) of this node's rank."""
    if container is not None:
        return container.exited()
    code = (read_text(state.get("exit_file")) or "").strip()
    if code.lstrip("-").isdigit():
        return True, int(code)
    now = time.monotonic()
    if now - last_scan[0] >= HEARTBEAT:  # a group killed whole writes no exit file
        last_scan[0] = now
        return (not our_processes(directory), None)
    return False, None


def read_new(path: str, offset: int) -> tuple[str, int]:
    """The log's text from `offset` (at most CHUNK bytes), and the next offset."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(CHUNK)
    except OSError:
        return "", offset
    return data.decode("utf-8", "replace"), offset + len(data)


def watch(directory: str, offset: int, seconds: float) -> None:
    """Stream the log from `offset` and the rank's exit until it exits, or `seconds` pass."""
    state = read_json(state_path(directory))
    if not state:
        return emit(alive=False, exit_code=None, error=f"nothing was started in {directory}")
    follower = follow_container_log(state) if state.get("container") else None
    container = ContainerExit(state["container"]) if state.get("container") else None
    last_scan = [time.monotonic()]
    deadline, last_sent = time.monotonic() + seconds, 0.0
    try:
        while time.monotonic() < deadline:
            exited, code = exit_code(state, directory, last_scan, container)
            if exited:
                time.sleep(TICK)  # the last lines a dying rank writes
            text, offset = read_new(state["log"], offset)
            while text:
                emit(log=text, log_size=offset)
                last_sent = time.monotonic()
                text, offset = read_new(state["log"], offset) if exited else ("", offset)
            if exited:
                return emit(alive=False, exit_code=code)
            if time.monotonic() - last_sent >= HEARTBEAT:
                emit(alive=True)
                last_sent = time.monotonic()
            time.sleep(TICK)
    except BrokenPipeError:  # the launcher stopped reading: nothing more to do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        if follower is not None:
            follower.terminate()
        if container is not None:
            container.close()
    return None


def main(argv: list[str]) -> None:
    """watch DIR OFFSET SECONDS"""
    watch(run_directory(argv), int(argv[1]), float(argv[2]))


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
