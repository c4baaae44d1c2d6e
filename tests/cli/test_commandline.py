"""The command line's own layer (launcher.cli.commandline, helptext, completion), on a small
command set declared here as the launcher's commands are: parsing, usage errors, help, completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.cli import completion, helptext
from launcher.cli.commandline import (
    Context,
    Exit,
    File,
    FloatRange,
    Group,
    Help,
    Option,
    UsageError,
    argument,
    command,
    current_context,
    group,
    main,
    option,
)


def _remember(ctx: Context, _: Option, value: float | None) -> None:
    ctx.meta["every"] = value


def _version(ctx: Context, _: Option, value: bool) -> None:
    if value:
        ctx.exit(7)


@command()
@argument("spec", type=File(), metavar="SPEC.yaml")
@option("--json", "as_json", is_flag=True, help="As JSON.")
@option("-n", "--lines", type=int, default=50, show_default=True, help="Lines to show.")
@option("--node", "nodes", multiple=True, help="Only this node (repeatable).")
@option("-f", "--follow", is_flag=True, help="Keep following.")
@option("--every", type=FloatRange(min=0, min_open=True), expose_value=False, callback=_remember)
def show(spec: str, as_json: bool, lines: int, nodes: tuple[str, ...], follow: bool) -> object:
    """Show a spec's nodes.

    \b
    Examples:
      tool show a.yaml -f
      tool show a.yaml --node n1

    A paragraph long enough that the help must fill it to the width of the terminal it is shown on.
    """
    return spec, as_json, lines, nodes, follow, current_context().meta["every"]


@command()
@argument("spec")
@argument("sides", nargs=-1, metavar="[A [B]]")
@option("--hosts", required=True, metavar="H1,H2")
def pair(spec: str, sides: tuple[str, ...], hosts: str) -> object:
    """Compare two sides."""
    return spec, sides, hosts


@group()
def sub() -> None:
    """Commands under one name."""


@sub.command("inner")
@option("-v", "--verbose", count=True)
def inner(verbose: int) -> object:
    """The inner one."""
    return verbose


@group("tool", commands={"show": show, "pair": pair, "sub": sub})
@option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version)
@option("-q", "--quiet", is_flag=True)
def root(quiet: bool) -> None:
    """A tool."""
    current_context().meta["quiet"] = quiet


def run(*words: str) -> object:
    return main(root, list(words), "tool")


def refused(*words: str) -> str:
    with pytest.raises(UsageError) as raised:
        run(*words)
    return raised.value.show()


def test_options_in_every_spelling(tmp_path: Path) -> None:
    spec = str(tmp_path / "a.yaml")
    assert run("show", spec) == (spec, False, 50, (), False, None)
    assert run("show", "-fn5", spec, "--node", "a", "--node=b", "--json", "--every", "2.5") == (
        spec,
        True,
        5,
        ("a", "b"),
        True,
        2.5,
    )
    assert run("show", "--lines=7", spec, "-n", "8")[2] == 8  # the last one given
    assert run("show", "--", "-odd.yaml")[0] == "-odd.yaml"
    assert run("pair", "s", "x", "y", "--hosts", "a,b") == ("s", ("x", "y"), "a,b")
    assert run("pair", "s", "--hosts=a") == ("s", (), "a")
    assert run("sub", "inner", "-vv", "--verbose") == 3


def test_usage_errors_name_what_is_wrong_under_the_commands_usage(tmp_path: Path) -> None:
    assert refused("show") == (
        "Usage: tool show [OPTIONS] SPEC.yaml\nTry 'tool show --help' for help.\n\n"
        "Error: Missing argument 'SPEC.yaml'."
    )
    assert refused("show", "a", "--folow").endswith(
        "Error: No such option '--folow'. Did you mean '--follow'?"
    )
    assert refused("show", "a", "--json=1").endswith("Error: Option '--json' does not take a value.")
    assert refused("show", "a", "--lines").endswith("Error: Option '--lines' requires an argument.")
    assert refused("show", "a", "-nx").endswith(
        "Invalid value for '-n' / '--lines': 'x' is not a valid integer."
    )
    assert refused("show", "a", "--every", "0").endswith(
        "Invalid value for '--every': 0.0 is not in the range x>0."
    )
    assert refused("show", "a", "--every", "nan").endswith("nan is not in the range x>0.")
    assert refused("show", "a", "b", "c").endswith("Error: Got unexpected extra arguments (b c)")
    assert refused("show", str(tmp_path)).endswith(
        f"Invalid value for 'SPEC.yaml': File '{tmp_path}' is a directory."
    )
    assert refused("pair", "s").endswith("Error: Missing option '--hosts'.")
    assert refused("shwo").startswith("Usage: tool [OPTIONS] COMMAND [ARGS]...\nTry 'tool --help'")
    assert refused("shwo").endswith("Error: No such command 'shwo'. Did you mean 'show'?")
    assert refused("-q").endswith("Error: Missing command.")
    assert refused("sub", "inner", "-x").startswith("Usage: tool sub inner [OPTIONS]\n")
    assert refused("show", "a", "-q").endswith("No such option '-q'.")  # the group's, given after the command


def test_help_wherever_asked_and_a_bare_group_shows_its_help_as_an_error() -> None:
    for words, shown in [(["show", "--help"], show), (["show", "-h", "too", "many"], show), (["-h"], root)]:
        with pytest.raises(Help) as wanted:
            run(*words)
        assert (wanted.value.command, wanted.value.code) == (shown, 0)
    with pytest.raises(Help) as wanted:
        run("sub", "--help")
    assert (wanted.value.command, wanted.value.prog) == (sub, "tool sub")
    with pytest.raises(Help) as wanted:
        run()
    assert (wanted.value.command, wanted.value.code) == (root, 2)
    with pytest.raises(UsageError):
        run("show", "--bogus", "--help")  # an unknown option is refused first


def test_eager_options_run_first_and_callbacks_and_close_run_in_order() -> None:
    with pytest.raises(Exit) as ended:
        run("--version")  # before "Missing command"
    assert ended.value.code == 7
    closed: list[str] = []

    @command()
    def boom() -> None:
        current_context().call_on_close(lambda: closed.append("closed"))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        main(Group(lambda: None, "t", {"boom": boom}), ["boom"], "t")
    assert closed == ["closed"]
    with pytest.raises(RuntimeError, match="no spark-launch command is running"):
        current_context()


def test_help_lays_out_usage_text_and_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    text = helptext.command_help(show, "tool show")
    assert text.startswith("Usage: tool show [OPTIONS] SPEC.yaml\n\n  Show a spec's nodes.\n\n  Examples:\n")
    assert "\n    tool show a.yaml -f\n    tool show a.yaml --node n1\n" in text  # a \b paragraph, as written
    assert "\n  A paragraph long enough that the help must fill it to the width of\n  the terminal" in text
    assert max(len(line) for line in text.splitlines()) <= 70
    options = text.split("\nOptions:\n", 1)[1].splitlines()
    assert options[0] == f"  {'--json':21}As JSON."  # the widest names, and two spaces
    assert options[1] == f"  {'-n, --lines INTEGER':21}Lines to show.  [default: 50]"
    assert f"  {'--every FLOAT':21}[x>0]" in options
    assert options[-1] == f"  {'-h, --help':21}Show this message and exit."
    assert "[required]" in helptext.command_help(pair, "tool pair")
    listing = helptext.command_help(root, "tool").split("\nCommands:\n", 1)[1].splitlines()
    assert listing == [
        "  pair  Compare two sides.",
        "  show  Show a spec's nodes.",
        "  sub   Commands under one name.",
    ]


def test_a_long_first_sentence_is_cut_at_a_word_in_the_command_list() -> None:
    @command()
    def long() -> None:
        """Write everything a bug report needs into one archive, secrets out, logs of every node in."""

    assert long.short_help(40) == "Write everything a bug report needs..."
    assert len(long.short_help(40)) <= 40


def test_completion_offers_commands_options_and_files() -> None:
    assert completion.candidates(root, [], "s") == [("plain", "show"), ("plain", "sub")]
    assert completion.candidates(root, ["sub"], "") == [("plain", "inner")]
    assert completion.candidates(root, ["show"], "--n") == [("plain", "--node")]
    assert completion.candidates(root, ["show"], "") == [("file", "")]  # SPEC.yaml is a file
    assert completion.candidates(root, ["show", "a.yaml", "--lines"], "") == []  # a number
    assert completion.candidates(root, ["show", "-n5", "a.yaml"], "-") == [
        ("plain", o)
        for o in ["--json", "-n", "--lines", "--node", "-f", "--follow", "--every", "-h", "--help"]
    ]
    assert completion.candidates(root, ["nothing"], "") == []


def test_bash_completion_as_a_shell_runs_it() -> None:
    """The script spark-launch prints, sourced by a real bash, asks spark-launch and fills COMPREPLY."""
    program = str(Path(sys.executable).parent / "spark-launch")
    script = (
        'eval "$(_SPARK_LAUNCH_COMPLETE=bash_source "$SPARK")"\n'
        "for line in 'sync m' 'plan configs/demo.yaml --comp' 'va'; do\n"
        '  read -ra COMP_WORDS <<< "spark-launch $line"; COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n'
        '  COMPREPLY=(); _spark_launch_completion "$SPARK"; echo "${COMPREPLY[*]}"\n'
        "done\n"
    )
    done = subprocess.run(
        ["bash", "-c", script],
        env={**os.environ, "SPARK": program},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == ["models", "--compare-release", "validate"], done.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_every_shell_gets_a_script_that_calls_back(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert completion.answer(root, f"{shell}_source", "tool") == 0
    script = capsys.readouterr().out
    assert (
        f"_SPARK_LAUNCH_COMPLETE={shell}_complete" in script and "tool" in script and "%(prog)s" not in script
    )
    assert completion.answer(root, f"{shell}_nonsense", "tool") == 1
    assert "is not known" in capsys.readouterr().err
