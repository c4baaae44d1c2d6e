"""The image's bytes, head to targets: node to node over OpenSSH, or relayed through this machine.

Direct (the default): the head's `imagecopy` script runs `docker save` into one OpenSSH
process per target (`ssh ADDRESS docker load`, at the target's fabric address), so the
stream is encrypted once, by OpenSSH, and never crosses this machine. The head must reach
each target over SSH without a prompt; one that it cannot reach is named, with the fix.
Relayed (`--relay`): `docker save` on the head streams through the launcher's own SSH
connections into each target's `docker load`, for nodes that cannot SSH to each other.

Either way: the bytes each target was given, and per target why its copy did not take.
"""

from __future__ import annotations

from collections.abc import Callable

from launcher.core.answers.images_answer import Copied, Reach, Reached, sent_event
from launcher.core.sync import sync_calls
from launcher.core.sync.transfer_plan import DEFAULT_RSH, remote_host
from launcher.node.cluster import Cluster
from launcher.node.executor import NodeError, Result
from launcher.node.relay import copy_to_all

OnSent = Callable[[str, int], None]  # (target, bytes it has been given so far)
Given = tuple[dict[str, int], dict[str, str]]  # bytes per target; why, per target that failed


def direct_copy(cluster: Cluster, image: str, targets: list[str], on_sent: OnSent) -> Given:
    """The head saves once and loads into every target it reaches, node to node."""
    head = cluster.agents[cluster.head.name]
    hosts = {n: _host(cluster, n) for n in targets}
    reached = head.ask(sync_calls.image_reach_call(head.dir, hosts, DEFAULT_RSH), Reached.parse)
    why = {
        n: _unreached(cluster, n, hosts[n], a, reached.rsh) for n, a in reached.targets.items() if not a.ok
    }
    going = {n: h for n, h in hosts.items() if n not in why}
    if not going:
        return {}, why
    answer: list[Copied] = []

    def on_line(event: dict[str, int] | Copied) -> None:
        if isinstance(event, Copied):
            answer.append(event)
        else:
            for name, sent in event.items():
                on_sent(name, sent)

    head.events(sync_calls.image_send_call(head.dir, image, going, DEFAULT_RSH), sent_event, on_line)
    copied = answer[-1] if answer else None
    sent = {n: copied.targets[n].bytes if copied and n in copied.targets else 0 for n in going}
    for name in going:
        problem = _failed(copied, name)
        if problem:
            why[name] = problem
    return sent, why


def relayed_copy(cluster: Cluster, image: str, targets: list[str], on_sent: OnSent) -> Given:
    """The head's save through this machine's SSH connections into every target's load."""
    relayed = copy_to_all(
        cluster.executor,
        cluster.head.name,
        sync_calls.save_command(image),
        dict.fromkeys(targets, sync_calls.load_command()),
        on_sent,
    )
    why = {n: _relay_failed(relayed.targets.get(n), relayed.source) for n in targets}
    return relayed.sent, {n: w for n, w in why.items() if w}


def _failed(copied: Copied | None, name: str) -> str | None:
    """Why one target's direct copy did not take (the save's failure first), or None."""
    if copied is None:
        return "the head's copy script ended without an answer"
    if copied.save_exit:
        return f"docker save on the head failed (exit {copied.save_exit}): {copied.save_error}"
    target = copied.targets.get(name)
    if target is None:
        return "the head's copy script did not say how this node's load ended"
    if target.exit:
        return f"docker load failed (exit {target.exit}): {target.error or 'no output'}"
    return None


def _relay_failed(loaded: Result | NodeError | None, saved: Result) -> str | None:
    """Why one target's relayed copy did not take: the target, the save, the load; or None."""
    if isinstance(loaded, NodeError):
        return loaded.message
    if not saved.ok:
        return f"docker save on the head failed (exit {saved.exited}): {saved.stderr.strip()[-300:]}"
    if loaded is not None and not loaded.ok:
        return f"docker load failed (exit {loaded.exited}): {(loaded.stderr or loaded.stdout).strip()[-300:]}"
    return None


def _unreached(cluster: Cluster, node: str, host: str, answer: Reach, rsh: str) -> str:
    head = cluster.head.name
    if answer.failed == "docker":
        return f"{node} has no usable docker through `{rsh} {host}`: {answer.error}"
    return (
        f"{head} cannot reach {node} at {host} over SSH with `{rsh}`: {answer.error}; "
        f"give {head} a key for it (on {head}: `ssh-copy-id {host}`, then `ssh {host} true` once "
        "to accept its host key), or copy through this machine: --relay"
    )


def _host(cluster: Cluster, name: str) -> str:
    node = next(n for n in cluster.spec.nodes if n.name == name)
    return remote_host(node.address, node.ssh)
