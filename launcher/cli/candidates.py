"""What the shell may complete a value with (click's `shell_complete=` callbacks): the deployments
and nodes of the spec on the command line, its recorded runs, the hosts of an ssh_config.

Each reads only what it names, as plain YAML or text (a spec is not checked, let alone planned),
and never fails: a spec that is not there yet, or does not parse, offers nothing. Each offer
carries a description, which zsh and fish show beside it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # click.shell_completion is imported when the shell asks, not by every command
    import click
    from click.shell_completion import CompletionItem


def _spec_file(ctx: click.Context) -> dict[str, Any]:
    """The spec given before the word being completed, as its YAML reads; {} when there is none."""
    path = ctx.params.get("spec")
    if path is None and ctx.args:  # the option being completed stopped click's parse before SPEC
        path = ctx.args[0]
    if not isinstance(path, str):
        return {}
    try:
        import yaml

        with open(path, encoding="utf-8") as f:
            loaded = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception:  # any reason at all: the shell offers nothing rather than a traceback
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _entries(section: object) -> list[dict[str, Any]]:
    """The mappings of a list section that have a name (nodes, deployments)."""
    if not isinstance(section, list):
        return []
    return [e for e in section if isinstance(e, dict) and isinstance(e.get("name"), str)]


def _offer(pairs: Iterable[tuple[str, str]], incomplete: str) -> list[CompletionItem]:
    from click.shell_completion import CompletionItem

    return [CompletionItem(value, help=about) for value, about in pairs if value.startswith(incomplete)]


def deployments(ctx: click.Context, _: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """--deployment: each deployment's name (the cluster's in a spec of one), with its model and nodes."""
    spec = _spec_file(ctx)
    listed = _entries(spec.get("deployments"))
    if not listed:
        name = spec.get("name")
        return _offer([(name, "the spec's one deployment")], incomplete) if isinstance(name, str) else []
    pairs = []
    for d in listed:
        model, on = d.get("model"), d.get("nodes")
        served = (model.get("served_name") or model.get("path")) if isinstance(model, dict) else None
        where = ", ".join(map(str, on)) if isinstance(on, list) else "?"
        pairs.append((d["name"], f"{served or '?'} on {where}"))
    return _offer(pairs, incomplete)


def nodes(ctx: click.Context, _: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """--node, --from: the spec's node names, each with how it is reached."""
    listed = _entries(_spec_file(ctx).get("nodes"))
    return _offer([(n["name"], f"ssh {n.get('ssh', n['name'])}") for n in listed], incomplete)


def runs(ctx: click.Context, _: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """diff's RUN_A and RUN_B: `now`, and the runs recorded on this machine, newest first."""
    name = _spec_file(ctx).get("name")
    pairs = [("now", "what the nodes hold now (asked over SSH)")]
    if isinstance(name, str):
        try:
            from launcher.operations.receipt_store import load_all

            kept = load_all(name)
        except Exception:  # a state directory that cannot be read offers `now` alone
            kept = []
        for receipt in reversed(kept):
            started, outcome = receipt.get("started") or "?", receipt.get("outcome") or "?"
            pairs.append((str(receipt.get("run_id")), f"{outcome}, started {started}"))
    return _offer(pairs, incomplete)


def hosts(ctx: click.Context, _: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """--hosts HOST1,HOST2,...: the Host aliases of the ssh_config (--ssh-config, else ~/.ssh/config),
    for the host after the last comma, the ones before it kept."""
    given = ctx.params.get("ssh_config")
    path = given if isinstance(given, str) else os.path.expanduser("~/.ssh/config")
    before = incomplete.rpartition(",")[0]
    lead = f"{before}," if before else ""
    taken = set(before.split(","))
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except Exception:
        return []
    aliases: dict[str, None] = {}
    for line in lines:
        words = line.split()
        if len(words) > 1 and words[0].lower() == "host":
            aliases.update((w, None) for w in words[1:] if not set(w) & set("*?!") and w not in taken)
    return _offer([(lead + a, f"Host in {path}") for a in aliases], incomplete)
