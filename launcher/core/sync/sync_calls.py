"""The calls `sync models` and `sync images` send to the nodes, as values. Pure.

Beside `core.remote` (whose `Call` and `script` they build on), so that the node-to-node
copies read in one place: the manifest everywhere, the copy from the source, the target made
ready, and the image streamed from the head into each target's engine.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from launcher.core.remote import PYTHON, Call, script
from launcher.core.render import shell_words

__all__ = [
    "ARG_LIMIT",
    "SYNC_DIR",
    "handover_call",
    "image_reach_call",
    "image_send_call",
    "install_transfer_call",
    "load_command",
    "manifest_call",
    "prepare_calls",
    "reach_call",
    "save_command",
    "transfer_calls",
]


def save_command(image: str) -> str:
    """On the node that holds the image: the image as a docker-archive stream on stdout."""
    return shell_words(["docker", "save", image])


def load_command() -> str:
    """On the node that takes the image: read a docker-archive stream from stdin."""
    return "docker load"


def image_reach_call(directory: str, hosts: dict[str, str], default_rsh: str) -> Call:
    """On the head: can its remote shell reach each target (by name: [user@]address), with docker there?"""
    job = {"targets": hosts, "default_rsh": default_rsh}
    return script("imagecopy", directory, "reach", json.dumps(job), timeout=90)


def image_send_call(directory: str, image: str, hosts: dict[str, str], default_rsh: str) -> Call:
    """On the head: `docker save` into `docker load` on every target, node to node over OpenSSH."""
    job = {"image": image, "targets": hosts, "default_rsh": default_rsh}
    about = "docker save | ssh TARGET docker load, for each target"
    return script("imagecopy", directory, "send", json.dumps(job), timeout=0, about=about)


# -- sync models: the manifest everywhere, the copy from the source, the target made ready --
SYNC_DIR = "sync"  # under the run directory: job files, the transfer script, relay sockets


ARG_LIMIT = 64 << 10  # a request that travels in the command line: bash -c takes it whole, up to 128 KiB


def manifest_call(directory: str, path: str, adopt: dict[str, list[Any]] | None = None) -> Call:
    """The model directory's manifest (cached hashes reused), indexes, free space, what is not writable.

    `adopt` ({file: [size, mtime, sha256]}): files a copy has just written and proven (see
    `transfer_calls`), recorded as hashed when the node finds them at that size and mtime.
    """
    request: dict[str, Any] = {"path": path, **({"adopt": adopt} if adopt else {})}
    if len(json.dumps(request)) > ARG_LIMIT:  # too many to pass: the node hashes them instead
        request = {"path": path}
    return script("manifest", directory, json.dumps(request), timeout=600)


def handover_call(directory: str, name: str, job: dict[str, Any]) -> tuple[Call, str]:
    """Write a job file (mode 0600) for a node script; the call, and the file's path on the node."""
    path = f"{directory}/{SYNC_DIR}/{name}.json"
    where = shlex.quote(f"{directory}/{SYNC_DIR}")
    command = f"umask 077 && mkdir -p {where} && cat > {shlex.quote(path)}"
    return Call(command, data=json.dumps(job), timeout=30, about="the job; the script deletes it"), path


def prepare_calls(directory: str, name: str, path: str, remove: tuple[str, ...]) -> tuple[Call, ...]:
    """On a target: create the model directory, remove what a copy cannot continue."""
    handover, job = handover_call(directory, name, {"path": path, "remove": list(remove)})
    return handover, script("prepare", directory, job, about="mkdir -p; remove the listed files")


def reach_call(directory: str, host: str, default_rsh: str) -> Call:
    """On the source: can its remote shell reach `host`, and does that node have rsync?"""
    job = {"host": host, "default_rsh": default_rsh}
    return script("transfer", directory, "reach", json.dumps(job), timeout=90)


def install_transfer_call(directory: str) -> Call:
    """On the source, for a relayed copy: keep the transfer script as a file, so that it runs
    with its stdin free: that stdin carries the target's side of the rsync stream.
    """
    where = f"{directory}/{SYNC_DIR}"
    return Call(
        f"umask 077 && mkdir -p {shlex.quote(where)} && cat > {shlex.quote(where)}/transfer.py",
        script="transfer",
        timeout=30,
        about="the transfer script, kept as a file",
    )


def transfer_calls(
    directory: str,
    name: str,
    argv: tuple[str, ...],
    files: dict[str, str],
    default_rsh: str,
    relay: bool,
    root: str,
    host: str,
) -> tuple[Call | None, Call]:
    """On the source: hand over the job (rsync's argv and file list), then run it with progress.

    `files` maps each file to the sha256 the source's manifest gave it: the script answers
    which of them rsync sent and still hold those bytes on the source (`verified`). `host` is
    the target as the remote shell reaches it ([user@]address), for which the node chooses
    the remote shell's ciphers (node/scripts/rsh.py). A job small enough travels as the
    script's argument (no secrets in it: paths and hashes), and the handover is None; a
    larger one is written to a file first.
    """
    job = {
        "argv": list(argv),
        "files": sorted(files),
        "attest": files,
        "root": root,
        "default_rsh": default_rsh,
        "relay": relay,
        "host": host,
    }
    inline = json.dumps(job)
    handover, job_path = (None, inline) if len(inline) <= ARG_LIMIT else handover_call(directory, name, job)
    if not relay:  # its stdin is free: the script travels on it, as every node script does
        about = "rsync to the target, progress as JSON lines"
        return handover, script("transfer", directory, "send", job_path, timeout=0, about=about)
    program = f"{directory}/{SYNC_DIR}/transfer.py"  # kept there by install_transfer_call
    run = Call(
        shlex.join([PYTHON, "-S", program, "transfer", directory, "send", job_path]),
        timeout=0,
        about="rsync to the target through this machine, progress as JSON lines",
    )
    return handover, run
