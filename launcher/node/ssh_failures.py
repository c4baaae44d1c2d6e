"""What a failed SSH connection means, in words, with the command that fixes it. No I/O.

`ssh.py` sorts each paramiko or socket failure into a kind (it is the only module that
knows paramiko's exceptions); this module says what the kind means for the node's target:
which address and port, which known_hosts file really is in use, and the `ssh -F ...` line
that reproduces or fixes it. Nothing of the library's own wording reaches the user.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Target:
    """A node's SSH target as its ssh_config resolves it."""

    alias: str  # what the spec's `ssh:` says (user@host:port, or an ssh_config alias), or a hop's
    user: str
    host: str
    port: int
    ssh_config: str | None  # None: ~/.ssh/config
    known_hosts: str  # the file host keys are recorded in (UserKnownHostsFile)
    timeout: float
    batch: bool  # BatchMode yes: ssh itself would not ask to accept a key

    @property
    def where(self) -> str:
        """user@host:port."""
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def known_name(self) -> str:
        """The host as known_hosts records it."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def __str__(self) -> str:
        """What `-v` shows of it."""
        return (
            f"{self.where} through {config_name(self.ssh_config)}, timeout {self.timeout:g} s, "
            f"known_hosts {self.known_hosts}"
        )

    def ssh(self, *options: str) -> str:
        """The ssh command line that reaches this node the same way: its ssh_config (-F, when not
        the default one), then the spec's target as ssh takes it (`admin@host:2222` is
        `-p 2222 admin@host`; an alias as it is, its ssh_config saying the rest)."""
        config = ["-F", self.ssh_config] if self.ssh_config else []
        return " ".join(["ssh", *config, *options, *ssh_words(self.alias)])

    @property
    def test(self) -> str:
        """The command that tests this node's SSH as spark-launch uses it."""
        return f"`{self.ssh()} true`"


def ssh_words(target: str) -> list[str]:
    """A spec's ssh target as ssh's own words: `user@host:port` -> `-p PORT user@host`."""
    head, colon, port = target.rpartition(":")
    if colon and port.isdigit() and head and ":" not in head.rsplit("@", 1)[-1].strip("[]"):
        return ["-p", port, head.replace("[", "").replace("]", "")]
    return [target]


def config_name(ssh_config: str | None) -> str:
    """How to name the ssh_config in use: its path, ~/.ssh/config when that is it, or none."""
    if ssh_config:
        return ssh_config
    return "~/.ssh/config" if Path("~/.ssh/config").expanduser().is_file() else "no ssh_config"


def failure(kind: str, detail: str, target: Target) -> tuple[str, str]:
    """(reason, hint) for a connection that failed in the way `kind` names."""
    t, where, test = f"{target.timeout:g} s", target.where, target.test
    debug = f"`{target.ssh('-v')} true` shows where it stops"
    accept = target.ssh(*(["-o", "BatchMode=no"] if target.batch else [])) + " true"
    texts = {
        "changed-host-key": (
            f"the host key of {where} has CHANGED since it was recorded in {target.known_hosts}: "
            "refusing to connect",
            f"if the node was reinstalled, remove the old key: ssh-keygen -f {target.known_hosts} "
            f"-R '{target.known_name}', then check and accept the new one: {accept}",
        ),
        "unknown-host-key": (
            f"the host key of {where} is not in {target.known_hosts}: refusing to connect",
            f"check its fingerprint, then accept it: {accept} (answer yes), or "
            f"ssh-keyscan -p {target.port} {target.host} >> {target.known_hosts}",
        ),
        "auth": (
            f"{where} refused every key offered (authentication failed)",
            f"{test} must log in without a password: ssh-copy-id -p {target.port} "
            f"{target.user}@{target.host}, or name the key with IdentityFile in the ssh_config",
        ),
        "auth-timeout": (
            f"{where} did not finish authenticating within {t}",
            f"{debug}; --connect-timeout to wait longer",
        ),
        "no-key": (
            f"no key to offer {where}",
            f"name one with IdentityFile in the ssh_config, or load one into ssh-agent; {test} tests it",
        ),
        "refused": (
            f"connection refused by {where}",
            f"is sshd running there, on port {target.port}? {test} tests it",
        ),
        "timeout": (
            f"no answer from {where} within {t}",
            f"is the address right and reachable from here? {debug}; --connect-timeout to wait longer",
        ),
        "resolve": (
            f"cannot resolve {target.host}",
            f"check the ssh target, or HostName in the ssh_config; {test} tests it",
        ),
        "no-greeting": (
            f"{where} accepted the connection but did not complete an SSH handshake within {t}",
            f"is sshd listening on that port (not another server or a stalled proxy), and not "
            f"overloaded? {debug}; --connect-timeout to wait longer",
        ),
        "not-ssh": (
            f"{where} answered, but not as an SSH server",
            f"is the port right? (HostName and Port in the ssh_config); {test} tests it",
        ),
        "incompatible": (
            f"{where} offers no SSH algorithm spark-launch can use",
            f"{debug} (the server's KexAlgorithms, Ciphers and MACs)",
        ),
        "closed": (
            f"{where} closed the connection during the SSH handshake",
            "is it sshd on that port (HostName and Port in the ssh_config)? sshd may also refuse this "
            f"client (MaxStartups, AllowUsers, a firewall): see its log; {debug}",
        ),
        "os": (f"cannot connect to {where}: {detail}", f"{debug}"),
    }
    return texts.get(kind, (f"the SSH handshake with {where} failed: {detail}", debug))


def lost(detail: str) -> str:
    """The reason for a connection that broke after it was set up."""
    return f"the SSH connection was lost ({detail})" if detail else "the SSH connection was lost"


def known_hosts_files(ssh_config: Any) -> list[Path]:
    """The user's known_hosts files for a Host block (UserKnownHostsFile), the first recording keys."""
    names = str(ssh_config.get("userknownhostsfile", "~/.ssh/known_hosts")).split()
    return [Path(os.path.expanduser(name)) for name in names]


# Words in paramiko's SSHException texts, and the kind of failure each means.
_MARKERS = (
    ("not found in known_hosts", "unknown-host-key"),
    ("Error reading SSH protocol banner", "no-greeting"),
    ("No existing session", "no-greeting"),  # the handshake did not finish within the timeout
    ("Indecipherable protocol version", "not-ssh"),
    ("Invalid SSH banner", "not-ssh"),
    ("No authentication methods available", "no-key"),
    # paramiko tries a refused key file as every key type in turn, and says why the last one
    # could not read it ("encountered EC key, expected OPENSSH key"): the key was refused.
    ("key, expected", "auth"),
    ("Incompatible", "incompatible"),
    ("Negotiation failed", "incompatible"),
    ("session not active", "closed"),
    ("Server connection dropped", "closed"),
)


def hop_of(conn: Any, exc: BaseException) -> Any:
    """The ProxyJump hop (a fabric Connection) whose host key `exc` is about; None when it is the
    final host's, or no host key's. The hops are `conn.gateway`, then its gateway, and so on."""
    named = getattr(exc, "hostname", None)
    if named is None:
        found = re.match(r"Server '(.*)' not found in known_hosts", str(exc))
        named = found.group(1) if found else None
    hop = getattr(conn, "gateway", None)
    while hop is not None and not isinstance(hop, str):  # a string: a ProxyCommand, ssh's own check
        if named in (hop.host, f"[{hop.host}]:{hop.port}"):
            return hop
        hop = hop.gateway
    return None


def kind_of(exc: BaseException) -> tuple[str, str]:
    """(kind, detail) of a failed connection, for `failure`.

    paramiko's exceptions are told apart by their class names (this module does not import
    paramiko: ssh.py is the only one that does), most specific first.
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "BadHostKeyException" in names:
        return "changed-host-key", ""
    if "AuthenticationException" in names:
        return ("auth-timeout" if "timeout" in str(exc).lower() else "auth"), ""
    if "NoValidConnectionsError" in names:
        return "refused", ""
    if isinstance(exc, socket.gaierror | UnicodeError):  # UnicodeError: IDNA refused the name
        return "resolve", ""
    if isinstance(exc, TimeoutError):
        return "timeout", ""
    if "SSHException" in names:
        return next((kind for marker, kind in _MARKERS if marker in str(exc)), "ssh"), str(exc)
    if isinstance(exc, EOFError):
        return "closed", ""
    return "os", (exc.strerror if isinstance(exc, OSError) else None) or type(exc).__name__
