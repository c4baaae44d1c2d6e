"""A command on an SSH channel as a `Stream` (what `SshExecutor.open()` returns), and a
tunnel's channel as http.client's socket.

Duck-typed over a paramiko Channel, so that node/ssh.py stays the only module importing
paramiko: it passes in what the channel raises once it takes no more, and `send` says that
as an OSError, as every Stream does (the relay drops such a target and goes on).
"""

from __future__ import annotations

from typing import Any


class ChannelStream:
    """A command on a channel: its stdin, stdout and stderr as byte streams."""

    def __init__(self, channel: Any, broken: tuple[type[BaseException], ...]) -> None:
        self.channel, self.broken = channel, broken

    def send(self, data: bytes) -> None:
        """Write to the command's stdin."""
        try:
            self.channel.sendall(data)
        except self.broken as exc:
            raise OSError(f"the channel closed: {exc}") from None

    def send_eof(self) -> None:
        """Close its stdin."""
        self.channel.shutdown_write()

    def recv(self, size: int) -> bytes:
        """Up to `size` bytes of its stdout."""
        data: bytes = self.channel.recv(size)
        return data

    def recv_stderr(self, size: int) -> bytes:
        """Up to `size` bytes of its stderr."""
        data: bytes = self.channel.recv_stderr(size)
        return data

    def wait(self) -> int:
        """Its exit status."""
        code: int = self.channel.recv_exit_status()
        return code

    def close(self) -> None:
        """Close the channel (the command sees its streams end)."""
        self.channel.close()


class KeptOpen:
    """A channel as http.client's socket, closed by its owner only once the body is read.

    http.client closes its socket as soon as it sees an answer that ends the connection
    (HTTP/1.0, `Connection: close`); a socket's file outlives that, a channel does not:
    the body would be cut short at what had arrived.
    """

    def __init__(self, channel: Any) -> None:
        self.channel = channel

    def makefile(self, mode: str) -> Any:
        """The channel as a file, for the answer."""
        return self.channel.makefile(mode)

    def sendall(self, data: bytes) -> None:
        """Send the request."""
        self.channel.sendall(data)

    def close(self) -> None:
        """Nothing: the owner closes the channel."""
