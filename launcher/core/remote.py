"""Every command the launcher sends to a node, as a value. Pure.

The node side executes these Calls and `up --dry-run` prints them: one source, so what
the dry run shows is what `up` sends. A Call runs a node script of the unit (by name;
`launcher/node/scripts/` holds them, `node/unit.py` builds the unit) or a shell line, and
may carry data on its stdin.

A script call's command line is `PYTHON -c STUB UNIT SCRIPT ARGS...` (`core.stubs`): the
stub runs the script's module as __main__ from the unit kept on the node, once it has
checked that the unit's sha256 is UNIT. UNIT is bound by the agent that sends the call
(`Call.bound`). In a container, which sees nothing of the node's home, the unit travels on
the call's stdin instead (`carried`).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, replace
from typing import Any

from launcher.core.plan import Plan
from launcher.core.render import (
    CONTAINER_LABEL,
    RUN_ROOT,
    NodeCommand,
    container_label,
    container_name,
    run_dir,
    runtime_prefix,
    shell_words,
)
from launcher.core.spec.container import container_options
from launcher.core.spec.sections import Spec, VllmSection
from launcher.core.stubs import CARRY_STUB, RUN_STUB

PYTHON = "python3"  # the nodes' own interpreter runs the scripts (3.8 or newer)
# The scripts take the standard library only: without `site` (-S) no package installed on the
# node (nor its .pth start-up hooks) can slow them down or change what they do.
SCRIPT_PYTHON = f"{PYTHON} -S"
PROBE_CACHE = ".spark-launch/cache/probe"  # under the remote user's home


@dataclass(frozen=True, slots=True)
class Call:
    """One command sent to a node: the shell line, and what its stdin gets.

    A script call's `line` is the Python that runs the stub (`python3 -S`, a venv's python,
    `docker run ... IMAGE python3`); its command line follows from the stub, the unit it is
    bound to, the script and `args`.
    """

    line: str
    script: str | None = None  # a node script of the unit, by name
    args: tuple[str, ...] = ()  # the script's arguments (the first is the run directory, mostly)
    data: str | None = None  # what stdin gets (a carried unit comes first, on a line of its own)
    unit: str = ""  # the unit's sha256: bound by the agent that sends the call
    carried: bool = False  # the unit travels on stdin: for a container, which cannot see it kept
    redirect: str = ""  # shell words after the script's arguments
    timeout: float = 60.0
    about: str = ""  # what it does, for the dry run

    @property
    def command(self) -> str:
        """The shell line the node runs."""
        if self.script is None:
            return self.line
        stub = CARRY_STUB if self.carried else RUN_STUB
        words = shlex.join([self.unit, self.script, *self.args])
        return f"{self.line} -c {shlex.quote(stub)} {words}" + (f" {self.redirect}" if self.redirect else "")

    def bound(self, unit: str, carried: bool = False) -> Call:
        """This call run from the unit `unit` (with `carried`: sent with it on stdin)."""
        return replace(self, unit=unit, carried=self.carried or carried) if self.script else self


def brief(command: str) -> str:
    """A command line as a message shows it: the stub's text as STUB, so the script's name shows."""
    for stub in (RUN_STUB, CARRY_STUB):
        command = command.replace(shlex.quote(stub), "STUB")
    return command


def script(name: str, directory: str, *args: str, timeout: float = 60.0, about: str = "") -> Call:
    """Run node script `name` of the unit with `python3 -S` on the node's run directory and `args`.

    The script's name is on the command line, so `ps` on the node (and the dry run) says
    which one runs.
    """
    return Call(SCRIPT_PYTHON, script=name, args=(directory, *args), timeout=timeout, about=about)


def unit_call(carried: bool = True) -> Call:
    """Keep the unit on the node: sent on stdin (`carried`), hashed there, written into place
    (`node/scripts/install.py`); the answer says it is kept, or why it cannot be. Not carried:
    whether it is kept already (a stub that finds none has the agent send it)."""
    return Call(SCRIPT_PYTHON, script="install", carried=carried, timeout=60, about="keep the unit")


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


def start_call(directory: str, job: dict[str, Any], keep: tuple[str, str] | None = None) -> Call:
    """Start the job detached; the job (its secret values too) on stdin, never on the node's
    disk. `keep`: a file (path under the home, text) the node keeps first: the run's receipt,
    sent with the head's start instead of in a call of its own."""
    parcel = {"keep": {"path": keep[0], "text": keep[1]}} if keep is not None else {}
    return Call(
        SCRIPT_PYTHON,
        script="start",
        args=(directory,),
        data=json.dumps({**job, **parcel}),
        timeout=30,
        about="starts the job on stdin detached, in its own session, with its env",
    )


def status_call(directory: str, offset: int | None = None) -> Call:
    """State, liveness and exit status; with `offset`, the log from there on."""
    return script("rank_status", directory, *([] if offset is None else [str(offset)]), timeout=30)


def watch_call(directory: str, offset: int, seconds: float) -> Call:
    """Stream the log from `offset` and the rank's exit as JSON lines, for up to `seconds`."""
    return script("watch", directory, str(offset), str(int(seconds) + 1), timeout=seconds + 60)


def stop_call(directory: str, grace: float, containers: bool = False) -> Call:
    """Stop every process of ours on the node (TERM, then KILL after `grace` s).

    With `containers`: stop and remove every container carrying the cluster's label.
    """
    return script("stop", directory, str(grace), *(["containers"] if containers else []), timeout=grace + 30)


def logs_call(directory: str, lines: int, follow: bool) -> Call:
    """The current run's log, its last `lines`; with `follow`, until interrupted."""
    return script("log_tail", directory, str(lines), *(["follow"] if follow else []))


def lock_call(directory: str, holder: dict[str, Any], stale: str | None = None, status: bool = False) -> Call:
    """Take the cluster lock (kept beside this node's run directory); with `stale`, break it
    in the same step if the holder with that token still has it. With `status`, the answer
    also says what runs on the node once the lock is taken (`status_call`'s answer)."""
    action = "hold" if status else "take"
    return script("cluster_lock", directory, action, json.dumps(holder), *([stale] if stale else []))


def unlock_call(directory: str, token: str, keep: tuple[str, str] | None = None) -> Call:
    """Release the cluster lock held with `token` ('*' forces it); `keep`: a file (path under
    the home, text on stdin) the node keeps first, the run's last receipt."""
    if keep is None:
        return script("cluster_lock", directory, "release", token)
    call = script("cluster_lock", directory, "release", token, keep[0])
    return replace(call, data=keep[1])


def facts_call(directory: str, request: dict[str, Any]) -> Call:
    """Everything `check` compares, gathered on the node."""
    return script("check_facts", directory, json.dumps(request), timeout=120)


def image_call(directory: str, image: str) -> Call:
    """The image as the node's engine holds it (id, repo digests, size), and its free space."""
    return script("image", directory, image)


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


def stacks_call(directory: str, request: dict[str, Any]) -> Call:
    """Every Python process of ours on the node: its stacks (py-spy) and the log's tail, kept there."""
    return script("stacks", directory, json.dumps(request), timeout=120)


def receipts_dir(cluster: str) -> str:
    """Where the head keeps the cluster's receipts: beside the nodes' run directories."""
    return f"{RUN_ROOT}/{cluster}/runs"


def receipt_path(cluster: str, run_id: str) -> str:
    """One run's receipt on the head, under the home."""
    return f"{receipts_dir(cluster)}/{run_id}.json"


def save_receipt_call(cluster: str, run_id: str, text: str) -> Call:
    """Write one run's receipt on the head (mode 0600, replaced whole)."""
    where = shlex.quote(receipts_dir(cluster))
    name = shlex.quote(receipt_path(cluster, run_id))
    return Call(
        f"umask 077 && mkdir -p {where} && cat > {name}.tmp && mv {name}.tmp {name}",
        data=text,
        timeout=30,
        about="the run's receipt, beside the run directories",
    )


def probe_call(spec: Spec, node: NodeCommand, tag: str, fresh: bool = False) -> Call:
    """The node's own vLLM resolves exactly the argv and env the plan runs there (secrets aside).

    The environment travels on stdin (one JSON line, `--environ`): no value reaches an argv,
    which `ps` shows every user of the node.
    venv runtime: the venv's python runs the probe from the kept unit; the answer is cached on
    the node under PROBE_CACHE, keyed by everything that decides it (`tag` names this probe's
    version); `fresh` resolves anyway.
    docker runtime: inside the image, with the options `up` gives the container (network,
    IPC, GPUs, limits, the model mount), the unit carried on stdin. The container keeps
    nothing: its answer is kept on the node by `probe_save_call`, keyed by the image's id, this
    very command and the environment, and found there by the facts call (`probe_request`).
    """
    serve_argv = node.argv[len(runtime_prefix(spec)) :]
    env = json.dumps(dict(node.env)) + "\n"
    if spec.vllm.runtime == "venv":
        cache = ["--cache", PROBE_CACHE, "--tag", tag, *(["--fresh"] if fresh else [])]
        args = ("--environ", *cache, "resolve", *serve_argv)
        return Call(shell_words([f"{spec.vllm.venv}/bin/python"]), "probe", args, env, timeout=600)
    docker = [
        "docker",
        "run",
        "--rm",
        "--interactive",
        container_label(spec),
        *container_options(spec.vllm.container, spec.model.path),
        str(spec.vllm.image),
        PYTHON,
    ]
    args = ("--environ", "resolve", *serve_argv)
    return Call(shell_words(docker), "probe", args, env, carried=True, timeout=600)


def probe_request(spec: Spec, node: NodeCommand, tag: str) -> dict[str, Any]:
    """What the facts call needs to find the probe's cached answer (`facts.probe_lookup`): the
    inputs of its key, as the probe itself would see them on that node."""
    if spec.vllm.runtime == "venv":
        return {"tag": tag, "argv": list(node.argv[len(runtime_prefix(spec)) :]), "env": dict(node.env)}
    command = probe_call(spec, node, tag).command
    return {"tag": tag, "command": command, "env": dict(node.env), "model": spec.model.path}


PROBE_KEY = re.compile(r"image-[0-9a-f]{64}\Z")


def probe_save_call(key: str, answer: dict[str, Any]) -> Call:
    """Keep a docker probe's answer on the node under the key its facts call gave."""
    if not PROBE_KEY.match(key):
        raise ValueError(f"not a probe cache key: {key!r}")
    where = f"~/{PROBE_CACHE}"
    name = f"{where}/{key}.json"
    return Call(
        f"umask 077 && mkdir -p {where} && cat > {name}.tmp && mv {name}.tmp {name}",
        data=json.dumps(answer),
        timeout=30,
        about="the probe's answer, cached on the node by the image's id and the probe's command",
    )


def preflight_call(spec: Spec, node: NodeCommand, directory: str, request: dict[str, Any]) -> Call:
    """The collective preflight on the node, under its vLLM's Python, with the env the plan gives vLLM.

    As the probe runs: the environment on stdin (`--environ`), in the image with the
    container's options for docker (the unit carried); stderr joined to stdout, so that what
    fails before the script answers is read too.
    """
    args = ("--environ", directory, json.dumps(request))
    env = json.dumps(dict(node.env)) + "\n"
    if spec.vllm.runtime == "venv":
        python = shell_words([f"{spec.vllm.venv}/bin/python"])
        return Call(python, "preflight", args, env, redirect="2>&1", timeout=0)
    docker = ["docker", "run", "--rm", "--interactive", container_label(spec)]
    options = container_options(spec.vllm.container, spec.model.path)
    python = shell_words([*docker, *options, str(spec.vllm.image), PYTHON])
    return Call(python, "preflight", args, env, carried=True, redirect="2>&1", timeout=0)


def preflight_port_call(directory: str, address: str) -> Call:
    """A port free on the head right now, for the preflight's store (the nodes' own python3)."""
    return script("preflight", directory, "port", address, timeout=30)


def planning_call(directory: str, request: dict[str, Any]) -> Call:
    """What a plan made elsewhere needs from the head: the model's small files, the vLLM build."""
    return script("planning", directory, json.dumps(request), timeout=120)


def catalog_call(vllm: VllmSection, cluster: str) -> Call:
    """The head's own vLLM writes its flag catalog (flags, model traits): no weights, no device.

    venv runtime: the venv's python, from the kept unit; docker runtime: the image's, in a
    container without a network that is removed after (labelled as the cluster's, so `down`
    would remove it), the unit carried.
    """
    if vllm.runtime == "venv":
        return Call(shell_words([f"{vllm.venv}/bin/python"]), "learn_catalog", timeout=900)
    docker = ["docker", "run", "--rm", "--interactive", "--pull=never", "--network=none"]
    label = f"--label={CONTAINER_LABEL}={cluster}"
    python = shell_words([*docker, label, "--entrypoint", PYTHON, str(vllm.image)])
    return Call(python, "learn_catalog", carried=True, timeout=900)


def dry_run_calls(spec: Spec, plan: Plan, unit: str) -> dict[str, tuple[Call, ...]]:
    """What `up` sends to each node to start it, from the unit `unit`, secret values masked:
    for `up --dry-run`."""
    masked = dict.fromkeys(spec.secrets, "<secret>")
    return {
        n.name: (
            start_call(run_dir(plan.cluster, n.name), node_job(spec, plan, n, "<run id>", masked)).bound(
                unit
            ),
        )
        for n in plan.nodes
    }


def discover_call(directory: str, request: dict[str, Any]) -> Call:
    """What `init` needs from a node: interfaces and RDMA devices, GPUs, vLLM, the model."""
    return script("discover", directory, json.dumps(request), timeout=300)
