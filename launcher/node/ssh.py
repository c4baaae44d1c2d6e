"""SSH to the nodes through fabric/paramiko: the only module that imports them.

Everything travels over exec channels (commands, their stdin, their output) and
direct-tcpip channels (HTTP): no SFTP subsystem is needed on the nodes.

fabric resolves each target through ssh_config (aliases, users, ports, keys, agent,
ProxyJump); commands then run on paramiko channels directly, so stdin can be closed and
exit codes and timeouts are exact. Host keys are verified against the known_hosts files
ssh_config names (fabric itself would add any key silently). Every paramiko or socket
failure leaves this module as a NodeError naming the node, the reason and a fix.
"""

from __future__ import annotations

import http.client
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import paramiko
from fabric import Config, Connection

from launcher.core.spec.spec_checks import ssh_target_problem
from launcher.errors import InputError
from launcher.node import output
from launcher.node.channel import ChannelStream, KeptOpen
from launcher.node.executor import HttpResponse, NodeError, Result, Stream, fan_out
from launcher.node.ssh_failures import Target, failure, hop_of, kind_of, known_hosts_files, lost

# paramiko logs transport failures (with tracebacks) from its own threads; every failure
# that matters reaches the user as a NodeError instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
logging.getLogger("paramiko").propagate = False
RELAY_WINDOW = 64 << 20  # bytes a node may send before we acknowledge: keeps a bulk stream full
RELAY_PACKET = 1 << 18  # the largest packet a node may send us: fewer packets, less per-packet work
# AES-GCM first (when the server offers it): no separate MAC pass, twice the bulk throughput here.
GCM = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


KEEPALIVE_SECONDS = 5  # when the ssh_config sets no ServerAliveInterval
DEFAULT_CONNECT_TIMEOUT = 10.0  # when it sets no ConnectTimeout (and no --connect-timeout is given)
log = logging.getLogger("launcher.ssh")  # what `spark-launch -v` shows


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """StrictHostKeyChecking accept-new: trust a first-seen key and record it; never a changed one."""

    def __init__(self, known_hosts: Path) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        with self.known_hosts.open("a") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


class SshExecutor:
    """Executor over SSH: one connection per node, opened on first use and reused.

    Each node's connection setup follows its ssh_config Host block: ConnectTimeout bounds
    the TCP connection, the SSH greeting, the handshake and the authentication (each; 10 s
    when unset, `connect_timeout` overrides it), ServerAliveInterval the keepalives.
    """

    def __init__(
        self, targets: dict[str, str], ssh_config: str | None = None, connect_timeout: float | None = None
    ) -> None:
        if ssh_config is not None and not Path(ssh_config).expanduser().is_file():
            raise InputError(
                f"ssh_config file {ssh_config} does not exist",
                "fix --ssh-config or the spec's ssh_config key (a relative path is read from the spec's "
                "folder)",
            )
        for node, target in targets.items():
            problem = ssh_target_problem(target)
            if problem:
                raise NodeError(node, f"{target!r} {problem}: refusing it", "fix the node's ssh target")
        self.targets = targets
        self.ssh_config = ssh_config
        self.connect_timeout = connect_timeout
        self._connections: dict[str, Connection] = {}
        self._locks = {name: threading.Lock() for name in targets}
        self._failed: dict[str, tuple[float, NodeError]] = {}  # the last failed try, and when it ended
        self._down: dict[str, NodeError] = {}  # not tried again (see `reach`)
        self._opening: dict[str, Connection] = {}  # being set up now (closed by `close` too)
        self._closed = False

    # -- connections -------------------------------------------------------------------
    def connection(self, node: str) -> Connection:
        """The open connection to `node` (opened now if needed)."""
        asked = time.monotonic()
        with self._locks[node]:
            if node in self._down:
                raise self._down[node]
            failed = self._failed.get(node)
            if failed is not None and failed[0] >= asked:  # a try ended while this one waited: its answer
                raise failed[1]
            conn = self._connections.get(node)
            if conn is not None and conn.is_connected:
                return conn
            if self._closed:  # Ctrl-C closed every connection: a task left running opens no new one
                raise NodeError(node, "not connected: the command is ending")
            conn = self._new_connection(node)
            self._opening[node] = conn
            try:
                with self._errors(node, conn, since=time.monotonic()):
                    conn.open()
            except NodeError as exc:
                self._failed[node] = (time.monotonic(), exc)
                raise
            finally:
                self._opening.pop(node, None)
            transport = conn.client.get_transport()
            interval = int(conn.ssh_config.get("serveraliveinterval", KEEPALIVE_SECONDS))
            if transport is not None and interval > 0:  # a dead peer is noticed in seconds, not at TCP's pace
                transport.set_keepalive(interval)
            self._connections[node] = conn
            return conn

    def reach(self, nodes: list[str]) -> dict[str, NodeError]:
        """Connect to every node at once; those that fail, by name. This executor does not try
        them again: each later call on such a node raises the same error at once."""
        results = fan_out(nodes, self.connection)
        down = {n: r for n, r in results.items() if isinstance(r, NodeError)}
        self._down.update(down)
        return down

    def _new_connection(self, node: str) -> Connection:
        config = Config(runtime_ssh_path=os.path.expanduser(self.ssh_config)) if self.ssh_config else Config()
        conn = Connection(self.targets[node], config=config)
        hop: Any = conn
        while isinstance(hop, Connection):  # every ProxyJump hop by the final host's rules
            self._setup(node, hop, hop is not conn)
            hop = hop.gateway
        return conn

    def _setup(self, node: str, conn: Connection, hop: bool) -> None:
        """Timeouts, ciphers and host-key checking of one connection (a hop's too), by its Host block."""
        # fabric reads ConnectTimeout (as whole seconds) for the TCP connection only; the greeting,
        # the handshake and the authentication each get the same bound, or a silent peer holds us.
        timeout = self.connect_timeout or float(
            conn.ssh_config.get("connecttimeout", DEFAULT_CONNECT_TIMEOUT)
        )
        conn.connect_timeout = timeout
        conn.connect_kwargs.setdefault("banner_timeout", timeout)
        conn.connect_kwargs.setdefault("auth_timeout", timeout)
        conn.connect_kwargs["transport_factory"] = _gcm_first
        strict = str(conn.ssh_config.get("stricthostkeychecking", "ask")).lower()
        files = known_hosts_files(conn.ssh_config)
        for path in [Path("/etc/ssh/ssh_known_hosts"), *files]:
            if path.is_file():
                conn.client.load_host_keys(str(path))
        if strict in ("no", "off"):
            conn.client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        elif strict == "accept-new":
            conn.client.set_missing_host_key_policy(_AcceptNew(files[0]))
        else:
            conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        identities = " ".join(conn.ssh_config.get("identityfile", [])) or "ssh-agent and the default keys"
        log.info(
            "%s: %s; StrictHostKeyChecking %s; %s", node, self._target(node, conn, hop), strict, identities
        )

    @contextmanager
    def _errors(self, node: str, conn: Connection | None = None, since: float = 0.0) -> Iterator[None]:
        """Translate paramiko and socket failures into NodeError: what failed, and the fix.
        With `conn`, the failure is of setting it up (begun at `since`)."""
        try:
            yield
        # UnicodeError: a host name IDNA cannot encode (a label over 63 characters), before any lookup
        except (paramiko.SSHException, EOFError, OSError, UnicodeError) as exc:
            if conn is None:  # a connection set up earlier broke: the session, not the handshake
                detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else ""
                raise NodeError(
                    node, lost(detail), "the node may have rebooted or the network dropped"
                ) from None
            hop = hop_of(conn, exc)
            target = self._target(node, hop or conn, hop is not None)
            kind, detail = kind_of(exc)
            if kind == "no-greeting" and time.monotonic() - since < target.timeout / 2:
                kind = "closed"  # it hung up long before the timeout: no SSH server, or one refusing us
            reason, hint = failure(kind, detail, target)
            raise NodeError(
                node, f"the ProxyJump hop {hop.original_host}: {reason}" if hop else reason, hint
            ) from None

    def _target(self, node: str, conn: Connection, hop: bool = False) -> Target:
        """The node's target as its ssh_config resolved it, for the failure's words."""
        return Target(
            alias=str(conn.original_host) if hop else self.targets[node],  # a hop: its own alias
            user=str(conn.user),
            host=str(conn.host),
            port=int(conn.port),
            ssh_config=self.ssh_config,
            known_hosts=str(known_hosts_files(conn.ssh_config)[0]),
            timeout=float(conn.connect_timeout or DEFAULT_CONNECT_TIMEOUT),
            batch=str(conn.ssh_config.get("batchmode", "no")).lower() == "yes",
        )

    # -- the Executor interface --------------------------------------------------------
    def run(self, node: str, command: str, stdin: str | None = None, timeout: float | None = None) -> Result:
        """Run `command` in the node's login shell; stdin (if any) is sent, then closed.

        stdout and stderr are read at once (either one left unread stalls the other), each
        up to a limit: past it, the command is ended and this is a NodeError.
        """
        with self._errors(node):
            return output.collect(node, command, self._open(node, command, timeout=timeout), stdin, timeout)

    def stream(
        self, node: str, command: str, on_line: Callable[[str], None], stdin: str | None = None
    ) -> Result:
        """Run `command`, handing each stdout line to `on_line` as it arrives (stderr drained meanwhile)."""
        with self._errors(node):
            return output.follow(node, command, self._open(node, command), on_line, stdin)

    def http(
        self,
        node: str,
        port: int,
        method: str,
        path: str,
        body: bytes | None = None,
        timeout: float = 10.0,
        host: str = "127.0.0.1",
        headers: dict[str, str] | None = None,
    ) -> HttpResponse:
        """HTTP to host:port as the node sees it, through the SSH connection: no port exposed."""
        transport = self.connection(node).client.get_transport()
        if transport is None:
            raise NodeError(node, "the SSH connection closed")
        try:
            channel = transport.open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0), timeout=timeout)
        except paramiko.ChannelException as exc:
            raise NodeError(node, f"nothing answers on {host}:{port} ({exc.text})") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise NodeError(
                node,
                f"cannot open a tunnel to {host}:{port}: {exc}",
                "the node's sshd must allow TCP forwarding (AllowTcpForwarding)",
            ) from None
        channel.settimeout(timeout)
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.sock = KeptOpen(channel)  # the body is read before the channel closes
        try:
            return output.exchange(node, conn, method, path, body, headers)
        finally:
            channel.close()

    def open(self, node: str, command: str) -> Stream:
        """Start `command` on its own channel; its stdin, stdout and stderr stay open as byte streams.

        The channel gets a large window, so a bulk stream is not throttled by acknowledgements.
        """
        return self._open(node, command, RELAY_WINDOW)

    def _open(
        self, node: str, command: str, window: int | None = None, timeout: float | None = None
    ) -> Stream:
        """`command` on a session channel of its own (a window for bulk data if asked)."""
        transport = self.connection(node).client.get_transport()
        if transport is None:
            raise NodeError(node, "the SSH connection closed")
        with self._errors(node):
            sizes = {"window_size": window, "max_packet_size": RELAY_PACKET} if window else {}
            channel: paramiko.Channel = transport.open_session(**sizes)
            channel.settimeout(timeout)
            channel.exec_command(command)
            return ChannelStream(channel, (EOFError, paramiko.SSHException))

    def close(self) -> None:
        """Close every connection, and every one being set up (its handshake then fails at once:
        after Ctrl-C, nothing waits for a node that does not answer)."""
        self._closed = True
        for conn in [*self._opening.values(), *self._connections.values()]:
            conn.close()
        self._connections.clear()


def _gcm_first(*args: Any, **kwargs: Any) -> paramiko.Transport:
    """A Transport that prefers AES-GCM, and falls back to paramiko's usual order."""
    transport = paramiko.Transport(*args, **kwargs)
    options = transport.get_security_options()
    options.ciphers = (*GCM, *(c for c in options.ciphers if c not in GCM))
    return transport
