"""Local servers that fail the ways a node's SSH fails, for the fast tier: a port that accepts
and never speaks, one that speaks something else, and a real SSH server (paramiko's server
side) with its own host key and one authorized client key. No root, no sshd, no namespaces."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import paramiko


@dataclass
class Listener:
    """A TCP port on 127.0.0.1 and what it saw."""

    port: int
    connections: int = 0
    global_requests: list[str] = field(default_factory=list)
    got: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def listening(answer: bytes | None = None) -> Iterator[Listener]:
    """A port that accepts every connection and then says `answer` and hangs up, as a web
    server does (None: says nothing, ever, and keeps the connection)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    seen = Listener(server.getsockname()[1])
    held: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                seen.connections += 1
                held.append(conn)  # kept open: the client must give up by itself
                if answer is not None:
                    conn.sendall(answer)
                    conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield seen
    finally:
        server.close()
        for conn in held:
            conn.close()


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server(paramiko.ServerInterface):
    def __init__(self, authorized: paramiko.PKey, seen: Listener) -> None:
        self.authorized = authorized
        self.seen = seen

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        ok = key.get_base64() == self.authorized.get_base64()
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_global_request(self, kind: str, msg: paramiko.Message) -> bool:
        self.seen.global_requests.append(kind)
        self.seen.got.set()
        return True


@contextlib.contextmanager
def ssh_server(host_key: paramiko.PKey, authorized: paramiko.PKey) -> Iterator[Listener]:
    """A real SSH server on 127.0.0.1 that lets in `authorized` only."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    seen = Listener(server.getsockname()[1])
    transports: list[paramiko.Transport] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                seen.connections += 1
                transport = paramiko.Transport(conn)
                transport.add_server_key(host_key)
                transports.append(transport)
                with contextlib.suppress(paramiko.SSHException, EOFError, OSError):
                    transport.start_server(server=_Server(authorized, seen))

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield seen
    finally:
        server.close()
        for transport in transports:
            transport.close()


def new_key() -> paramiko.PKey:
    """A fresh key (ECDSA: made in milliseconds)."""
    return paramiko.ECDSAKey.generate()


def write_key(key: paramiko.PKey, path: Path) -> Path:
    """The private key as a file ssh_config's IdentityFile can name."""
    key.write_private_key_file(str(path))
    path.chmod(0o600)
    return path


def known_hosts_line(port: int, key: paramiko.PKey) -> str:
    """A known_hosts entry for 127.0.0.1:port."""
    return f"[127.0.0.1]:{port} {key.get_name()} {key.get_base64()}\n"


def ssh_config(path: Path, hosts: dict[str, int], **options: str) -> Path:
    """An ssh_config with one Host block per alias, each on 127.0.0.1 at its port."""
    blocks = []
    for alias, port in hosts.items():
        lines = [f"Host {alias}", "  HostName 127.0.0.1", f"  Port {port}", "  User tester"]
        lines += [f"  {k} {v}" for k, v in options.items()]
        blocks.append("\n".join(lines))
    path.write_text("\n\n".join(blocks) + "\n")
    return path
