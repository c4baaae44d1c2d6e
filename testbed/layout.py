"""Names, addresses and file paths of the bed: pure values, no side effects."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from testbed.errors import TestbedError

DEFAULT_DIR = Path("/tmp/spark-launch-testbed")
BRIDGE = "sltb0"
SUBNET = "10.99.0"
BRIDGE_ADDR = f"{SUBNET}.254"
PREFIX_LEN = 24
NS_PREFIX = "sl-node"
VETH_PREFIX = "sltb-n"  # host side of each veth; interface names must stay <= 15 chars
NODE_IFACE = "eth0"
MAX_NODES = 8
VLLM_VERSION = "0.32.0"

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Node:
    """One node of the bed: namespace `sl-nodeI`, address 10.99.0.I, ssh alias `nodeI`."""

    index: int
    env: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        """The node's name and ssh alias: node1, node2, ..."""
        return f"node{self.index}"

    @property
    def namespace(self) -> str:
        """The network namespace the node lives in."""
        return f"{NS_PREFIX}{self.index}"

    @property
    def address(self) -> str:
        """The node's IPv4 address on the bridge."""
        return f"{SUBNET}.{self.index}"

    @property
    def veth(self) -> str:
        """The host-side end of the node's veth pair."""
        return f"{VETH_PREFIX}{self.index}"


@dataclass(frozen=True)
class Layout:
    """Every path under the state dir; one place so up, down and status agree."""

    root: Path = DEFAULT_DIR
    nodes: tuple[Node, ...] = field(default_factory=tuple)

    @property
    def ssh_config(self) -> Path:
        """The client ssh_config with one Host block per node."""
        return self.root / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        """Known hosts written from the generated host keys."""
        return self.root / "known_hosts"

    @property
    def identity(self) -> Path:
        """Root's client private key (its .pub sits beside it)."""
        return self.root / "id_ed25519"

    @property
    def authorized_keys(self) -> Path:
        """The file every node's sshd reads, so /root/.ssh is never touched."""
        return self.root / "authorized_keys"

    @property
    def model(self) -> Path:
        """The tiny synthetic Qwen3-Next model directory."""
        return self.root / "model"

    @property
    def dense_model(self) -> Path:
        """A tiny synthetic dense Llama model directory (a second deployment's model)."""
        return self.root / "model-dense"

    @property
    def vllm(self) -> Path:
        """Stable symlink to the cached vLLM venv."""
        return self.root / "vllm"

    @property
    def wheels(self) -> Path:
        """Stable symlink to the cached wheels of the router's lock: the nodes' package index."""
        return self.root / "wheels"

    @property
    def description(self) -> Path:
        """testbed.json, read by tests and specs."""
        return self.root / "testbed.json"

    def node_dir(self, node: Node) -> Path:
        """A node's own files: sshd config, host key, pid file, log."""
        return self.root / node.name

    def sshd_config(self, node: Node) -> Path:
        """The node's sshd_config."""
        return self.node_dir(node) / "sshd_config"

    def host_key(self, node: Node) -> Path:
        """The node's ed25519 host key."""
        return self.node_dir(node) / "ssh_host_ed25519_key"

    def pid_file(self, node: Node) -> Path:
        """Where the node's sshd writes its pid."""
        return self.node_dir(node) / "sshd.pid"

    def sshd_log(self, node: Node) -> Path:
        """The node's sshd log (-E)."""
        return self.node_dir(node) / "sshd.log"


def make_nodes(count: int, env_specs: list[str]) -> tuple[Node, ...]:
    """Nodes 1..count, with per-node env parsed from `nodeI:NAME=value` strings."""
    if not 1 <= count <= MAX_NODES:
        raise TestbedError(f"--nodes {count} is out of range", f"use 1 to {MAX_NODES}")
    env: dict[int, list[tuple[str, str]]] = {i: [] for i in range(1, count + 1)}
    for spec in env_specs:
        index, pair = _parse_env_spec(spec, count)
        env[index].append(pair)
    return tuple(Node(i, tuple(env[i])) for i in range(1, count + 1))


def _parse_env_spec(spec: str, count: int) -> tuple[int, tuple[str, str]]:
    """Split `node2:NAME=value` into (2, (NAME, value)), rejecting what sshd cannot hold."""
    hint = "write it as nodeI:NAME=value, e.g. node2:VLLM_FOO=1"
    node, sep, pair = spec.partition(":")
    name, eq, value = pair.partition("=")
    match = re.fullmatch(r"node([1-9])", node)
    if not (sep and eq and match and _ENV_NAME.match(name)):
        raise TestbedError(f"bad node env {spec!r}", hint)
    index = int(match.group(1))
    if index > count:
        raise TestbedError(f"node env {spec!r} names a node the bed lacks", f"--nodes {count}")
    # sshd_config has no escape for these: refuse rather than write a broken config.
    if any(c in value for c in '"\n\r\\'):
        raise TestbedError(f"node env {spec!r}: value holds a quote, backslash or newline")
    return index, (name, value)
