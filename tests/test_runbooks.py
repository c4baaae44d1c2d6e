"""The README and the operator runbooks in deploy/ show only commands that exist, and the
README's commands that need no node run as shown.

Every `spark-launch ...` and `make ...` command in the ```sh blocks of README.md and
deploy/*.md is checked: the subcommand exists and each option it uses is listed in that
subcommand's real `--help`, and each make target is defined in the Makefile. The README's
commands that read only the repository's files (validate, plan, schema, up --dry-run,
--version) are run, and must succeed. No network, no SSH.
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from launcher.cli import cli
from tests.conftest import ROOT
from tests.invoke import invoke

DEPLOY = ROOT / "deploy"
RUNBOOKS = sorted(DEPLOY.glob("*.md"))
EXPECTED = (
    "README.md",
    "why-nodes-must-agree.md",
    "first-bring-up.md",
    "daily-operations.md",
    "startup-failed.md",
    "upgrading-vllm.md",
    "containers.md",
    "several-models.md",
    "upgrading-safely.md",
    "kubernetes.md",
)

FENCE = re.compile(r"^\s*```\s*(\S*)")
SH_LANGS = {"sh", "bash", "shell", "console"}
PUNCTUATION = set("();<>|&")
# Words that may stand before the command: `sudo make ...`, `do spark-launch ...`, `HF_TOKEN=x spark-launch`.
PREFIX_WORDS = {"sudo", "env", "time", "exec", "command", "do", "then", "else", "!"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)")


@dataclass(frozen=True)
class Command:
    """One command found in a runbook: which tool, its arguments, where it was written."""

    file: str
    line: int
    tool: str  # "spark-launch" or "make"
    args: tuple[str, ...]

    @property
    def text(self) -> str:
        return " ".join([self.tool, *self.args])

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


def sh_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(line number of the first line, lines) of every fenced code block tagged as a shell."""
    blocks: list[tuple[int, list[str]]] = []
    lang: str | None = None  # the open block's language; None outside blocks
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if lang is None and fence:
            lang = fence.group(1).lower()
            if lang in SH_LANGS:
                blocks.append((number + 1, []))
        elif lang is not None and fence and not fence.group(1):
            lang = None
        elif lang in SH_LANGS:
            blocks[-1][1].append(line)
    return blocks


def tokenize(source: str) -> list[str]:
    """Shell words, with operators (| && ; ( ) < > and combinations) as their own tokens."""
    lexer = shlex.shlex(source, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def logical_lines(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(offset, tokens) per shell command line: continuations and multi-line quotes joined."""
    out: list[tuple[int, list[str]]] = []
    buffer, start = "", 0
    for offset, line in enumerate(lines):
        if not buffer:
            start = offset
        if line.endswith("\\"):  # a continuation: the shell joins it to the next line
            buffer += line[:-1] + " "
            continue
        buffer += line + "\n"
        try:
            tokens = tokenize(buffer)
        except ValueError:  # an open quote: the command goes on
            continue
        out.append((start, tokens))
        buffer = ""
    if buffer.strip():
        raise ValueError(f"unbalanced quoting in a shell block: {buffer!r}")
    return out


def segments(tokens: list[str]) -> list[list[str]]:
    """The simple commands of a line: the words between operators (fd numbers of redirections dropped)."""
    parts: list[list[str]] = [[]]
    for index, token in enumerate(tokens):
        if token and set(token) <= PUNCTUATION:
            parts.append([])
        elif not (token.isdigit() and tokens[index + 1 : index + 2] and tokens[index + 1][0] in "<>"):
            parts[-1].append(token)
    return [p for p in parts if p]


def command_of(words: list[str]) -> tuple[str, tuple[str, ...]] | None:
    """("spark-launch" | "make", arguments) when `words` runs one of them, else None."""
    index = 0
    while index < len(words) and (words[index] in PREFIX_WORDS or ASSIGNMENT.match(words[index])):
        index += 1
    if index == len(words):
        return None
    name = words[index].rsplit("/", 1)[-1]
    if name in ("spark-launch", "make"):
        return name, tuple(words[index + 1 :])
    return None


def commands_in(path: Path) -> list[Command]:
    """Every spark-launch and make command in the shell blocks of one Markdown file."""
    found = []
    for start, lines in sh_blocks(path.read_text(encoding="utf-8")):
        for offset, tokens in logical_lines(lines):
            for words in segments(tokens):
                command = command_of(words)
                if command:
                    found.append(Command(path.name, start + offset, command[0], command[1]))
    return found


README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
ALL = [command for path in (README, CONTRIBUTING, *RUNBOOKS) for command in commands_in(path)]
SPARK = [c for c in ALL if c.tool == "spark-launch"]
MAKE = [c for c in ALL if c.tool == "make"]


@functools.cache
def help_text(*subcommand: str) -> tuple[int, str]:
    """Exit code and output of the real `spark-launch [SUBCOMMAND] --help`."""
    result = invoke([*subcommand, "--help"])
    return result.exit_code, result.output


def options_in_help(output: str) -> set[str]:
    """The option flags the help's Options section lists (not those its prose mentions)."""
    section = output.split("\nOptions:", 1)[1].split("\nCommands:", 1)[0]
    columns = [line.strip().split("  ", 1)[0] for line in section.splitlines()]
    return {m.group(1) for column in columns if column.startswith("-") for m in OPTION.finditer(column)}


def makefile_targets() -> set[str]:
    """Targets the Makefile defines (rule lines; not variable assignments or special targets)."""
    targets = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.%/$() -]+?)\s*::?(?!=)", line)
        if match and not line.startswith(("\t", "#")):
            targets.update(t for t in match.group(1).split() if not t.startswith("."))
    return targets


def test_every_runbook_exists_and_is_indexed() -> None:
    names = {p.name for p in RUNBOOKS}
    assert set(EXPECTED) <= names, f"missing runbooks: {sorted(set(EXPECTED) - names)}"
    index = (DEPLOY / "README.md").read_text()
    unlisted = [n for n in sorted(names - {"README.md"}) if f"({n})" not in index]
    assert not unlisted, f"deploy/README.md does not link: {unlisted}"


def test_commands_were_found() -> None:
    """The extraction itself works: each runbook (not the index) shows spark-launch commands."""
    for name in EXPECTED[1:]:
        assert any(c.file == name for c in SPARK), f"no spark-launch command found in deploy/{name}"
    assert MAKE, "no make command found in deploy/*.md"


def subcommands_of(words: list[str]) -> tuple[str, ...]:
    """The (sub)command path a command line names: `export systemd` within the group `export`."""
    path: list[str] = []
    group: click.Command = cli
    for word in words:
        if word.startswith("-") or not isinstance(group, click.Group):
            break
        path.append(word)
        command = group.get_command(click.Context(group), word)
        if command is None:
            break  # an unknown command: its --help fails, and says so
        group = command
    return tuple(path)


@pytest.mark.parametrize("command", SPARK, ids=[c.id for c in SPARK])
def test_spark_launch_command_exists(command: Command) -> None:
    words = list(command.args)
    subcommand_path = subcommands_of(words)  # () for `spark-launch --version`
    code, output = help_text(*subcommand_path)
    assert code == 0, f"{command.id}: `spark-launch {' '.join(subcommand_path)} --help` failed:\n{output}"
    allowed = options_in_help(output)
    used = [w.split("=", 1)[0] for w in words if w.startswith("-") and w != "-"]
    unknown = [o for o in used if o not in allowed]
    assert not unknown, (
        f"{command.id}: option(s) {unknown} not in `spark-launch {' '.join(subcommand_path)} --help` "
        f"(it lists {sorted(allowed)})"
    )


# Commands that touch no node: the README's are run as written (from the repository's root).
OFFLINE = {("validate",), ("plan",), ("schema",), ()}
RUNNABLE = [
    c
    for c in SPARK
    if c.file == "README.md"
    and (subcommands_of(list(c.args)) in OFFLINE or ("--dry-run" in c.args and c.args[0] == "up"))
    and all((ROOT / a).exists() for a in c.args if a.endswith((".yaml", ".yml")))
]


def test_the_readme_starts_with_the_two_commands_that_set_up_a_fresh_machine() -> None:
    first = sh_blocks(README.read_text())[0]
    assert first[0] == 4 and [line.split("#")[0].strip() for line in first[1]] == ["make demo", "make test"]
    assert all("a scratch machine only (root, apt, Docker)" in line for line in first[1])


def test_the_readme_is_an_operators_page_in_its_order() -> None:
    """What it is, getting it, SSH, the first hour, securing the API, logs, upgrading, uninstalling,
    then the exit codes; the test bed and the contributor's material in CONTRIBUTING.md."""
    text = README.read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Get it",
        "## SSH, checked once by hand",
        "## The first hour",
        "## Securing the API",
        "## Where the logs are",
        "## Upgrading",
        "## Uninstalling",
        "## Exit codes",
    ]
    assert "git clone" in text and "pipx install ." in text and "~/.local/bin" in text
    assert "make install" not in text and "make install" not in (DEPLOY / "first-bring-up.md").read_text()
    for moved in ("make fast", "make conformance", "make release", "### Layout", "make bench"):
        assert moved not in text and moved.lstrip("# ") in CONTRIBUTING.read_text()
    codes = re.findall(r"^\| (\d+) \|", text, re.MULTILINE)
    assert codes == ["0", "1", "2", "3", "4", "130"]


def jq_examples() -> list[tuple[list[str], list[str]]]:
    """The README's `spark-launch ... | jq FILTER` lines: the command's words, and jq's."""
    found = []
    for _, lines in sh_blocks(README.read_text()):
        for line in lines:
            command, _, rest = line.split("#")[0].partition("| jq")
            if rest and command.strip().startswith("spark-launch"):
                found.append((shlex.split(command)[1:], ["jq", *shlex.split(rest)]))
    return found


def test_the_readme_has_jq_examples() -> None:
    assert len(jq_examples()) >= 2


@pytest.mark.parametrize(("command", "jq"), jq_examples(), ids=" ".join)
def test_the_readmes_jq_examples_give_values(
    command: list[str], jq: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each runs as shown, and its filter finds something in the output (not null)."""
    if shutil.which("jq") is None:
        pytest.fail("jq is missing: `make system-deps` installs it", pytrace=False)
    monkeypatch.chdir(ROOT)
    done = invoke(command)
    assert done.exit_code == 0, done.output
    filtered = subprocess.run(jq, input=done.stdout, capture_output=True, text=True, check=False)
    assert filtered.returncode == 0, filtered.stderr
    assert filtered.stdout.strip() and "null" not in filtered.stdout.split(), filtered.stdout


def test_the_readme_shows_the_operators_first_hour_in_order() -> None:
    verbs = [c.args[0] for c in SPARK if c.file == "README.md" and not c.args[0].startswith("-")][:5]
    assert verbs == ["init", "sync", "check", "up", "verify"]


def test_offline_readme_commands_were_found() -> None:
    assert {subcommands_of(list(c.args))[:1] for c in RUNNABLE} >= {("validate",), ("plan",), ("up",)}


@pytest.mark.parametrize("command", RUNNABLE, ids=[c.id for c in RUNNABLE])
def test_readme_command_runs_as_shown(command: Command, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = invoke(list(command.args))
    assert result.exit_code == 0, f"{command.id}:\n{result.output}"


@pytest.mark.parametrize("command", MAKE, ids=[c.id for c in MAKE])
def test_make_target_exists(command: Command) -> None:
    targets = [w for w in command.args if not w.startswith("-") and not ASSIGNMENT.match(w)]
    assert targets, f"{command.id}: no target (the default target is not a runbook step)"
    defined = makefile_targets()
    unknown = [t for t in targets if t not in defined]
    assert not unknown, f"{command.id}: target(s) {unknown} not defined in the Makefile"


def test_extraction_handles_shell_syntax(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "```sh\n"
        "diff <(spark-launch plan a.yaml) <(spark-launch plan b.yaml)  # spark-launch bogus\n"
        "HF_TOKEN=x .venv/bin/spark-launch up c.yaml \\\n"
        "    --timeout=10 2>&1 | tee up.log\n"
        "ssh spark-1 'rm -r ~/.spark-launch/c/lock' && make status SPEC=c.yaml\n"
        "```\n"
        "```yaml\nspark-launch: not a command\n```\n"
    )
    found = [(c.line, c.text) for c in commands_in(doc)]
    assert subcommands_of(["sync", "models", "c.yaml", "--dry-run"]) == ("sync", "models")
    assert subcommands_of(["up", "c.yaml"]) == ("up",) and subcommands_of(["--version"]) == ()
    assert found == [
        (2, "spark-launch plan a.yaml"),
        (2, "spark-launch plan b.yaml"),
        (3, "spark-launch up c.yaml --timeout=10"),
        (5, "make status SPEC=c.yaml"),
    ]
