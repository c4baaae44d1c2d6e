"""Copy a docker image from this node (the head) to other nodes, node to node, over OpenSSH.

reach: can this node's remote shell reach each target, with a docker engine there?
send:  `docker save IMAGE` into `docker load` on every target, through one remote shell
       process per target: OpenSSH's own ciphers carry the stream, and this script only
       moves it between pipes (splice(2) for one target, no copy through Python; one read
       written to each for several) and counts the bytes. Progress comes as JSON lines;
       if the launcher goes away, the copy is stopped.

The remote shell is $RSYNC_RSH when this node's environment sets it (the one `sync
models` uses between nodes), else the job's default (ssh in batch mode).

    python3 UNIT imagecopy DIR reach JOB_JSON   # {"targets": {node: host}, "default_rsh": ...}
    python3 UNIT imagecopy DIR send JOB_JSON    # {"image": ..., "targets": ..., "default_rsh": ...}
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from .common import emit, run_directory
from .rsh import fast_shell, remote_shell

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

BLOCK = 1 << 20
BEAT = 1.0  # seconds between progress lines: also how soon a vanished launcher is noticed


def reach(job: dict[str, Any]) -> None:
    """Ask each target's engine its version through the remote shell; say what failed, per target."""
    rsh = remote_shell(job)

    def one(host: str) -> dict[str, Any]:
        argv = [*fast_shell(rsh, host), host, "docker", "version", "--format", "{{.Server.Version}}"]
        try:
            done = subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"ok": False, "failed": "ssh", "error": str(exc)}
        if done.returncode == 0:
            return {"ok": True, "engine": done.stdout.strip()}
        tail = " / ".join(done.stderr.strip().splitlines()[-2:]) or f"exit {done.returncode}"
        return {"ok": False, "failed": "ssh" if done.returncode == 255 else "docker", "error": tail}

    targets = job["targets"]
    with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        asked = {name: pool.submit(one, host) for name, host in targets.items()}
        answers = {name: future.result() for name, future in asked.items()}
    emit(ok=all(a["ok"] for a in answers.values()), rsh=" ".join(rsh), targets=answers)


def send(job: dict[str, Any]) -> None:
    """Save once, load on every target; progress lines until done; stop it all if cut off."""
    rsh, started = remote_shell(job), time.monotonic()
    save = subprocess.Popen(
        ["docker", "save", job["image"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    loads = {name: load(rsh, host) for name, host in job["targets"].items()}
    sent = dict.fromkeys(loads, 0)
    errors = {"save": b""}
    reader = threading.Thread(target=lambda: errors.update(save=save.stderr.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    mover = threading.Thread(target=move, args=(save, loads, sent), daemon=True)
    mover.start()
    try:
        while mover.is_alive():
            emit(event="progress", sent=dict(sent))
            mover.join(BEAT)
    except OSError:  # the launcher is gone (broken pipe): stop the copy
        for proc in (save, *loads.values()):
            stop(proc)
        raise SystemExit(1) from None
    answer = {name: ended(proc, sent[name]) for name, proc in loads.items()}
    save.wait()
    reader.join(5)
    said = errors["save"].decode(errors="replace").strip()[-300:]
    emit(
        ok=save.returncode == 0 and all(a["exit"] == 0 for a in answer.values()),
        save={"exit": save.returncode, "error": said},
        targets=answer,
        seconds=time.monotonic() - started,
    )


def load(rsh: list[str], host: str) -> subprocess.Popen[bytes]:
    """`docker load` on the target through the remote shell, reading from a pipe of ours."""
    return subprocess.Popen(
        [*fast_shell(rsh, host), host, "docker", "load"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def move(
    save: subprocess.Popen[bytes], loads: dict[str, subprocess.Popen[bytes]], sent: dict[str, int]
) -> None:
    """Pass the save's stream to every load still taking it; close their inputs at the end."""
    source = save.stdout.fileno()  # type: ignore[union-attr]
    sinks = {name: proc.stdin.fileno() for name, proc in loads.items()}  # type: ignore[union-attr]
    splice = getattr(os, "splice", None)  # Python 3.10+ on Linux: pipe to pipe, in the kernel
    while sinks:
        if len(sinks) == 1 and splice is not None:
            name, sink = next(iter(sinks.items()))
            try:
                moved = splice(source, sink, BLOCK)
            except OSError:  # that load ended early: its exit status says why
                break
            if not moved:
                break
            sent[name] += moved
            continue
        block = os.read(source, BLOCK)
        if not block:
            break
        for name, sink in list(sinks.items()):
            try:
                write_all(sink, block)
                sent[name] += len(block)
            except OSError:
                del sinks[name]
    for proc in loads.values():
        proc.stdin.close()  # type: ignore[union-attr]
    save.stdout.close()  # type: ignore[union-attr]  # a save nobody reads any more ends (SIGPIPE)


def write_all(fd: int, block: bytes) -> None:
    """Write the whole block (a pipe may take part of it)."""
    view = memoryview(block)
    while view:
        view = view[os.write(fd, view) :]


def ended(proc: subprocess.Popen[bytes], sent: int) -> dict[str, Any]:
    """A target's outcome: the load's exit status, its last words, the bytes it was given."""
    out = proc.stdout.read() if proc.stdout else b""
    proc.wait()
    lines = out.decode(errors="replace").strip().splitlines()
    return {"exit": proc.returncode, "error": " / ".join(lines[-2:]), "bytes": sent}


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a child and its process group, and reap it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=5)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def main(argv: list[str]) -> None:
    """imagecopy DIR reach JOB_JSON | imagecopy DIR send JOB_JSON"""
    run_directory(argv)
    job = json.loads(argv[2])
    if argv[1] == "reach":
        reach(job)
    else:
        send(job)


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
