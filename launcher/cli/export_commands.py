"""`spark-launch export`: the cluster for other tools (a systemd unit, Kubernetes manifests)."""

from __future__ import annotations

from pathlib import Path

import click

from launcher.cli.shared import DEPLOYMENT, SPEC, SSH_CONFIG, echo, planned_fleet
from launcher.errors import ExitStatus


@click.group()
def export() -> None:
    """Export the cluster for other tools (systemd, Kubernetes).

    \b
    Examples:
      spark-launch export systemd cluster.yaml
      spark-launch export k8s cluster.yaml -o k8s/
    """


@export.command("systemd")
@SPEC
@click.option(
    "--install", is_flag=True, help="Write the unit and the secrets file, then enable the unit (root)."
)
@click.option(
    "--user", default=None, help="Run supervise as this user (needs SSH to the nodes) [default: you]."
)
@click.option("--env-file", default=None, help="The secrets file [default: /etc/spark-launch/CLUSTER.env].")
@click.option(
    "--unit-dir", default="/etc/systemd/system", show_default=True, help="Where --install writes the unit."
)
@SSH_CONFIG
@click.option("--events", default=None, help="supervise --events for the unit.")
@click.option("--drop-caches", is_flag=True, help="supervise --drop-caches for the unit.")
def systemd(
    spec: str,
    install: bool,
    user: str | None,
    env_file: str | None,
    unit_dir: str,
    ssh_config: str | None,
    events: str | None,
    drop_caches: bool,
) -> ExitStatus:
    """Print (or --install) a systemd unit running `supervise` for SPEC on this machine.

    The unit starts after the network is online, runs `spark-launch supervise SPEC` as
    --user, and on `systemctl stop` sends SIGTERM: supervise stops every rank. systemd
    restarts the supervisor itself after a crash, and when a node was unreachable (exit 4),
    but not after it gave up on a cluster that keeps dying (exit 1): that needs a person.
    The secrets' values are never in the unit: systemd reads them from --env-file (root
    only, mode 0600). --install writes the unit to --unit-dir and, unless it exists, the
    environment file with each secret's value from this environment (a line to fill in
    otherwise), then runs `systemctl daemon-reload` and `systemctl enable`.

    \b
    Examples:
      spark-launch export systemd cluster.yaml > spark-launch-spark-pair.service
      sudo --preserve-env=HF_TOKEN spark-launch export systemd cluster.yaml \\
        --install --user ops
      systemctl start spark-launch-spark-pair
      journalctl -u spark-launch-spark-pair -f
    """
    import os
    from dataclasses import replace

    from launcher.commands.export_systemd import default_env_file, supervise_unit
    from launcher.commands.export_systemd import install as write_unit
    from launcher.core.serving.systemd_unit import render_unit

    fleet = planned_fleet(spec, ssh_config)  # it must plan, as supervise will
    # the unit supervises every deployment, and the endpoint (its key too)
    planned = replace(fleet.deployments[0].spec, name=fleet.name, secrets=fleet.secrets())
    extra = [
        *(["--ssh-config", str(Path(ssh_config).resolve())] if ssh_config else []),
        *(["--events", str(Path(events).expanduser().resolve())] if events else []),
        *(["--drop-caches"] if drop_caches else []),
    ]
    unit = supervise_unit(planned, spec, env_file or default_env_file(planned.name), user, extra)
    text = render_unit(unit)
    if not install:
        echo(text, nl=False)
        return ExitStatus.OK
    values = {n: os.environ[n] for n in planned.secrets if n in os.environ}
    done = write_unit(unit, text, values, unit_dir)
    echo(f"wrote {done.unit_path}")
    missing = [n for n in planned.secrets if n not in values]
    if done.env_written:
        echo(
            f"wrote {done.env_path} (root only, 0600)"
            + (f"; fill in: {', '.join(missing)}" if missing else "")
        )
    else:
        echo(f"kept {done.env_path} as it is (its values were not changed)")
    echo(f"enabled; start it now: systemctl start {Path(done.unit_path).name}")
    return ExitStatus.OK


@export.command("k8s")
@SPEC
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    metavar="DIR",
    help="Write one file per deployment here.",
)
@DEPLOYMENT
def k8s(spec: str, out_dir: str | None, deployment: str | None) -> ExitStatus:
    """Print (or write to DIR) SPEC's deployments as Kubernetes manifests (LeaderWorkerSet).

    Per deployment: a LeaderWorkerSet whose pods run the plan's argv for their rank word for
    word (LeaderWorkerSet supplies only --master-addr, --node-rank and VLLM_HOST_IP), the API's
    Service, and a ConfigMap with the plan's values: each pod's init container has its own vLLM
    resolve its exact command and stops the pod, naming the settings, unless it derives what
    the plan pins. With several deployments, the endpoint as a Deployment and a Service. The
    spec's export.k8s section says the image (venv specs), the network, the model's volume
    and the Secret holding the secrets' values (never written here). See deploy/kubernetes.md.

    \b
    Examples:
      spark-launch export k8s cluster.yaml -o k8s/ && kubectl apply -f k8s/
      spark-launch export k8s cluster.yaml --deployment big | kubectl apply -f -
    """
    from launcher.commands.export_k8s import manifests, render, write
    from launcher.load import read_file

    document, file = read_file(spec)
    done = manifests(document, file, planned_fleet(spec, None), deployment)
    if out_dir is None:
        echo("".join(render(m) for m in done), nl=False)
        return ExitStatus.OK
    for path in write(done, out_dir):
        echo(f"wrote {path}")
    return ExitStatus.OK
