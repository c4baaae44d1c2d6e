"""`spark-launch export systemd`: a unit that runs `supervise` for a spec on this machine at boot.

Printing is pure (`core.serving.systemd`); `install` writes the unit and the root-only environment
file for the secrets, then reloads systemd and enables the unit.
"""

from __future__ import annotations

import getpass
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from launcher.core.serving.systemd_unit import Unit, env_file_text, unit_name
from launcher.core.spec.sections import Spec
from launcher.errors import SparkLaunchError

UNIT_DIR = "/etc/systemd/system"
ENV_DIR = "/etc/spark-launch"


@dataclass(frozen=True, slots=True)
class Installed:
    """What `install` wrote and did."""

    unit_path: str
    env_path: str
    env_written: bool  # False: an existing environment file was kept
    enabled: bool


def default_env_file(cluster: str) -> str:
    """Where the unit's secrets live by default."""
    return f"{ENV_DIR}/{cluster}.env"


def supervise_unit(
    spec: Spec, spec_path: str, env_file: str, user: str | None, extra: Sequence[str], grace: float = 15
) -> Unit:
    """The unit for `spec`: this interpreter runs `-m launcher supervise SPEC` with `extra` options."""
    command = (sys.executable, "-m", "launcher", "supervise", str(Path(spec_path).resolve()), *extra)
    who = user or os.environ.get("SUDO_USER") or getpass.getuser()
    # Stopping every rank takes up to the grace per node, then SIGKILL; leave room for SSH.
    return Unit(spec.name, command, env_file, spec.secrets, who, stop_seconds=int(grace) + 120)


def install(
    unit: Unit,
    unit_text: str,
    values: dict[str, str],
    unit_dir: str = UNIT_DIR,
    run: Callable[[list[str]], subprocess.CompletedProcess[str]] | None = None,
) -> Installed:
    """Write the unit (0644) and, unless it exists, the environment file (root only, 0600); enable it."""
    if any("\n" in v for v in values.values()):
        raise SparkLaunchError("a secret's value holds a newline: an environment file cannot hold it")
    unit_path = Path(unit_dir) / unit_name(unit.cluster)
    env_path = Path(unit.env_file)
    try:
        unit_path.write_text(unit_text)
        unit_path.chmod(0o644)
        written = write_env_file(env_path, env_file_text(unit.cluster, unit.secrets, values))
    except OSError as exc:
        raise SparkLaunchError(
            f"cannot write {exc.filename}: {exc.strerror}",
            "run it as root: sudo spark-launch export systemd ...",
        ) from None
    enabled = _enable(unit_name(unit.cluster), run or _systemctl)
    return Installed(str(unit_path), str(env_path), written, enabled)


def write_env_file(path: Path, text: str) -> bool:
    """Create the secrets file (mode 0600) unless it exists; True when written. An existing one
    is kept only as a regular file owned by root or by this user (its values set the supervisor's
    environment), and is made 0600; its folder must be theirs too, and writable by no one else."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _trusted(path.parent, os.lstat(path.parent), folder=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        _trusted(path, os.lstat(path), folder=False)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            _trusted(path, os.fstat(fd), folder=False)  # the very file opened
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
        return False
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return True


def _trusted(path: Path, st: os.stat_result, folder: bool) -> None:
    """Refuse a secrets file (or its folder) that root or this user does not hold alone."""
    what = "folder" if folder else "file"
    if st.st_uid not in (0, os.geteuid()):
        why = f"is owned by uid {st.st_uid} (neither root nor you)"
    elif not (stat.S_ISDIR if folder else stat.S_ISREG)(st.st_mode):
        why = f"is not a plain {what} (a link, say)"
    elif folder and st.st_mode & 0o022:
        why = "may be written by others"
    else:
        return
    raise SparkLaunchError(
        f"the secrets {what} {path} {why}: whoever controls it sets the supervisor's environment",
        f"look at it, then `sudo chown root:root {path}` and `sudo chmod go-w {path}`, or remove it "
        "to have it written anew",
    )


def _systemctl(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def _enable(name: str, run: Callable[[list[str]], subprocess.CompletedProcess[str]]) -> bool:
    """systemctl daemon-reload, then enable; a SparkLaunchError saying what failed."""
    for argv in (["systemctl", "daemon-reload"], ["systemctl", "enable", name]):
        try:
            done = run(argv)
        except OSError as exc:
            raise SparkLaunchError(
                f"the unit was written but `{' '.join(argv)}` could not run: {exc.strerror}",
                "is systemd installed here?",
            ) from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            raise SparkLaunchError(
                f"the unit was written but `{' '.join(argv)}` failed: {said[0]}",
                "is systemd running on this machine (PID 1)? Then run the command yourself",
            )
    return True
