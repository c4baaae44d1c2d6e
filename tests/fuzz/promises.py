"""The README's promises, checked on one spec file through the real CLI, in this process.

For every command that reads a spec: exit 0 or 2 and nothing else; no exception escapes
`main`; on exit 2 every line of the report is `file:line: key.path: message` (or its
hint) and one printable line; on exit 0 no raw control character is printed; no planted
secret value appears; time and memory per call are measured. For a spec that plans, the
plan text and the dry run are run through real bash and must give the argv of
`plan --json` word for word (and each env value), and that argv holds no option the
launcher did not put there.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.catalogs import load_catalog
from launcher.cli import main
from launcher.core.terminal import STYLES
from launcher.errors import one_line

COMMANDS = (("validate",), ("plan",), ("plan", "--json"), ("up", "--dry-run"))
SECRET_VALUE = "planted-secret-value-7f3a9c"
END = "::end-of-command::"
OUR_MARKS = re.compile("|".join(re.escape(f"\x1b[{code}m") for code in (*STYLES.values(), "0")))


class _Terminal(io.StringIO):
    """Captured output that claims to be a terminal: the launcher marks failures there, and the
    check sees every escape the commands write."""

    def isatty(self) -> bool:
        return True


@dataclass
class Call:
    """One CLI call's outcome and cost."""

    args: tuple[str, ...]
    code: int | None = None
    out: str = ""
    err: str = ""
    seconds: float = 0.0
    peak_bytes: int = 0  # the most Python memory the call held at once, beyond what was held before
    crash: str | None = None


@dataclass
class Outcome:
    """Every call made for one spec, and every broken promise found."""

    calls: list[Call] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)

    @property
    def code(self) -> int | None:
        """The exit code of `validate`."""
        return self.calls[0].code if self.calls else None


def run(args: tuple[str, ...], trace: bool) -> Call:
    """Run `spark-launch ARGS` in this process, as a user would, measuring it."""
    call = Call(args)
    out, err = _Terminal(), _Terminal()
    before = 0
    if trace:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]  # what this process held already
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(args))
    except SystemExit as exc:
        call.code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # what the promise forbids: an exception out of main
        call.crash = f"{type(exc).__name__}: {exc}"[:300]
    call.seconds = time.perf_counter() - start
    call.peak_bytes = tracemalloc.get_traced_memory()[1] - before if trace else 0
    call.out, call.err = out.getvalue(), err.getvalue()
    return call


def check_file(path: Path, trace: bool = True) -> Outcome:
    """Every command on the spec at `path`, and every promise checked."""
    outcome = Outcome()
    # Lines as YAML counts them (CR alone ends one too), or as a file viewer does.
    raw = path.read_bytes()
    lines = max(raw.count(b"\n"), len(raw.decode("utf-8", "replace").splitlines())) + 1
    for args in COMMANDS:
        call = run((*args, str(path)), trace)
        outcome.calls.append(call)
        outcome.broken += [f"{' '.join(args)}: {b}" for b in _call_promises(call, str(path), lines)]
    if outcome.code == 2:  # a command that reaches a running cluster needs only the name and nodes
        call = run(("status", str(path)), trace)
        outcome.calls.append(call)
        warned = call.code != 2 and call.err.startswith("warning: ")
        outcome.broken += [f"status: {b}" for b in _call_promises(call, str(path), lines, warned)]
        if call.code != 2 and not warned:
            outcome.broken.append(f"status: exit {call.code} where validate gave 2, and no warning")
    codes = {c.code for c in outcome.calls[:4]}
    if len(codes) > 1:
        outcome.broken.append(f"commands disagree on the spec: exit codes {sorted(map(str, codes))}")
    if codes == {0}:
        outcome.broken += _plan_promises(*[c.out for c in outcome.calls[1:4]])
    return outcome


def _call_promises(call: Call, filename: str, lines: int, warned: bool = False) -> Iterator[str]:
    """`warned`: a spec that does not plan, whose problems were printed as a warning before the
    command went on to the nodes (unreachable here: exit 1 or 4)."""
    if call.crash:
        yield f"exception out of main: {call.crash}"
        return
    if call.code not in ((0, 1, 2, 4) if warned else (0, 2)):
        yield f"exit {call.code}: {call.err[-300:]!r}"
    text = call.out + call.err
    if "Traceback" in text:
        yield "a traceback was printed"
    if SECRET_VALUE in text:
        yield "a planted secret value was printed"
    # The launcher's own marks on a terminal (FAIL in red, a plan row's source dimmed) are the
    # only escape sequences allowed; a spec's bytes are always shown escaped.
    for line in OUR_MARKS.sub("", text).splitlines():
        if not line.isprintable():
            yield f"unprintable output line: {line[:120]!r}"
    if call.code == 2:
        yield from _located(call, filename, lines)
    elif warned:
        report = call.err.removeprefix("warning: ").split("\n  the spec does not plan")[0]
        yield from _located(call, filename, lines, report.splitlines())


def _located(call: Call, filename: str, lines: int, report: list[str] | None = None) -> Iterator[str]:
    if call.out and report is None:
        yield "exit 2 printed on stdout"
    shown = re.escape(one_line(filename))
    pattern = re.compile(rf"{shown}:(\d+): (.+?): (.+)|    hint: .+")
    report = call.err.splitlines() if report is None else report
    if not report:
        yield "exit 2 with no problem printed"
    for line in report:
        match = pattern.fullmatch(line)
        if match is None:
            yield f"unlocated problem line: {line[:160]!r}"
        elif match.group(1) and not 1 <= int(match.group(1)) <= lines:
            yield f"line {match.group(1)} outside the file's {lines}: {line[:120]!r}"


def _plan_promises(text: str, as_json: str, dry_run: str) -> list[str]:
    """The shown env values and commands, run through bash, are exactly those of plan --json."""
    whole = json.loads(as_json)
    if len(whole["deployments"]) != 1 or "endpoint" in whole:
        # Several deployments (or an endpoint): each deployment's plan text is the one-model
        # plan's, which the one-deployment specs hold to these promises.
        return []
    plan = whole["deployments"][0]
    broken: list[str] = []
    expected: list[list[str]] = []
    script = []
    for node, section in zip(plan["nodes"], text.split("\n== ")[1:], strict=True):
        body = section.split("\n")[1:]
        for name, line in zip(node["env"], body, strict=False):
            # The name is printed as is; assign the shown value to a plain variable instead
            # (the name could be one bash keeps read-only).
            script += [f"__v={line.strip()[len(name) + 1 :]}", 'printf "%s\\0" "$__v"']
        command = body[len(node["env"]) + len(node["secrets"]) :]
        command = command[: command.index("")] if "" in command else command
        script += [
            f"printf '%s\\0' {END}",
            f"printf '%s\\0' {chr(10).join(command)}",
            f"printf '%s\\0' {END}",
        ]
        expected += [list(node["env"].values()), node["argv"]]
        broken += [f"{node['name']}: {b}" for b in _options_are_ours(node["argv"], plan)]
    blocks = dry_run.split("# which runs, detached, with the job's env:")[1:]
    for node, block in zip(plan["nodes"], blocks, strict=True):
        script += [f"printf '%s\\0' {block.strip(chr(10)).split(chr(10) * 2)[0]}", f"printf '%s\\0' {END}"]
        expected.append(node["argv"])
    if _split(through_bash("\n".join(script))) != expected:
        broken.append("the shown commands and env, run through bash, differ from plan --json")
    return broken


def _split(words: list[str]) -> list[list[str]]:
    groups: list[list[str]] = [[]]
    for w in words:
        if w == END:
            groups.append([])
        else:
            groups[-1].append(w)
    return groups[:-1]


def through_bash(script: str) -> list[str]:
    """The NUL-separated words a bash script prints."""
    done = subprocess.run(["bash", "-c", script], capture_output=True, check=False)
    return done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


def _options_are_ours(argv: list[str], plan: dict[str, Any]) -> Iterator[str]:
    """Every word starting with '-' is a flag the launcher put there; every other word is in place."""
    catalog = load_catalog(plan["flags_from"])
    takes = {f: o for o in catalog.options.values() for f in (*o.flags, *o.negative)}
    words = list(argv)
    if plan["runtime"] == "docker":
        image_at = next(i for i, w in enumerate(words) if w.startswith("--env-file=")) + 1
        docker = {w.split("=")[0] for w in words[2:image_at]}
        allowed = {
            "--detach",
            "--name",
            "--label",
            "--pull",
            "--network",
            "--ipc",
            "--shm-size",
            "--gpus",
            "--ulimit",
            "--mount",
            "--env",  # the compile cache's fixed paths only: every spec value goes in the env file
        }
        if words[:2] != ["docker", "run"] or not docker <= {*allowed, "--env-file"}:
            yield f"unexpected docker options {sorted(docker)}"
        if words[image_at].startswith("-"):
            yield f"the image {words[image_at]!r} reads as an option"
        words = words[image_at + 1 :]
    if words[1] != "serve" or words[2].startswith("-"):
        yield f"the command does not start `vllm serve MODEL`: {words[:3]}"
    values = 0
    for word in words[3:]:
        flag = word.split("=", 1)[0]
        if word.startswith("-"):
            if flag not in takes and flag not in ("--node-rank", "--headless"):
                yield f"{word[:60]!r} is no flag of vLLM {catalog.version}"
            option = takes.get(flag)
            values = (
                0 if option is None or "=" in word or option.kind != "value" else 100 if option.many else 1
            )
        elif values:
            values -= 1
        else:
            yield f"{word[:60]!r} stands where no value belongs"
