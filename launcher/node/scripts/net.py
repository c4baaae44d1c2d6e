"""Test the fabric between nodes: listen on the head's master port, connect from a worker."""

from __future__ import annotations

import json
import sys
import time

from launcher.node.scripts.common import emit, run_directory  # inlined when sent


def listen(directory: str, address: str, port: str, expect: str, seconds: str) -> None:
    """Accept `expect` TCP connections on address:port (port 0: any free one) in `seconds`; say who came."""
    import socket

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    peers: list[str] = []
    with socket.socket(family, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind((address, int(port)))
        except OSError as exc:
            return emit(ok=False, error=f"cannot listen on {address}:{port}: {exc.strerror}")
        server.listen(16)
        # The port as bound: port 0 asks the kernel for a free one.
        sys.stdout.write(json.dumps({"listening": True, "port": server.getsockname()[1]}) + "\n")
        sys.stdout.flush()
        deadline = time.time() + float(seconds)
        while len(peers) < int(expect) and time.time() < deadline:
            server.settimeout(max(0.1, deadline - time.time()))
            try:
                conn, peer = server.accept()
            except OSError:
                break
            peers.append(peer[0])
            conn.close()
    return emit(ok=True, peers=peers)


def connect(directory: str, address: str, port: str, seconds: str) -> None:
    """Open a TCP connection to address:port from this node."""
    import socket

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
