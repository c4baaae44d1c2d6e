"""The per-node commands: runtime prefix + engine argv (identical everywhere) + rank flags.

Pure: it only builds values. The one property that matters most is asserted here: every
node's argv is the same except the trailing rank flags.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from launcher.core.spec.container import container_options
from launcher.core.spec.sections import Node, Spec
from launcher.errors import SparkLaunchError

# Docker reads the node's environment (secrets included) from this file in the cluster's
# run directory on the node, so no value ever reaches argv and argv stays identical.
DOCKER_ENV_FILE = "node.env"
RUN_ROOT = ".spark-launch"  # under the remote user's home
CONTAINER_LABEL = "spark-launch.cluster"


def run_dir(cluster: str, node: str) -> str:
    """The node's run directory, relative to the remote home (nodes may share a filesystem)."""
    return f"{RUN_ROOT}/{cluster}/{node}"


def container_name(spec: Spec) -> str:
    """The docker runtime's container name: the same on every node (each is its own host).

    A deployment's name is <cluster>/<deployment>; a container's name cannot hold '/'.
    """
    return f"spark-launch-{spec.name.replace('/', '.')}"


@dataclass(frozen=True, slots=True)
class NodeCommand:
    """What runs on one node: argv, environment (values) and secret names (no values)."""

    name: str
    rank: int
    ssh: str
    address: str
    argv: tuple[str, ...]
    env: dict[str, str]
    secrets: tuple[str, ...]
    rank_args: tuple[str, ...]

    @property
    def common_argv(self) -> tuple[str, ...]:
        """The argv without this node's rank flags: equal on every node."""
        return self.argv[: len(self.argv) - len(self.rank_args)]


def rank_args(rank: int, nodes: int = 2) -> tuple[str, ...]:
    """The only flags that differ between nodes (none on a one-node deployment)."""
    if nodes == 1:
        return ()
    return (f"--node-rank={rank}", *(("--headless",) if rank > 0 else ()))


def node_env(spec: Spec, node: Node) -> dict[str, str]:
    """The node's environment: the spec's, the node's own, and its network identity."""
    env = {
        **spec.env,
        **node.env,
        "VLLM_HOST_IP": node.address,
        "GLOO_SOCKET_IFNAME": node.interface,
        "NCCL_SOCKET_IFNAME": node.interface,
    }
    if node.hca:
        env["NCCL_IB_HCA"] = ",".join(node.hca)
    return dict(sorted(env.items()))


def runtime_prefix(spec: Spec) -> tuple[str, ...]:
    """How `vllm serve` is invoked on the nodes: from the venv, or inside the image."""
    if spec.vllm.runtime == "venv":
        return (f"{spec.vllm.venv}/bin/vllm", "serve")
    return (
        "docker",
        "run",
        "--detach",
        f"--name={container_name(spec)}",
        container_label(spec),
        *container_options(spec.vllm.container, spec.model.path),
        f"--env-file={DOCKER_ENV_FILE}",
        str(spec.vllm.image),
        "vllm",
        "serve",
    )


def container_label(spec: Spec) -> str:
    """The label marking the cluster's containers: `down` removes those, and only those."""
    return f"--label={CONTAINER_LABEL}={spec.name}"


def render_nodes(spec: Spec, engine_args: Sequence[str]) -> tuple[NodeCommand, ...]:
    """One NodeCommand per node, rank 0 first; asserts the identical-except-rank invariant."""
    prefix = (*runtime_prefix(spec), spec.model.path, *engine_args)
    nodes = tuple(
        NodeCommand(
            node.name,
            rank,
            node.ssh,
            node.address,
            (*prefix, *rank_args(rank, len(spec.nodes))),
            node_env(spec, node),
            spec.secrets,
            rank_args(rank, len(spec.nodes)),
        )
        for rank, node in enumerate(spec.nodes)
    )
    assert_identical_except_rank(nodes)
    return nodes


class InvariantBroken(SparkLaunchError):
    """The rendered commands differ beyond the rank flags: a launcher bug, never shipped."""


def assert_identical_except_rank(nodes: Sequence[NodeCommand]) -> None:
    """Refuse commands that differ anywhere but in the trailing rank flags."""
    head = nodes[0].common_argv
    for node in nodes[1:]:
        if node.common_argv != head or node.argv[len(head) :] != rank_args(node.rank, len(nodes)):
            raise InvariantBroken(
                f"the command for {node.name} differs from rank 0's beyond the rank flags",
                "this is a bug in spark-launch; please report it with the spec",
            )


def shell_words(words: Sequence[str]) -> str:
    """Words quoted for a POSIX shell: each arrives as exactly one argument (sent to nodes)."""
    return " ".join(shlex.quote(w) for w in words)


def shown_word(word: str) -> str:
    """One word as a person copies it into bash: POSIX quotes, or `$'...'` with escapes.

    A word holding a line break, an escape byte or an invisible character is written with
    escapes, so the text stays one line per option, a terminal cannot act on it, and what
    is copied is byte for byte what runs.
    """
    if word.isprintable():
        return shlex.quote(word)
    return "$'" + "".join(_escaped(ch) for ch in word) + "'"


def _escaped(ch: str) -> str:
    if ch in "\\'":
        return "\\" + ch
    if ch.isprintable():
        return ch
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch)
    # Bytes, not \u escapes: bash makes \u a character only in a UTF-8 locale.
    return named or "".join(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))


def pretty_command(argv: Sequence[str]) -> str:
    """The exact command as bash text, one option per line, each word as `shown_word` writes it.

    A positional word after a complete `--option=value` (a container image, say) starts its
    own line, so it is never read as that option's value.
    """
    lines: list[list[str]] = [[]]
    for word in argv:
        after_option = bool(lines[-1]) and "=" in lines[-1][-1] and lines[-1][-1].startswith("-")
        if lines[-1] and (word.startswith("-") or after_option):
            lines.append([])
        lines[-1].append(word)
    return " \\\n    ".join(" ".join(shown_word(w) for w in line) for line in lines)
