"""Test the fabric between nodes: listen on the head's master port, connect from a worker.

The head's listener also runs inside its `facts` call (`check`), so that the workers connect
while every node gathers its facts: see `listener`.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from typing import Any

from launcher.node.scripts.common import emit, run_directory  # inlined when sent


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


if __name__ == "__main__":  # python3 - NAME DIR ARGS...
    main(sys.argv[2:])
