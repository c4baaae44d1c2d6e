"""`spark-launch export`: the cluster's supervision for other tools (a systemd unit)."""

from __future__ import annotations

from pathlib import Path

from launcher.cli.commandline import group, option
from launcher.cli.shared import SPEC, SSH_CONFIG, echo, planned_fleet
from launcher.errors import ExitStatus


@group()
def export() -> None:
    """Export the cluster's supervision for other tools (systemd).

    \b
    Example:
      spark-launch export systemd cluster.yaml
    """


@export.command("systemd")
@SPEC
@option("--install", is_flag=True, help="Write the unit and the secrets file, then enable the unit (root).")
@option("--user", default=None, help="Run supervise as this user (needs SSH to the nodes) [default: you].")
@option("--env-file", default=None, help="The secrets file [default: /etc/spark-launch/CLUSTER.env].")
@option(
    "--unit-dir", default="/etc/systemd/system", show_default=True, help="Where --install writes the unit."
)
@SSH_CONFIG
@option("--events", default=None, help="supervise --events for the unit.")
@option("--drop-caches", is_flag=True, help="supervise --drop-caches for the unit.")
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

    \b
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
      sudo --preserve-env=HF_TOKEN spark-launch export systemd cluster.yaml --install --user ops
      systemctl start spark-launch-spark-pair && journalctl -u spark-launch-spark-pair -f
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
