"""Commands about what runs were made of: runs, diff, lock."""

from __future__ import annotations

import json
from typing import Any

import click

from launcher.cli import candidates
from launcher.cli.shared import JSON, SPEC, SSH_CONFIG, echo, open_cluster
from launcher.errors import ExitStatus


@click.command()
@SPEC
@JSON
def runs(spec: str, as_json: bool) -> ExitStatus:
    """List the cluster's runs: one receipt per start (`up`, and each restart by `supervise`).

    A receipt keeps every input of a run: the plan's digest, each node's argv and environment
    (names and value hashes; secrets by name only), the vLLM build (release, commit, fingerprint)
    or the image (id, digests), the model's files by sha256, the host facts (kernel, OS, GPUs,
    driver) and the check's rows; its outcome (served, failed, interrupted), and the evidence
    captured when a rank died or the engine wedged (every rank's Python stacks, by py-spy, and
    the last log lines). Kept on this machine in $XDG_STATE_HOME/spark-launch/CLUSTER/runs/
    (~/.local/state/... by default) and on the head in ~/.spark-launch/CLUSTER/runs/.

    \b
    Examples:
      spark-launch runs cluster.yaml
      spark-launch runs cluster.yaml --json | jq -r '.[-1].run_id'
    """
    from launcher.commands.runs import runs as listed
    from launcher.commands.runs import runs_text
    from launcher.load import plan_file

    planned, _ = plan_file(spec)
    found = listed(planned.name)
    echo(json.dumps(found, indent=2) if as_json else runs_text(planned.name, found))
    return ExitStatus.OK


@click.command()
@SPEC
@click.argument("sides", nargs=-1, metavar="[RUN_A [RUN_B]]", shell_complete=candidates.runs)
@SSH_CONFIG
@JSON
def diff(spec: str, sides: tuple[str, ...], ssh_config: str | None, as_json: bool) -> ExitStatus:
    """Say what changed between two runs, item by item.

    Without runs: the last two. With one: that run against the last (`now`: the last run
    against what the nodes hold now, asked over SSH). With two: the first against the second.
    A run is named by its id or the start of it (`spark-launch runs` lists them); `now` may
    stand for either side. Compared: the plan, then per node its argv words, its variables (by
    name: a changed value shows as a changed hash), the vLLM build or the image, the model's
    files (by name), the host facts (kernel, OS, GPUs, driver). A change made on every node is
    said once. Exit 0 when nothing differs, 1 when something does.

    \b
    Examples:
      spark-launch diff cluster.yaml
      spark-launch diff cluster.yaml now
      spark-launch diff cluster.yaml 20250101-120000-ab12 now --json
    """
    from launcher.commands.diff import compare, now_of, pick
    from launcher.core.receipts.run_diff import diff_text
    from launcher.load import plan_file

    planned, plan = plan_file(spec)

    def now() -> dict[str, Any]:
        with open_cluster(spec, ssh_config) as cluster:
            return now_of(cluster)

    chosen = pick(planned.name, list(sides), now)
    changes = compare(chosen)
    (label_a, _), (label_b, _) = chosen
    if as_json:
        echo(
            json.dumps({"from": label_a, "to": label_b, "changes": [c.as_dict() for c in changes]}, indent=2)
        )
    else:
        echo(diff_text(f"{planned.name}: {label_a} -> {label_b}", changes, [n.name for n in plan.nodes]))
    return ExitStatus.FAILURE if changes else ExitStatus.OK


@click.command()
@SPEC
@SSH_CONFIG
def lock(spec: str, ssh_config: str | None) -> ExitStatus:
    """Write SPEC.lock: what every node holds now, for review in git and for `up --locked`.

    Per node, in rank order, one `key = value` line per input, sorted: the vLLM build (release,
    commit, fingerprint of its files, python, torch) or the image (id, repo digests), each
    model directory's manifest digest and every file's sha256 (so a change names the file),
    and the host facts that must not move under a deployment (kernel, OS, GPUs, driver).
    `spark-launch up --locked SPEC` then refuses, before anything starts, while a node
    differs, naming what moved. Not the cluster lock that keeps two commands from acting at
    once: that one lives on the head.

    \b
    Examples:
      spark-launch lock cluster.yaml && git add cluster.yaml.lock
      spark-launch up cluster.yaml --locked
    """
    from launcher.commands.lock import write_lock

    with open_cluster(spec, ssh_config) as cluster:
        cluster.require_all("no lock was written")  # a lock of some nodes only would hold nothing
        path, nodes = write_lock(cluster, spec)
    counts = ", ".join(f"{n} ({len(e)} entries)" for n, e in nodes.items())
    echo(f"wrote {path}: {counts}; review it with `git diff {path.name}`")
    return ExitStatus.OK
