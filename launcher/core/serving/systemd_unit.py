"""The systemd unit that runs `spark-launch supervise` for one spec at boot, as text. Pure.

The unit starts once the network is online, runs the supervisor in the foreground and
stops it with SIGTERM (the supervisor then stops every rank). Its own restart policy
covers the supervisor itself: restarted after a crash or kill, and when a node could not
be reached (exit 4: after a power cut the other node may still be booting), but never
after it gave up on a cluster that keeps dying (exit 1), a bad spec (2) or nodes that
disagree (3): those need a person. Secret values live in an environment file readable by
root only, which systemd reads before dropping to `User=`; the unit names the secrets only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@")


@dataclass(frozen=True, slots=True)
class Unit:
    """What the unit runs, as whom, and where its secrets come from."""

    cluster: str
    command: tuple[str, ...]  # absolute interpreter, then its arguments
    env_file: str
    secrets: tuple[str, ...]
    user: str | None = None
    stop_seconds: int = 180  # the supervisor stops every rank before it exits
    restart_seconds: int = 60


def unit_name(cluster: str) -> str:
    """The unit's file name for a cluster."""
    return f"spark-launch-{cluster}.service"


def systemd_word(word: str) -> str:
    """One argument of ExecStart=, quoted the way systemd reads it (specifiers and $ escaped)."""
    escaped = word.replace("%", "%%").replace("$", "$$")
    if escaped and set(escaped) <= SAFE:
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_unit(unit: Unit) -> str:
    """The unit file's text."""
    exec_start = " ".join(systemd_word(w) for w in unit.command)
    lines = [
        f"# spark-launch: keep cluster {unit.cluster} serving (made by `spark-launch export systemd`).",
        f"# Secrets ({', '.join(unit.secrets) or 'none'}) come from {unit.env_file} (root only).",
        "[Unit]",
        f"Description=spark-launch supervise {unit.cluster}",
        "Wants=network-online.target",
        "After=network-online.target",
        "StartLimitIntervalSec=3600",
        "StartLimitBurst=5",
        "",
        "[Service]",
        "Type=simple",
        *([f"User={unit.user}"] if unit.user else []),
        "Environment=PYTHONUNBUFFERED=1",
        # Without secrets, a missing file is no reason not to start.
        f"EnvironmentFile={'' if unit.secrets else '-'}{unit.env_file}",
        f"ExecStart={exec_start}",
        "KillMode=mixed",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={unit.stop_seconds}",
        "Restart=on-failure",
        f"RestartSec={unit.restart_seconds}",
        "RestartPreventExitStatus=1 2 3",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"


def env_file_text(cluster: str, names: Sequence[str], values: Mapping[str, str]) -> str:
    """The environment file: each secret's value when given, else a line to fill in."""
    lines = [
        f"# Secrets for spark-launch cluster {cluster}: NAME=value, one per line.",
        "# Keep this file owned by root, mode 0600: systemd reads it before starting the supervisor.",
    ]
    for name in names:
        lines.append(f"{name}={env_value(values[name])}" if name in values else f"# {name}=")
    return "\n".join(lines) + "\n"


def env_value(value: str) -> str:
    """A value as an EnvironmentFile= line holds it: bare when plain, else double-quoted."""
    if value and set(value) <= SAFE:
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
