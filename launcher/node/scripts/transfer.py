"""Copy model files from this node (the source) to another node with rsync over SSH.

reach: can this node's remote shell reach the target, and does the target have rsync?
send:  run the job's rsync (its file list on rsync's stdin), reporting progress as JSON
       lines; if the launcher goes away, the copy is stopped (a later run resumes it).
       At the end, `verified`: the files rsync sent (its out-format names each) whose
       source is still exactly what the manifest hashed (the cache key of its sha256 is
       unchanged: no write since). rsync checks every file it sends against a whole-file
       checksum computed on both sides, so with exit 0 those files hold, on the target,
       the bytes whose sha256 the source's manifest has: the target need not hash them.
       With `relay`, rsync's remote shell is this script (`rsh`), whose stream goes through
       a local socket to stdin/stdout and so to spark-launch, which passes it on to the
       target: no SSH between the nodes is needed. Progress then goes to stderr.
rsh:   that remote shell: hand rsync's remote command and stream to the socket.

The remote shell is $RSYNC_RSH when this node's environment sets it, else the job's
default (ssh in batch mode): operators point it at another ssh config or key that way.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

from .common import emit, run_directory, take_json, unit_file, which
from .manifest import cache_key, load_cache
from .rsh import fast_shell, remote_shell

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any, BinaryIO

PROGRESS = re.compile(rb"^\s*([\d,]+)\s+\d+%")
SENT = b"SPARK_LAUNCH_SENT "  # rsync's out-format line for each file it sent (core.sync.transfer)
ESCAPED = re.compile(rb"\\#([0-7]{3})")  # how rsync writes an unprintable byte of a name
BEAT = 0.5  # seconds between progress lines: also how soon a vanished launcher is noticed


def reach(job: dict[str, Any]) -> None:
    """Run `rsync --version` on the target through the remote shell; say what failed."""
    words = remote_shell(job)
    rsh = shlex.join(words)
    local = (
        subprocess.run(["rsync", "--version"], capture_output=True, check=False) if which("rsync") else None
    )
    if local is None or local.returncode != 0:
        return emit(ok=False, rsh=rsh, failed="rsync", error="rsync is not installed on this node")
    try:
        done = subprocess.run(
            [*fast_shell(words, job["host"]), job["host"], "rsync", "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return emit(ok=False, rsh=rsh, failed="ssh", error=str(exc))
    if done.returncode == 0:
        return emit(ok=True, rsh=rsh)
    tail = " / ".join(done.stderr.strip().splitlines()[-2:]) or f"exit {done.returncode}"
    failed = "ssh" if done.returncode == 255 else "remote rsync"
    return emit(ok=False, rsh=rsh, failed=failed, error=tail)


def send(directory: str, job: dict[str, Any]) -> None:
    """Run rsync with the job's files; progress lines until it ends; stop it if we are cut off."""
    events = sys.stderr if job.get("relay") else sys.stdout
    argv = list(job["argv"])
    env = dict(os.environ, RSYNC_RSH=shlex.join(fast_shell(remote_shell(job), job["host"])))
    server = None
    if job.get("relay"):
        sock_path = os.path.join(directory, "sync", f"relay-{os.getpid()}.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(sock_path)
        server.listen(1)
        # rsync's remote shell: this very script again, from the unit the stub has just hashed
        argv.insert(1, f"--rsh=python3 -S {unit_file()} transfer {directory} rsh {sock_path}")
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        start_new_session=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(b"".join(f.encode() + b"\0" for f in job["files"]))
    proc.stdin.close()
    errors: list[bytes] = []
    threading.Thread(target=lambda: errors.extend(proc.stderr or []), daemon=True).start()
    if server is not None:
        threading.Thread(target=relay, args=(server, events), daemon=True).start()
    sent: set[str] = set()
    try:
        watch(proc, proc.stdout, events, sent)
    except OSError:  # the launcher is gone (broken pipe): stop the copy; a later run resumes
        stop(proc)
        raise SystemExit(1) from None
    finally:
        if server is not None:
            os.unlink(sock_path)
    tail = b" / ".join(line.strip() for line in errors[-3:]).decode(errors="replace")
    ok = proc.returncode == 0
    verified = unchanged(job, sent) if ok else []
    seconds = time.monotonic() - started
    say(events, ok=ok, exit=proc.returncode, error=tail, seconds=seconds, verified=verified)


def unchanged(job: dict[str, Any], sent: set[str]) -> list[str]:
    """The sent files whose source is, now the copy is done, still the one the manifest hashed
    to the sha256 the launcher expects (same cache key: nothing wrote to it since)."""
    root, expected = str(job.get("root", "")), job.get("attest") or {}
    cache = load_cache(root) if root and expected else {}
    out = []
    for rel in sorted(sent & set(expected)):
        entry = cache.get(rel)
        try:
            now = cache_key(os.stat(os.path.join(root, rel)))
        except OSError:
            continue
        if isinstance(entry, list) and entry[:5] == now and entry[5] == expected[rel]:
            out.append(rel)
    return out


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop rsync and its remote shell (its process group), and reap them."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=5)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def watch(proc: subprocess.Popen[bytes], out: Any, events: Any, sent: set[str]) -> None:
    """Parse rsync's progress (\\r-separated) and report it every BEAT seconds until it exits;
    collect the names of the files it says it sent."""
    latest = [0]

    def read() -> None:
        buffer = b""
        for chunk in iter(lambda: out.read1(65536), b""):
            buffer += chunk
            *lines, buffer = re.split(rb"[\r\n]", buffer)
            for line in lines:
                found = PROGRESS.match(line)
                if found:
                    latest[0] = int(found.group(1).replace(b",", b""))
                elif line.startswith(SENT):
                    name = ESCAPED.sub(lambda m: bytes([int(m.group(1), 8)]), line[len(SENT) :])
                    sent.add(name.decode(errors="surrogateescape"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while proc.poll() is None:
        say(events, event="progress", bytes=latest[0])
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(BEAT)  # returns as soon as rsync ends, not a beat later
    reader.join(5)
    say(events, event="progress", bytes=latest[0])


def say(events: Any, **fields: Any) -> None:
    """One JSON line on the events stream (stdout, or stderr when stdout carries the relay)."""
    events.write(json.dumps(fields) + "\n")
    events.flush()


def relay(server: socket.socket, events: Any) -> None:
    """Accept the remote shell's connection; announce its command; pass its stream on stdio."""
    conn, _ = server.accept()
    line = b""
    while not line.endswith(b"\n"):  # byte by byte: rsync's stream follows at once, unbuffered
        byte = conn.recv(1)
        if not byte:
            return
        line += byte
    command = json.loads(line)
    say(events, event="relay", command=command)
    threading.Thread(target=pump_in, args=(conn,), daemon=True).start()
    pump(conn.recv, sys.stdout.buffer)


def pump_in(conn: socket.socket) -> None:
    """stdin (from the target, through spark-launch) to the remote shell's socket."""
    for chunk in iter(lambda: os.read(0, 65536), b""):
        conn.sendall(chunk)
    conn.shutdown(socket.SHUT_WR)


def pump(read: Any, out: BinaryIO) -> None:
    """Copy from `read(n)` to `out` until end of stream."""
    for chunk in iter(lambda: read(65536), b""):
        out.write(chunk)
        out.flush()


def rsh(sock_path: str, args: list[str]) -> None:
    """rsync's remote shell in relay mode: `rsh SOCK [-l USER] HOST COMMAND...`."""
    while args and args[0] == "-l":
        args = args[2:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sock_path)
    conn.sendall(json.dumps(args[1:]).encode() + b"\n")

    def upstream() -> None:
        for chunk in iter(lambda: os.read(0, 65536), b""):
            conn.sendall(chunk)
        conn.shutdown(socket.SHUT_WR)

    threading.Thread(target=upstream, daemon=True).start()
    pump(conn.recv, sys.stdout.buffer)


def main(argv: list[str]) -> None:
    """transfer DIR reach JOB_JSON | transfer DIR send JOB_FILE|JOB_JSON | transfer DIR rsh SOCK ARGS..."""
    directory = run_directory(argv)
    if argv[1] == "reach":
        reach(json.loads(argv[2]))
    elif argv[1] == "rsh":
        rsh(argv[2], argv[3:])
    else:
        job = json.loads(argv[2]) if argv[2].startswith("{") else take_json(argv[2])
        if job is None:
            emit(ok=False, error=f"no readable job file {argv[2]}")
        else:
            send(directory, job)


if __name__ == "__main__":  # python3 -S -c STUB UNIT transfer DIR ARGS... (rsync: python3 -S UNIT ...)
    main(sys.argv[2:])
