"""Every command the launcher sends to a node, as a value. Pure.

The node side executes these Calls and `up --dry-run` prints them: one source, so what
the dry run shows is what `up` sends. A Call names the node script fed on its stdin (by
name; `launcher/node/scripts/` holds them) or carries the data fed there.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from launcher.core.container import container_options
from launcher.core.plan import Plan
from launcher.core.render import (
    NodeCommand,
    container_label,
    container_name,
    run_dir,
    runtime_prefix,
    shell_words,
)
from launcher.core.spec import Spec

PYTHON = "python3"  # the nodes' own interpreter runs the scripts (3.8 or newer)


@dataclass(frozen=True)
class Call:
    """One command sent to a node: the shell line, and what its stdin gets."""

    command: str
    script: str | None = None  # a node script, by name, fed on stdin
    data: str | None = None  # or this text, fed on stdin
    timeout: float = 60.0
    about: str = ""  # what it does, for the dry run


def script(name: str, directory: str, *args: str, timeout: float = 60.0, about: str = "") -> Call:
    """Run node script `name` with `python3 -` on the node's run directory and `args`.

    The script's name is the first argument, so `ps` on the node (and the dry run) says
    which one runs.
    """
    words = [name, directory, *args]
    return Call(f"{PYTHON} - {shlex.join(words)}", script=name, timeout=timeout, about=about)


def node_job(
    spec: Spec, plan: Plan, node: NodeCommand, run_id: str, secret_values: dict[str, str]
) -> dict[str, Any]:
    """What the start script gets to start one rank (secret values included: never printed)."""
    return {
        "container": container_name(spec) if spec.vllm.runtime == "docker" else None,
        "cluster": plan.cluster,
        "node": node.name,
        "run_id": run_id,
        "argv": list(node.argv),
        "env": {**node.env, **{k: secret_values[k] for k in node.secrets}},
        "digest": plan.digest,
    }


def start_calls(directory: str, job: dict[str, Any]) -> tuple[Call, ...]:
    """Hand the job over (mode 0600, in a 0700 directory), then start it detached."""
    where = shlex.quote(directory)
    return (
        Call(
            f"umask 077 && mkdir -p {where}/logs && cat > {where}/run.json",
            data=json.dumps(job),
            timeout=30,
            about="the job, mode 0600; the start script deletes it as soon as it has read it",
        ),
        script("start", directory, about="starts the job detached, in its own session, with its env"),
    )


def status_call(directory: str, offset: int | None = None) -> Call:
    """State, liveness and exit status; with `offset`, the log from there on."""
    return script("status", directory, *([] if offset is None else [str(offset)]), timeout=30)


def stop_call(directory: str, grace: float, containers: bool = False) -> Call:
    """Stop every process of ours on the node (TERM, then KILL after `grace` s).

    With `containers`: stop and remove every container carrying the cluster's label.
    """
    return script("stop", directory, str(grace), *(["containers"] if containers else []), timeout=grace + 30)


def logs_call(directory: str, lines: int, follow: bool) -> Call:
    """The current run's log, its last `lines`; with `follow`, until interrupted."""
    return script("logs", directory, str(lines), *(["follow"] if follow else []))


def lock_call(directory: str, holder: dict[str, Any]) -> Call:
    """Take the cluster lock (kept beside this node's run directory)."""
    return script("lock", directory, "take", json.dumps(holder))


def unlock_call(directory: str, token: str) -> Call:
    """Release the cluster lock held with `token` ('*' forces it)."""
    return script("lock", directory, "release", token)


def facts_call(directory: str, request: dict[str, Any]) -> Call:
    """Everything `check` compares, gathered on the node."""
    return script("facts", directory, json.dumps(request), timeout=120)


def image_call(directory: str, image: str) -> Call:
    """The image as the node's engine holds it (id, repo digests, size), and its free space."""
    return script("image", directory, image)


def save_command(image: str) -> str:
    """On the node that holds the image: the image as a docker-archive stream on stdout."""
    return shell_words(["docker", "save", image])


def load_command() -> str:
    """On the node that takes the image: read a docker-archive stream from stdin."""
    return "docker load"


def listen_call(directory: str, address: str, port: int, expect: int, seconds: float) -> Call:
    """Accept `expect` TCP connections on address:port within `seconds`."""
    return script("net", directory, "listen", address, str(port), str(expect), str(seconds))


def connect_call(directory: str, address: str, port: int, seconds: float) -> Call:
    """One TCP connection to address:port from the node."""
    return script("net", directory, "connect", address, str(port), str(seconds))


def probe_call(spec: Spec, node: NodeCommand) -> Call:
    """The node's own vLLM resolves exactly the argv and env the plan runs there (secrets aside).

    docker runtime: inside the image, with the options `up` gives the container (network,
    IPC, GPUs, limits, the model mount) and the same environment, passed by name so the
    values stay out of docker's argv.
    """
    serve_argv = node.argv[len(runtime_prefix(spec)) :]
    env = ["env", *[f"{k}={v}" for k, v in node.env.items()]]
    if spec.vllm.runtime == "venv":
        return Call(
            shell_words([*env, f"{spec.vllm.venv}/bin/python", "-", "resolve", *serve_argv]),
            script="probe",
            timeout=600,
        )
    docker = [
        "docker",
        "run",
        "--rm",
        "--interactive",
        container_label(spec),
        *container_options(spec.vllm.container, spec.model.path),
        *[f"--env={k}" for k in node.env],
        str(spec.vllm.image),
    ]
    words = [*env, *docker, PYTHON, "-", "resolve", *serve_argv]
    return Call(shell_words(words), script="probe", timeout=600)


def dry_run_calls(spec: Spec, plan: Plan) -> dict[str, tuple[Call, ...]]:
    """What `up` sends to each node to start it, secret values masked: for `up --dry-run`."""
    masked = dict.fromkeys(spec.secrets, "<secret>")
    return {
        n.name: start_calls(run_dir(plan.cluster, n.name), node_job(spec, plan, n, "<run id>", masked))
        for n in plan.nodes
    }
