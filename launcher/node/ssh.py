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

from launcher.errors import InputError
from launcher.node.executor import HttpResponse, NodeError, Relayed, Result, StopStream, Stream, fan_out
from launcher.node.relay import OnSent, pump
from launcher.node.ssh_failures import Target, failure, kind_of, known_hosts_files, lost

# paramiko logs transport failures (with tracebacks) from its own threads; every failure
# that matters reaches the user as a NodeError instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
logging.getLogger("paramiko").propagate = False
RELAY_CHUNK = 1 << 20
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
        self.targets = targets
        self.ssh_config = ssh_config
        self.connect_timeout = connect_timeout
        self._connections: dict[str, Connection] = {}
        self._locks = {name: threading.Lock() for name in targets}
        self._failed: dict[str, tuple[float, NodeError]] = {}  # the last failed try, and when it ended
        self._down: dict[str, NodeError] = {}  # not tried again (see `reach`)

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
            conn = self._new_connection(node)
            try:
                with self._errors(node, conn, since=time.monotonic()):
                    conn.open()
            except NodeError as exc:
                self._failed[node] = (time.monotonic(), exc)
                raise
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
        log.info("%s: %s; StrictHostKeyChecking %s; %s", node, self._target(node, conn), strict, identities)
        return conn

    @contextmanager
    def _errors(self, node: str, conn: Connection | None = None, since: float = 0.0) -> Iterator[None]:
        """Translate paramiko and socket failures into NodeError: what failed, and the fix.
        With `conn`, the failure is of setting it up (begun at `since`)."""
        try:
            yield
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if conn is None:  # a connection set up earlier broke: the session, not the handshake
                detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else ""
                raise NodeError(
                    node, lost(detail), "the node may have rebooted or the network dropped"
                ) from None
            target = self._target(node, conn)
            kind, detail = kind_of(exc)
            if kind == "no-greeting" and time.monotonic() - since < target.timeout / 2:
                kind = "closed"  # it hung up long before the timeout: no SSH server, or one refusing us
            raise NodeError(node, *failure(kind, detail, target)) from None

    def _target(self, node: str, conn: Connection) -> Target:
        """The node's target as its ssh_config resolved it, for the failure's words."""
        return Target(
            alias=self.targets[node],
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
        """Run `command` in the node's login shell; stdin (if any) is sent, then closed."""
        client = self.connection(node).client
        with self._errors(node):
            chan_in, chan_out, chan_err = client.exec_command(command, timeout=timeout)
            if stdin is not None:
                chan_in.write(stdin.encode())
            chan_in.channel.shutdown_write()
            out = chan_out.read().decode(errors="replace")
            err = chan_err.read().decode(errors="replace")
            return Result(command, chan_out.channel.recv_exit_status(), out, err)

    def stream(
        self, node: str, command: str, on_line: Callable[[str], None], stdin: str | None = None
    ) -> Result:
        """Run `command`, handing each stdout line to `on_line` as it arrives."""
        client = self.connection(node).client
        with self._errors(node):
            chan_in, chan_out, _ = client.exec_command(command)
            if stdin is not None:
                chan_in.write(stdin.encode())
            chan_in.channel.shutdown_write()
            try:
                for line in chan_out:
                    on_line(line.rstrip("\n"))
            except StopStream:
                chan_out.channel.close()  # the remote side sees its next write fail, and ends
                return Result(command, -1, "", "")
            return Result(command, chan_out.channel.recv_exit_status(), "", "")

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
        conn.sock = channel
        try:
            sent: dict[str, Any] = {
                **({"Content-Type": "application/json"} if body is not None else {}),
                **(headers or {}),
            }
            conn.request(method, path, body, sent)
            response = conn.getresponse()
            return HttpResponse(response.status, response.read())
        except (OSError, http.client.HTTPException) as exc:
            raise NodeError(
                node, f"HTTP {method} {path} on {host}:{port} failed: {exc or type(exc).__name__}"
            ) from None
        finally:
            channel.close()

    def open(self, node: str, command: str) -> Stream:
        """Start `command` on its own channel; its stdin and stdout stay open as byte streams."""
        return _ChannelStream(self._channel(node, command))

    def relay(
        self, source: str, command: str, targets: dict[str, str], on_progress: OnSent | None = None
    ) -> Relayed:
        """Stream `command`'s output on `source` into every target's command, through this process.

        One read from the source feeds every target (the source runs once); a target whose
        command ends early is dropped and the others go on. Channels get a large window,
        so the stream is not throttled by acknowledgements.
        """
        sinks: dict[str, paramiko.Channel] = {}
        results: dict[str, Result | NodeError] = {}
        for name, cmd in targets.items():
            try:
                sinks[name] = self._channel(name, cmd)
            except NodeError as exc:
                results[name] = exc
        src = self._channel(source, command)
        outputs: dict[str, tuple[bytearray, bytearray]] = {n: (bytearray(), bytearray()) for n in sinks}

        def writer(name: str) -> Callable[[bytes], None]:
            def write(block: bytes) -> None:
                sinks[name].sendall(block)
                _drain(sinks[name], outputs[name])

            return write

        broken = (OSError, EOFError, paramiko.SSHException)
        sent, failed = pump(lambda: src.recv(RELAY_CHUNK), {n: writer(n) for n in sinks}, broken, on_progress)
        if failed is not None:
            with self._errors(source):
                raise failed
        stopped = not src.eof_received
        if stopped:
            src.close()  # nobody took more: the source's command gets SIGPIPE
        for name, chan in sinks.items():
            with self._errors(name):
                chan.shutdown_write()
                code = chan.recv_exit_status()
                _drain(chan, outputs[name], everything=True)
            out, err = (bytes(b).decode(errors="replace") for b in outputs[name])
            results[name] = Result(targets[name], code, out, err)
        with self._errors(source):
            error = b"".join(iter(lambda: src.recv_stderr(65536), b"")).decode(errors="replace")
            code = -1 if stopped else src.recv_exit_status()
        return Relayed(Result(command, code, "", error), results, sent)

    def _channel(self, node: str, command: str) -> paramiko.Channel:
        """A session channel on `node` running `command`, with a large window for bulk data."""
        transport = self.connection(node).client.get_transport()
        if transport is None:
            raise NodeError(node, "the SSH connection closed")
        with self._errors(node):
            channel: paramiko.Channel = transport.open_session(
                window_size=RELAY_WINDOW, max_packet_size=RELAY_PACKET
            )
            channel.exec_command(command)
            return channel

    def close(self) -> None:
        """Close every connection."""
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()


class _ChannelStream:
    """A command on an SSH channel as a Stream."""

    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel

    def send(self, data: bytes) -> None:
        """Write to the command's stdin."""
        self.channel.sendall(data)

    def send_eof(self) -> None:
        """Close its stdin."""
        self.channel.shutdown_write()

    def recv(self, size: int) -> bytes:
        """Up to `size` bytes of its stdout."""
        return self.channel.recv(size)

    def stderr_lines(self) -> Iterator[str]:
        """Its stderr, line by line."""
        for line in self.channel.makefile_stderr("rb"):
            yield line.decode(errors="replace").rstrip("\n")

    def wait(self) -> int:
        """Its exit status."""
        return self.channel.recv_exit_status()

    def close(self) -> None:
        """Close the channel (the command sees its streams end)."""
        self.channel.close()


def _drain(channel: paramiko.Channel, into: tuple[bytearray, bytearray], everything: bool = False) -> None:
    """Take what the channel's command has written so far (to the end, with `everything`)."""
    out, err = into
    while everything or channel.recv_ready():
        block = channel.recv(65536)
        if not block:
            break
        out += block
    while everything or channel.recv_stderr_ready():
        block = channel.recv_stderr(65536)
        if not block:
            break
        err += block


def _gcm_first(*args: Any, **kwargs: Any) -> paramiko.Transport:
    """A Transport that prefers AES-GCM, and falls back to paramiko's usual order."""
    transport = paramiko.Transport(*args, **kwargs)
    options = transport.get_security_options()
    options.ciphers = (*GCM, *(c for c in options.ciphers if c not in GCM))
    return transport
