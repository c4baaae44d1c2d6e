"""The receiver a relayed `sync models` runs on its target is the launcher's, never the source's
words (launcher/core/sync/receiver.py): what this machine's real rsync asks for is that
receiver; anything else a source may ask is refused."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from launcher.core.sync.receiver import NotTheReceiver, Receiver, checked, receiver_for
from launcher.core.sync.transfer_plan import remote_target, rsync_argv

PATH = "/models/m"
PLANNED = receiver_for(rsync_argv(PATH, remote_target("10.0.0.2", "n2", PATH)), PATH)
ASKED = (
    "rsync",
    "--server",
    "-logDtpRe.LsfxCIvu",
    "--log-format=X",  # the sender's --out-format (each file it sent, for the copy's proof)
    "--timeout=300",
    "--safe-links",
    "--append",
    "--append",
    ".",
    "/models/m/",
)


def asked_by_real_rsync(tmp_path: Path, path: str, bwlimit: int | None, snapshot: bool) -> tuple[str, ...]:
    """What this machine's rsync asks its remote shell to run on the target, word by word."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a").write_text("x")
    rsh = tmp_path / "rsh"
    rsh.write_text(f'#!/bin/sh\nfor a; do printf "%s\\0" "$a"; done > {tmp_path}/asked; exit 1\n')
    rsh.chmod(0o755)
    argv = rsync_argv(str(tmp_path / "src"), remote_target("10.0.0.2", "root@n2", path), bwlimit, snapshot)
    subprocess.run(
        [argv[0], f"--rsh={rsh}", *argv[1:]], input=b"a\0", capture_output=True, check=False, timeout=30
    )
    words = (tmp_path / "asked").read_bytes().split(b"\0")[:-1]
    return tuple(w.decode() for w in words[3:])  # after `-l root 10.0.0.2`


@pytest.mark.parametrize("path", ["/models/m", "/models/my model's; (v2)"], ids=["plain", "shell-characters"])
@pytest.mark.parametrize(("bwlimit", "snapshot"), [(None, False), (1000, False), (None, True)])
def test_what_the_real_rsync_asks_is_the_planned_receiver(
    tmp_path: Path, path: str, bwlimit: int | None, snapshot: bool
) -> None:
    argv = rsync_argv(PATH, remote_target("10.0.0.2", "n2", path), bwlimit, snapshot)
    receiver = receiver_for(argv, path)
    command = checked(receiver, asked_by_real_rsync(tmp_path, path, bwlimit, snapshot))
    words = shlex.split(command)
    assert words[:2] == ["rsync", "--server"] and words[-2:] == [".", path + "/"]
    assert words[3:-2] == list(receiver.options)


def test_rsync_3_2_s_flag_word_is_accepted_too() -> None:
    asked = ("rsync", "--server", "-logDtpRe.iLsfxCIvu", *ASKED[3:])
    assert checked(PLANNED, asked) == shlex.join(asked)


FORGED = [
    ("a shell command", ("sh", "-c", "touch /tmp/owned"), "not an rsync receiver"),
    ("a command after the path", (*ASKED[:-1], "/models/m/; touch /tmp/owned"), "is not '/models/m/'"),
    ("a sender instead", (*ASKED[:3], "--sender", *ASKED[3:]), "are not the planned"),
    ("another destination", (*ASKED[:-1], "/root/.ssh/"), "is not '/models/m/'"),
    ("a way out of the model", (*ASKED[:-1], "/models/m/../../etc/"), "is not '/models/m/'"),
    ("a remote shell of its own", (*ASKED[:3], "--rsh=sh -c id", *ASKED[3:]), "are not the planned"),
    ("an extra option", (*ASKED[:3], "--remove-source-files", *ASKED[3:]), "are not the planned"),
    ("a daemon config", (*ASKED[:3], "--config=/tmp/x", *ASKED[3:]), "are not the planned"),
    ("an unplanned short flag", ("rsync", "--server", "-logDtpRse.LsfxCIvu", *ASKED[3:]), "flag word"),
    ("links followed on the target", ("rsync", "--server", "-logDtpRLe.LsfxCIvu", *ASKED[3:]), "flag word"),
    (
        "a delete flag smuggled",
        ("rsync", "--server", "-logDtpR", "--delete", *ASKED[3:]),
        "are not the planned",
    ),
    ("a flag word with a command", ("rsync", "--server", "-l;id", *ASKED[3:]), "flag word"),
    ("too few words", ("rsync", "--server", "."), "not an rsync receiver"),
]


@pytest.mark.parametrize(("asked", "expected"), [f[1:] for f in FORGED], ids=[f[0] for f in FORGED])
def test_anything_else_a_source_asks_for_is_refused(asked: tuple[str, ...], expected: str) -> None:
    with pytest.raises(NotTheReceiver, match=None) as caught:
        checked(PLANNED, asked)
    assert expected in str(caught.value)


def test_the_receiver_is_quoted_for_the_targets_shell() -> None:
    receiver = Receiver("/models/a b;c/", ("--timeout=300",))
    assert receiver.command("-logDtpR") == "rsync --server -logDtpR --timeout=300 . '/models/a b;c/'"
