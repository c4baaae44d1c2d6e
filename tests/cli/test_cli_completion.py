"""Shell completion as users get it: bash, zsh and fish each run for real, with the script
`spark-launch` prints for it sourced as the help says, and asked to complete partial command
lines; what the shell would offer (for zsh and fish, with the descriptions shown beside it) is
checked. bash and zsh complete only in an interactive shell, so each runs in a terminal of its own
(a pty) and says what it offered through a key bound for the test; fish answers `complete -C`."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.shell_completion import ShellComplete

from launcher.catalogs import known_versions
from launcher.cli import cli
from tests.conftest import ROOT

BIN = str(Path(sys.executable).parent)  # where spark-launch is installed; the scripts call it by name
DONE = "::done::"
READY = "ready> "  # the prompt: the line editor reads keys one by one from then on

# Each line typed, then TAB; what the shell offered is then checked by the tests below.
LINES = [
    "spark-launch s",
    "spark-launch plan fl",
    "spark-launch down fleet.yaml --deployment ",
    "spark-launch logs fleet.yaml --node ",
    "spark-launch plan fleet.yaml --compare-release ",
]
COMMANDS_S = ["schema", "status", "supervise", "sync"]
# The rc files: click's script, then what the test reads. bash: each offer (COMPREPLY), then the
# line as TAB left it (a file name bash completes itself). zsh: each offer compadd is given, with
# what zsh shows for it (`value -- description`, handed over by _describe as -d), then the line.
BASHRC = """\
eval "$(_SPARK_LAUNCH_COMPLETE=bash_source spark-launch)"
_captured() { _spark_launch_completion "$@"; printf 'offer:%s\\n' "${COMPREPLY[@]}" >> "$CAPTURE"; }
complete -o nosort -F _captured spark-launch
bind -x '"\\C-t": printf "line:%s\\n::done::\\n" "$READLINE_LINE" >> "$CAPTURE"'
PS1=$READY
"""
ZSHRC = """\
autoload -U compinit && compinit -u -D
eval "$(_SPARK_LAUNCH_COMPLETE=zsh_source spark-launch)"
compadd() {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd "$@"; return $?; fi
  local -a hits shown; local named i
  if (( $@[(I)-d] )); then
    named=${@[$(( ${@[(i)-d]} + 1 ))]}
    if [[ $named == \\(* ]]; then eval "shown=$named"; else shown=( "${(@P)named}" ); fi
  fi
  builtin compadd -A hits -D shown "$@"
  for i in {1..$#hits}; do print -r -- "offer:${hits[i]}	${shown[i]}" >> $CAPTURE; done
  builtin compadd "$@"
}
_captured() { print -r -- "line:$BUFFER"$'\\n'"::done::" >> $CAPTURE }
zle -N _captured
bindkey '^T' _captured
PROMPT=$READY
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a spec of two deployments on two nodes, where the shells start."""
    folder = tmp_path_factory.mktemp("completion")
    shutil.copy(ROOT / "configs" / "demo-multi.yaml", folder / "fleet.yaml")
    return folder


def shell_program(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: `make system-deps` installs it", pytrace=False)
    return found


def environment(home: Path, capture: Path) -> dict[str, str]:
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "HOME": str(home), "ZDOTDIR": str(home), "CAPTURE": str(capture)}


def interactive(shell: str, rc: str, folder: Path, lines: list[str]) -> list[list[str]]:
    """Type each line into an interactive `shell` (its rc file `rc`) in a terminal, then TAB, then
    the test's key, then Ctrl-U: per line, what the rc file's capture wrote."""
    home = folder / f"home-{shell}"
    home.mkdir(exist_ok=True)
    (home / (".bashrc" if shell == "bash" else ".zshrc")).write_text(rc)
    capture = home / "capture"
    capture.write_text("")
    argv = [shell_program(shell), "-i"]
    if shell == "bash":
        argv[1:1] = ["--rcfile", str(home / ".bashrc")]
    leader, follower = pty.openpty()
    env = {**environment(home, capture), "TERM": "xterm", "READY": READY}
    process = subprocess.Popen(
        argv, stdin=follower, stdout=follower, stderr=follower, cwd=folder, env=env, start_new_session=True
    )
    os.close(follower)
    screen = b""
    try:
        deadline = time.monotonic() + 60
        while READY.encode() not in screen and time.monotonic() < deadline:
            screen += read(leader)
        os.write(leader, "".join(f"{line}\t\x14\x15" for line in lines).encode())
        while capture.read_text().count(DONE) < len(lines) and time.monotonic() < deadline:
            screen += read(leader)
    finally:
        process.kill()
        process.wait()
        os.close(leader)
    answers = [part.strip().splitlines() for part in capture.read_text().split(DONE)[:-1]]
    assert len(answers) == len(lines), screen.decode(errors="replace")
    return answers


def read(terminal: int) -> bytes:
    """What the shell wrote to its terminal within 0.1 s (b"" when nothing or when it has ended)."""
    if not select.select([terminal], [], [], 0.1)[0]:
        return b""
    try:
        return os.read(terminal, 65536)
    except OSError:
        return b""


def offers(answer: list[str]) -> list[str]:
    return [line.removeprefix("offer:") for line in answer if line.startswith("offer:")]


def described(answer: list[str]) -> dict[str, str]:
    """zsh's offers: each value with its description (zsh shows `value -- description`)."""
    pairs = (offer.split("\t", 1) for offer in offers(answer))
    return {value: shown.partition(" -- ")[2].strip() for value, shown in pairs}


def test_bash_completes_commands_a_spec_path_and_the_specs_values(workdir: Path) -> None:
    commands, path, deployments, nodes, releases = interactive("bash", BASHRC, workdir, LINES)
    assert offers(commands) == COMMANDS_S
    assert offers(path) == [""]  # none of click's: bash completes the file name itself
    assert path[-1].rstrip() == "line:spark-launch plan fleet.yaml"
    assert offers(deployments) == ["big", "small"]
    assert offers(nodes) == ["node1", "node2"]
    assert offers(releases) == known_versions()


def test_zsh_completes_with_descriptions(workdir: Path) -> None:
    commands, path, deployments, nodes, releases = interactive("zsh", ZSHRC, workdir, LINES)
    shown = described(commands)
    assert sorted(shown) == COMMANDS_S
    assert shown["schema"].startswith("Print the JSON Schema of the spec")
    assert path[-1].rstrip() == "line:spark-launch plan fleet.yaml"
    assert described(deployments) == {
        "big": "tiny-qwen3-next on node1, node2",
        "small": "tiny-llama on node2",
    }
    assert described(nodes) == {"node1": "ssh node1", "node2": "ssh node2"}
    assert sorted(described(releases)) == known_versions()


def test_fish_completes_with_descriptions(workdir: Path) -> None:
    fish = shell_program("fish")
    script = "_SPARK_LAUNCH_COMPLETE=fish_source spark-launch | source\n" + "".join(
        f"complete -C {line!r}; echo {DONE}\n" for line in LINES
    )
    done = subprocess.run(
        [fish, "--no-config", "-c", script],
        cwd=workdir,
        env=environment(workdir, workdir / "unused"),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    answers = [
        dict(o.partition("\t")[::2] for o in part.split("\n") if o) for part in done.stdout.split(DONE)
    ]
    commands, path, deployments, nodes, releases = answers[:-1]
    assert sorted(commands) == COMMANDS_S and commands["status"].startswith("Show every node (running, pid")
    assert list(path) == ["fleet.yaml"]
    assert deployments == {"big": "tiny-qwen3-next on node1, node2", "small": "tiny-llama on node2"}
    assert nodes == {"node1": "ssh node1", "node2": "ssh node2"}
    assert sorted(releases) == known_versions()


def complete(args: list[str], incomplete: str) -> dict[str, str | None]:
    """What click's completion answers for `spark-launch ARGS INCOMPLETE`, in this process."""
    shell = ShellComplete(cli, {}, "spark-launch", "_SPARK_LAUNCH_COMPLETE")
    answers = shell.get_completions(args, incomplete)
    return {a.value: a.help for a in answers}


def test_a_spec_that_is_missing_or_broken_offers_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("nodes: [unclosed\n")
    for spec in (str(tmp_path / "missing.yaml"), str(broken), str(tmp_path)):
        assert complete(["logs", spec, "--node"], "") == {}
        assert complete(["down", spec, "--deployment"], "") == {}
        assert complete(["diff", spec], "") == {"now": "what the nodes hold now (asked over SSH)"}


def test_a_spec_of_one_deployment_offers_its_name_and_runs_offer_the_receipts_kept_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = str(ROOT / "configs" / "demo.yaml")
    assert complete(["status", demo, "--deployment"], "") == {"demo": "the spec's one deployment"}
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    runs = tmp_path / "spark-launch" / "demo" / "runs"
    runs.mkdir(parents=True)
    from launcher.operations.receipt_store import FORMAT

    for run_id, outcome in [("20250101-120000-ab12", "serving"), ("20250102-120000-cd34", "failed")]:
        receipt = {"format": FORMAT, "run_id": run_id, "started": run_id[:8], "outcome": outcome}
        (runs / f"{run_id}.json").write_text(json.dumps(receipt))
    assert list(complete(["diff", demo], "")) == ["now", "20250102-120000-cd34", "20250101-120000-ab12"]
    assert complete(["diff", demo, "now"], "2025010") == {
        "20250102-120000-cd34": "failed, started 20250102",
        "20250101-120000-ab12": "serving, started 20250101",
    }


def test_hosts_come_from_the_ssh_configs_aliases_after_the_last_comma(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host spark-1 spark-2\n  HostName 10.0.0.1\nHost *.lab !bastion\nHost gpu\n")
    args = ["init", "--ssh-config", str(config), "--hosts"]
    assert list(complete(args, "")) == ["spark-1", "spark-2", "gpu"]
    assert list(complete(args, "spark-1,")) == ["spark-1,spark-2", "spark-1,gpu"]
    assert complete(args, "spark-1,g") == {"spark-1,gpu": f"Host in {config}"}
