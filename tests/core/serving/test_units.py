"""`export systemd`: a unit systemd accepts (`systemd-analyze verify`, from `make system-deps`),
that runs supervise after the network is online and never holds a secret's value."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import Result

from launcher.core.serving.systemd_unit import Unit, env_file_text, render_unit, systemd_word
from tests.conftest import ROOT
from tests.invoke import invoke

QWEN = ROOT / "configs" / "qwen3-next-2x-spark.yaml"
SECRET = "hf_planted_secret_value_0123456789"


def export(*args: str) -> str:
    done = invoke(["export", "systemd", str(QWEN), *args], env={"HF_TOKEN": SECRET})
    assert done.exit_code == 0, done.output
    return done.output


def install_unit(unit_dir: Path, env_file: Path) -> Result:
    """`export systemd --install` of the qwen example, with no systemctl to enable it with."""
    return invoke(
        [
            "export",
            "systemd",
            str(QWEN),
            "--install",
            "--unit-dir",
            str(unit_dir),
            "--env-file",
            str(env_file),
        ],
        env={"HF_TOKEN": SECRET, "PATH": "/nonexistent"},
    )


def test_the_unit_runs_supervise_after_the_network_is_online() -> None:
    text = export("--user", "ops", "--drop-caches")
    assert "Wants=network-online.target\nAfter=network-online.target" in text
    assert f" -m launcher supervise {QWEN} --drop-caches\n" in text
    assert "User=ops\n" in text and "EnvironmentFile=/etc/spark-launch/spark-pair.env\n" in text
    assert "Restart=on-failure\n" in text and "RestartPreventExitStatus=1 2 3\n" in text
    assert "KillSignal=SIGTERM\n" in text and "WantedBy=multi-user.target\n" in text


def test_the_unit_holds_the_secrets_names_never_their_values() -> None:
    text = export()
    assert SECRET not in text
    assert "Secrets (HF_TOKEN) come from /etc/spark-launch/spark-pair.env" in text


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.fail(
            "systemd-analyze is missing: `make system-deps` installs it (package systemd)", pytrace=False
        )
    unit = tmp_path / "spark-launch-spark-pair.service"
    unit.write_text(export("--user", "root"))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


def test_systemd_refuses_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: an ExecStart that is not absolute is refused, on its line."""
    unit = tmp_path / "broken.service"
    text = export().replace("ExecStart=/", "ExecStart=")
    unit.write_text(text)
    line = 1 + text.splitlines().index(next(x for x in text.splitlines() if x.startswith("ExecStart=")))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert done.returncode != 0, done.stderr
    assert f"{unit}:{line}: Neither a valid executable name nor an absolute path" in done.stderr


def test_arguments_are_quoted_the_way_systemd_reads_them() -> None:
    assert systemd_word("/opt/spark launch/cluster.yaml") == '"/opt/spark launch/cluster.yaml"'
    assert systemd_word("100%") == '"100%%"' and systemd_word("$HOME") == '"$$HOME"'
    assert systemd_word("/srv/cluster.yaml") == "/srv/cluster.yaml"


def test_without_secrets_a_missing_env_file_does_not_stop_the_unit() -> None:
    text = render_unit(Unit("demo", ("/usr/bin/python3", "-m", "launcher"), "/etc/spark-launch/demo.env", ()))
    assert "EnvironmentFile=-/etc/spark-launch/demo.env" in text


def test_install_writes_the_unit_and_a_root_only_secrets_file_then_says_enabling_failed(
    tmp_path: Path,
) -> None:
    env_file = tmp_path / "etc" / "spark-launch.env"
    done = install_unit(tmp_path, env_file)
    assert done.exit_code == 1 and "`systemctl daemon-reload` could not run" in done.output
    unit = tmp_path / "spark-launch-spark-pair.service"
    assert SECRET not in unit.read_text() and f"EnvironmentFile={env_file}" in unit.read_text()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600 and env_file.stat().st_uid == os.geteuid()
    assert f"HF_TOKEN={SECRET}\n" in env_file.read_text()


def test_an_existing_secrets_file_is_kept(tmp_path: Path) -> None:
    env_file = tmp_path / "spark.env"
    env_file.write_text("HF_TOKEN=kept\n")
    install_unit(tmp_path, env_file)
    assert env_file.read_text() == "HF_TOKEN=kept\n" and stat.S_IMODE(env_file.stat().st_mode) == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_an_existing_secrets_file_of_another_user_is_refused_not_kept(tmp_path: Path) -> None:
    env_file = tmp_path / "spark.env"
    env_file.write_text("LD_PRELOAD=/tmp/theirs.so\n")
    os.chown(env_file, 65534, 65534)
    done = install_unit(tmp_path, env_file)
    assert done.exit_code == 1
    assert (
        f"spark-launch: the secrets file {env_file} is owned by uid 65534 (neither root nor you): "
        "whoever controls it" in done.output
    )
    assert env_file.stat().st_uid == 65534 and env_file.read_text() == "LD_PRELOAD=/tmp/theirs.so\n"


def test_an_existing_secrets_file_is_made_0600_and_a_link_or_open_folder_is_refused(tmp_path: Path) -> None:
    env_file = tmp_path / "spark.env"
    env_file.write_text("HF_TOKEN=kept\n")
    env_file.chmod(0o644)
    assert "systemctl daemon-reload" in install_unit(tmp_path, env_file).output  # got that far
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600 and env_file.read_text() == "HF_TOKEN=kept\n"
    link = tmp_path / "link.env"
    link.symlink_to(env_file)
    assert "is not a plain file (a link, say)" in install_unit(tmp_path, link).output
    folder = tmp_path / "open"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    assert "may be written by others" in install_unit(tmp_path, folder / "x.env").output
    assert not (folder / "x.env").exists()


def test_a_secret_missing_here_leaves_a_line_to_fill_in() -> None:
    assert env_file_text("demo", ("HF_TOKEN", "VLLM_API_KEY"), {"HF_TOKEN": 'a "b"'}) == (
        "# Secrets for spark-launch cluster demo: NAME=value, one per line.\n"
        "# Keep this file owned by root, mode 0600: systemd reads it before starting the supervisor.\n"
        'HF_TOKEN="a \\"b\\""\n'
        "# VLLM_API_KEY=\n"
    )
