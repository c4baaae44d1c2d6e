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

from launcher.core.plan import Plan
from launcher.core.render import NodeCommand, container_name, run_dir, shell_words
from launcher.core.spec import Spec

PYTHON = "python3"  # the nodes' own interpreter runs the scripts (3.8 or newer)
PROBE_CACHE = ".spark-launch/cache/probe"  # under the remote user's home


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


def watch_call(directory: str, offset: int, seconds: float) -> Call:
    """Stream the log from `offset` and the rank's exit as JSON lines, for up to `seconds`."""
    return script("watch", directory, str(offset), str(int(seconds) + 1), timeout=seconds + 60)


def stop_call(directory: str, grace: float) -> Call:
    """Stop every process of ours on the node (TERM, then KILL after `grace` s)."""
    return script("stop", directory, str(grace), timeout=grace + 30)


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


def listen_call(directory: str, address: str, port: int, expect: int, seconds: float) -> Call:
    """Accept `expect` TCP connections on address:port within `seconds`."""
    return script("net", directory, "listen", address, str(port), str(expect), str(seconds))


def connect_call(directory: str, address: str, port: int, seconds: float) -> Call:
    """One TCP connection to address:port from the node."""
    return script("net", directory, "connect", address, str(port), str(seconds))


def drop_caches_call(directory: str) -> Call:
    """`sync`, then drop the node's page cache (as root, or through `sudo -n`)."""
    return script("drop", directory, timeout=300, about="sync, then echo 3 > /proc/sys/vm/drop_caches")


def gather_call(directory: str, request: dict[str, Any]) -> Call:
    """What a bug report needs from the node (logs, GPU, network, kernel, versions), secrets replaced."""
    return script("gather", directory, json.dumps(request), timeout=120)


def probe_call(spec: Spec, node: NodeCommand, tag: str, fresh: bool = False) -> Call:
    """The node's own vLLM resolves exactly the argv and env the plan runs there (secrets aside).

    Its answer is cached on the node under PROBE_CACHE, keyed by everything that decides it
    (`tag` names this probe's version); `fresh` resolves anyway.
    """
    env = [f"{k}={v}" for k, v in node.env.items()]
    cache = ["--cache", PROBE_CACHE, "--tag", tag, *(["--fresh"] if fresh else [])]
    words = ["env", *env, f"{spec.vllm.venv}/bin/python", "-", *cache, "resolve", *node.argv[2:]]
    return Call(shell_words(words), script="probe", timeout=600)


def dry_run_calls(spec: Spec, plan: Plan) -> dict[str, tuple[Call, ...]]:
    """What `up` sends to each node to start it, secret values masked: for `up --dry-run`."""
    masked = dict.fromkeys(spec.secrets, "<secret>")
    return {
        n.name: start_calls(run_dir(plan.cluster, n.name), node_job(spec, plan, n, "<run id>", masked))
        for n in plan.nodes
    }
