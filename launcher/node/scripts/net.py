"""Test the fabric between nodes: listen on the head's master port, connect from a worker.

In `check` both run inside the nodes' `facts` calls, so that the connections are made while
every node gathers its facts, in one call per node: the head's `listener`, each worker's
`connector`.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time

from .common import emit, run_directory

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

RETRY = 0.05  # seconds between a worker's tries while the head is not listening yet


def listener(address: str, port: int, expect: int, seconds: float) -> tuple[dict[str, Any], threading.Thread]:
    """Listen on address:port (port 0: any free one) and accept `expect` TCP connections within
    `seconds`, in a thread: ({"listening": True, "port"} or {"listening": False, "error"}), the
    thread (it ends with every peer come, or at the deadline) and, in said["peers"], who came."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    said: dict[str, Any] = {"listening": False, "peers": []}
    try:
        server.bind((address, port))
        server.listen(16)
    except OSError as exc:
        server.close()
        said["error"] = f"cannot listen on {address}:{port}: {exc.strerror}"
        nothing = threading.Thread(target=lambda: None)
        nothing.start()  # joined like the real one
        return said, nothing
    said.update(listening=True, port=server.getsockname()[1])  # as bound: port 0 asks for any
    deadline = time.time() + seconds

    def accept() -> None:
        with server:
            while len(said["peers"]) < expect and time.time() < deadline:
                server.settimeout(max(0.1, deadline - time.time()))
                try:
                    conn, peer = server.accept()
                except OSError:
                    return
                said["peers"].append(peer[0])
                conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return said, thread


def connector(address: str, port: int, seconds: float) -> Callable[[], str]:
    """Connect to address:port in a thread, trying again while it is refused (the head starts
    listening inside its own facts call, a moment after this one starts) until `seconds`
    have passed; a function that waits for it: "yes", or why not."""
    said = {"connected": "not tried"}
    deadline = time.time() + seconds

    def attempt() -> None:
        while True:
            try:
                socket.create_connection((address, port), timeout=max(0.1, deadline - time.time())).close()
                said["connected"] = "yes"
                return
            except ConnectionRefusedError as exc:
                said["connected"] = exc.strerror or str(exc)
                if time.time() + RETRY >= deadline:
                    return
                time.sleep(RETRY)
            except OSError as exc:
                said["connected"] = f"{exc.strerror or exc}"
                return

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()

    def result() -> str:
        thread.join()
        return said["connected"]

    return result


def listen(directory: str, address: str, port: str, expect: str, seconds: str) -> None:
    """Accept `expect` TCP connections on address:port (port 0: any free one) in `seconds`; say who came."""
    said, thread = listener(address, int(port), int(expect), float(seconds))
    if not said["listening"]:
        return emit(ok=False, error=said["error"])
    sys.stdout.write(json.dumps({"listening": True, "port": said["port"]}) + "\n")
    sys.stdout.flush()
    thread.join()
    return emit(ok=True, peers=said["peers"])


def connect(directory: str, address: str, port: str, seconds: str) -> None:
    """Open a TCP connection to address:port from this node."""
    try:
        socket.create_connection((address, int(port)), timeout=float(seconds)).close()
    except OSError as exc:
        return emit(ok=False, error=f"{exc.strerror or exc}")
    return emit(ok=True)


def main(argv: list[str]) -> None:
    """net DIR listen ADDRESS PORT EXPECT SECONDS | net DIR connect ADDRESS PORT SECONDS"""
    directory = run_directory(argv)
    if argv[1] == "listen":
        listen(directory, *argv[2:6])
    else:
        connect(directory, *argv[2:5])


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
