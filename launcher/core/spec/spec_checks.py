"""Problems a structurally valid spec can still have, without knowing vLLM. Pure.

Every name, path and address that reaches a command line, a file name or an environment
is checked here: one line, no leading '-' where a program would read an option, in range.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from typing import Protocol

from launcher.core.spec.container import check_container
from launcher.core.spec.misplaced import runtime_ignored
from launcher.core.spec.secrets import secret_name, secret_problems, token_kind
from launcher.core.spec.sections import LISTEN_WORDS, ApiSection, ModelSection, Node, Spec, VllmSection
from launcher.core.spec.versions import is_version
from launcher.errors import Problem

# Set by the launcher for each node from its own fields; never written by hand.
PER_NODE_ENV = ("VLLM_HOST_IP", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
CLUSTER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}\Z")
IFACE_NAME = re.compile(r"[A-Za-z0-9._@][A-Za-z0-9._@-]{0,14}\Z")
# Nothing here may start with '-': ssh and docker would read such a word as an option.
# An ssh target also reaches shells (rsync's remote shell, ProxyCommand's %r and %h): letters,
# digits, '.', '_', '-' (and '+' in a user name) only, never a shell metacharacter.
SSH_TARGET = re.compile(r"(?:[A-Za-z0-9_][A-Za-z0-9._+-]*@)?[A-Za-z0-9_][A-Za-z0-9._-]*(?::(\d{1,5}))?\Z")
SSH_TARGET_HINT = "use an ssh_config alias or user@host[:port] (no spaces, no leading '-', port 1-65535)"
IMAGE = r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}\Z"  # compiled when first used: a container spec
MAX_GPUS = 64
MAX_MEMORY_GIB = 1 << 20
ENV_NAME_HINT = "letters, digits and '_', not starting with a digit"
NO_NODES = Problem(("nodes",), "needs at least one node", "list the machines; the first is rank 0")


class Common(Protocol):
    """What every deployment of a spec file shares: a Spec, or the SpecFile it came from."""

    @property
    def name(self) -> str: ...
    @property
    def vllm(self) -> VllmSection: ...
    @property
    def nodes(self) -> tuple[Node, ...]: ...
    @property
    def env(self) -> dict[str, str]: ...
    @property
    def secrets(self) -> tuple[str, ...]: ...
    @property
    def ssh_config(self) -> str | None: ...
    @property
    def api(self) -> ApiSection: ...


def check_spec(spec: Spec) -> list[Problem]:
    """Problems a structurally valid spec can still have, without knowing vLLM."""
    return check_common(spec) + check_model(spec.model, spec.vllm)


def check_model(model: ModelSection, vllm: VllmSection) -> list[Problem]:
    """Problems of one deployment's model (paths relative to its section)."""
    return _check_model(model, vllm) + check_container(vllm.container, vllm.runtime, model.path)


def check_common(spec: Common) -> list[Problem]:
    """Problems of what every deployment shares: the name, vLLM, the nodes, env, secrets, ssh."""
    problems = [*_check_top(spec), *_check_vllm(spec.vllm), *check_nodes(spec.nodes)]
    problems += _check_env(spec) + runtime_ignored(spec.vllm) + _check_listen(spec)
    if spec.ssh_config is not None:
        problems += _one_line(("ssh_config",), spec.ssh_config)
        if spec.ssh_config.startswith("~") and not spec.ssh_config.startswith("~/"):
            problems.append(Problem(("ssh_config",), "only a leading ~/ is expanded", "write the path out"))
    return problems


def _one_line(path: tuple[str | int, ...], value: str) -> list[Problem]:
    """A name or path is one line of text: a line break or tab in it is a typo, never meant."""
    if any(c in value for c in "\n\r\t"):
        return [Problem(path, f"{value!r} holds a line break or tab", "names and paths are one line")]
    return []


def release_problem(path: tuple[str | int, ...], value: str) -> Problem | None:
    """Why `value` is not a vLLM version (PEP 440: 0.33.0, 0.33.1.dev45+g7ee8a6dd0), or None."""
    if is_version(value):
        return None
    return Problem(
        path,
        f"{value!r} is not a version number",
        'write the version the nodes report (PEP 440), quoted: "0.33.0", "0.33.0+cu130", '
        '"0.33.1.dev45+g7ee8a6dd0"',
    )


def _check_model(model: ModelSection, vllm: VllmSection) -> list[Problem]:
    problems = []
    name = model.served_name
    if name is not None and (not name.strip() or name.startswith("-") or _one_line((), name)):
        problems.append(
            Problem(
                ("model", "served_name"),
                f"{name!r} cannot be a served model name",
                "use a one-line name that does not start with '-'",
            )
        )
    path = model.path
    if not path.startswith("/"):
        problems.append(
            Problem(
                ("model", "path"),
                "must be an absolute path",
                "the same absolute path must exist on every node",
            )
        )
    problems += _one_line(("model", "path"), path)
    if model.kind is not None and model.hybrid is not None and (model.kind == "hybrid") != model.hybrid:
        hybrid = str(model.hybrid).lower()
        problems.append(
            Problem(
                ("model", "hybrid"), f"is {hybrid}, but model.kind is {model.kind}", "remove model.hybrid"
            )
        )
    if vllm.runtime == "docker" and ":" in path:
        problems.append(
            Problem(
                ("model", "path"),
                f"{path!r} holds ':', which docker --volume reads as a separator",
                "move or link the model to a path without ':'",
            )
        )
    return problems


def _check_top(spec: Common) -> list[Problem]:
    if CLUSTER_NAME.match(spec.name):
        return []
    return [
        Problem(
            ("name",),
            f"{spec.name!r} is not a usable cluster name",
            "use lower-case letters, digits, '.', '-' or '_' (it names files and labels)",
        )
    ]


def _check_vllm(section: VllmSection) -> list[Problem]:
    problems = []
    for key in ("version", "flags_from"):
        value = getattr(section, key)
        problem = release_problem(("vllm", key), value) if value is not None else None
        problems += [problem] if problem else []
    needed = "venv" if section.runtime == "venv" else "image"
    if getattr(section, needed) is None:
        what = "the vLLM venv's absolute path on the nodes" if needed == "venv" else "the image, by digest"
        problems.append(Problem(("vllm", needed), f"is required with runtime {section.runtime}", what))
    if section.venv is not None:
        problems += _check_venv(section.venv)
    if section.image is not None and not re.match(IMAGE, section.image):
        problems.append(
            Problem(
                ("vllm", "image"),
                f"{section.image!r} is not a container image reference",
                "e.g. nvcr.io/nvidia/vllm:26.05-py3 (a word of `docker run`: no spaces, no leading '-')",
            )
        )
    return problems


def _check_venv(venv: str) -> list[Problem]:
    where = ("vllm", "venv")
    if not venv.startswith("/"):
        return [
            Problem(
                where, "must be an absolute path on the nodes", "e.g. /opt/vllm (it runs <venv>/bin/vllm)"
            )
        ]
    if "=" in venv:
        # `check` runs <venv>/bin/python through `env NAME=value ...`, which reads a word
        # holding '=' as one more variable.
        return [Problem(where, f"{venv!r} holds '='", "use a venv path without '='")]
    return _one_line(where, venv)


def check_nodes(nodes: tuple[Node, ...]) -> list[Problem]:
    """The nodes: at least one, names, addresses and ssh targets usable and each used once."""
    if not nodes:
        return [NO_NODES]
    problems: list[Problem] = []
    for key in ("name", "address", "ssh"):
        counts = Counter(getattr(n, key) for n in nodes)
        for i, node in enumerate(nodes):
            if counts[getattr(node, key)] > 1:
                problems.append(
                    Problem(
                        ("nodes", i, key),
                        f"{getattr(node, key)!r} is used by more than one node",
                        f"each node needs its own {key}",
                    )
                )
    for i, node in enumerate(nodes):
        problems += _check_node(i, node)
    return problems


def _check_node(i: int, node: Node) -> list[Problem]:
    where: tuple[str | int, ...] = ("nodes", i)
    problems = []
    if not CLUSTER_NAME.match(node.name):
        problems.append(
            Problem(
                (*where, "name"),
                f"{node.name!r} is not a usable node name",
                "use lower-case letters, digits, '.', '-' or '_'",
            )
        )
    problems += _check_address((*where, "address"), node.address)
    if ssh_target_problem(node.ssh):
        problems.append(Problem((*where, "ssh"), f"{node.ssh!r} is not an ssh target", SSH_TARGET_HINT))
    devices: list[tuple[tuple[str | int, ...], str]] = [((*where, "interface"), node.interface)]
    devices += [((*where, "hca", j), hca) for j, hca in enumerate(node.hca)]
    for path, value in devices:
        if not IFACE_NAME.match(value):
            problems.append(
                Problem(
                    path,
                    f"{value!r} is not a network device name",
                    "the name `ip link` shows, e.g. enp1s0f0np0",
                )
            )
    if not 1 <= node.gpus <= MAX_GPUS:
        problems.append(
            Problem(
                (*where, "gpus"), f"must be between 1 and {MAX_GPUS}, got {node.gpus}", "a DGX Spark has 1"
            )
        )
    if node.memory_gib is not None and not 1 <= node.memory_gib <= MAX_MEMORY_GIB:
        problems.append(
            Problem(
                (*where, "memory_gib"),
                f"must be between 1 and {MAX_MEMORY_GIB} GiB, got {node.memory_gib:g}",
                "a 128 GB DGX Spark has 121.7, a 64 GB one about 60",
            )
        )
    for name in node.env:
        if name.startswith("VLLM_"):
            problems.append(
                Problem(
                    (*where, "env", name),
                    "a VLLM_* variable is an engine input and must be identical on all nodes",
                    "move it to the top-level env",
                )
            )
    return problems


def _check_address(where: tuple[str | int, ...], address: str) -> list[Problem]:
    hint = "vLLM binds to it (VLLM_HOST_IP): give the node's fabric IP, not a name"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return [Problem(where, f"{address!r} is not an IP address", hint)]
    scope = getattr(ip, "scope_id", None)
    if scope is not None and not IFACE_NAME.match(scope):
        return [Problem(where, f"{address!r}: the scope {scope!r} is not a network device name", hint)]
    if ip.is_unspecified or ip.is_multicast:
        return [Problem(where, f"{address!r} is not the address of one node", hint)]
    return []


def _check_listen(spec: Common) -> list[Problem]:
    """api.listen: a word, or an IP address of one node (never a name: vLLM binds it as given)."""
    listen = spec.api.listen
    where = ("api", "listen")
    hint = "loopback, fabric, all, or an IP address of the rank 0 node"
    if listen is None or listen in LISTEN_WORDS:
        return []
    try:
        ip = ipaddress.ip_address(listen)
    except ValueError:
        return [Problem(where, f"{listen!r} is neither {', '.join(LISTEN_WORDS)} nor an IP address", hint)]
    if ip.is_unspecified:
        return [Problem(where, f"{listen!r} is every interface", "write `all` to mean it")]
    if ip.is_multicast:
        return [Problem(where, f"{listen!r} is not the address of one node", hint)]
    if ip.is_loopback:
        return [Problem(where, f"{listen!r} is the loopback address", "write `loopback` to mean it")]
    return []


def _check_env(spec: Common) -> list[Problem]:
    problems = []
    scopes: list[tuple[tuple[str | int, ...], dict[str, str]]] = [(("env",), spec.env)]
    scopes += [(("nodes", i, "env"), n.env) for i, n in enumerate(spec.nodes)]
    for where, env in scopes:
        problems += secret_problems(where, env)
        for name, value in env.items():
            if ("\n" in value or "\r" in value) and not (secret_name(name) or token_kind(value)):
                problems.append(
                    Problem(
                        (*where, name),
                        f"the value {value!r} holds a line break",
                        "environment values are one line (a docker env file cannot hold more)",
                    )
                )
            if not ENV_NAME.match(name):
                problems.append(
                    Problem((*where, name), f"{name!r} is not a valid variable name", ENV_NAME_HINT)
                )
            elif name in PER_NODE_ENV:
                problems.append(
                    Problem(
                        (*where, name),
                        "is set by the launcher for each node",
                        "set the node's address, interface and hca instead",
                    )
                )
    for j, name in enumerate(spec.secrets):
        if not ENV_NAME.match(name):
            problems.append(Problem(("secrets", j), f"{name!r} is not a valid variable name", ENV_NAME_HINT))
        elif name in spec.env or any(name in n.env for n in spec.nodes):
            problems.append(
                Problem(
                    ("secrets", j),
                    f"{name} is also given a value in env",
                    "a secret's value comes from the launcher's environment only",
                )
            )
    return problems


def ssh_target_problem(target: str) -> str | None:
    """Why `target` cannot be an ssh target (None: it can): the spec's rule, kept by the executor too."""
    found = SSH_TARGET.match(target)
    if not found or not 0 < int(found.group(1) or 22) < 65536:
        return f"is not an ssh target (letters, digits, '.', '_', '-' only; {SSH_TARGET_HINT})"
    return None
