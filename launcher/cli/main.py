"""The `spark-launch` command line: the group, and the one place mapping outcomes to exit codes."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from launcher import __version__
from launcher.cli.shared import echo, terminal
from launcher.errors import ExitStatus, SparkLaunchError

PROG = "spark-launch"  # as usage and help name the program, however it was started (`python -m launcher`)

# Every command, by the module that defines it: only the one that runs is imported.
COMMANDS = {
    "init": "launcher.cli.init_commands:init",
    "facts": "launcher.cli.init_commands:facts",
    "plan": "launcher.cli.spec_commands:plan",
    "validate": "launcher.cli.spec_commands:validate",
    "schema": "launcher.cli.spec_commands:schema",
    "check": "launcher.cli.cluster_commands:check",
    "up": "launcher.cli.cluster_commands:up",
    "status": "launcher.cli.look_commands:status",
    "logs": "launcher.cli.look_commands:logs",
    "verify": "launcher.cli.look_commands:verify",
    "down": "launcher.cli.cluster_commands:down",
    "sync": "launcher.cli.sync_commands:sync",
    "supervise": "launcher.cli.keep_commands:supervise",
    "export": "launcher.cli.export_commands:export",
    "diagnose": "launcher.cli.keep_commands:diagnose",
    "runs": "launcher.cli.receipt_commands:runs",
    "diff": "launcher.cli.receipt_commands:diff",
    "lock": "launcher.cli.receipt_commands:lock",
}


class LazyGroup(click.Group):
    """A group whose commands are "module:attribute" names, each imported when it is used (click's
    recipe for large command lines): `spark-launch plan` imports the plan command's module and none of
    the others (SSH, sync, supervise). Help and shell completion list every command, so import them all."""

    def __init__(self, *args: Any, lazy_commands: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy_commands:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = self.lazy_commands[cmd_name].partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy_commands[cmd_name]} is not a click command")
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's; a mistyped command is told the nearest of every command, the lazy ones too."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None


class Launcher(LazyGroup):
    """The root group, and the one place turning outcomes into exit statuses: what a command returns,
    a SparkLaunchError's own (its text on stderr), Ctrl-C as 130; usage errors stay click's (2).
    The program and tests driving it through click's CliRunner see the same."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            status = super().invoke(ctx)
        except SparkLaunchError as exc:
            text = exc.render_on(*terminal(sys.stderr))
            echo(f"spark-launch: {text}" if exc.prefixed else text, err=True)
            raise click.exceptions.Exit(exc.exit_status) from None
        except (KeyboardInterrupt, click.exceptions.Abort):
            echo("interrupted", err=True)
            raise click.exceptions.Exit(ExitStatus.INTERRUPTED) from None
        raise click.exceptions.Exit(int(status) if isinstance(status, int) else ExitStatus.OK)


def _version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    """--version: the launcher's version and the vLLM releases it has a catalog for."""
    if not value or ctx.resilient_parsing:
        return
    from launcher.catalogs import known_versions

    echo(f"spark-launch {__version__}; vLLM releases supported: {', '.join(known_versions())}")
    ctx.exit()


def _verbose(ctx: click.Context, _: click.Parameter, value: int) -> None:
    """-v: how each node is reached (target, ssh_config, timeout, known_hosts, keys); -vv: paramiko too."""
    if not value or ctx.resilient_parsing:
        return
    import logging  # only when asked: its import is a tenth of `plan`'s start-up

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("ssh: %(message)s"))
    loggers = [logging.getLogger("launcher.ssh")]
    loggers[0].setLevel(logging.INFO)
    if value > 1:  # the SSH handshake itself, message by message
        loggers.append(logging.getLogger("paramiko"))
        loggers[1].setLevel(logging.DEBUG)
    for logger in loggers:
        logger.addHandler(handler)

    def quiet() -> None:  # only for this command: a later one in this process must not write to its stream
        for logger in loggers:
            logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)

    ctx.call_on_close(quiet)


@click.group(
    PROG,
    cls=Launcher,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Show the version and the vLLM releases supported, and exit.",
)
@click.option(
    "-v",
    "--verbose",
    count=True,
    expose_value=False,
    callback=_verbose,
    help="Say how each node is reached over SSH (-vv: every step of the handshake).",
)
def cli() -> None:
    """Start vLLM across several machines from ONE spec, with provably identical commands.

    Every node gets the same fully explicit `vllm serve` command (only --node-rank and
    --headless differ), with every setting vLLM would otherwise derive per node written out.

    \b
    The first hour (each command: spark-launch COMMAND --help):
      spark-launch init --hosts spark-1,spark-2 --model /models/M --venv /opt/vllm
      spark-launch sync models cluster.yaml  # the head's model on every node
      spark-launch check cluster.yaml        # are the nodes alike?
      spark-launch up cluster.yaml           # start every rank, until it serves
      spark-launch verify cluster.yaml       # a completion, prefix-cache hits
    Then: status, logs -f, down, supervise, export systemd --install, diagnose,
    runs, diff, lock, plan --compare-release; validate, plan and schema read the
    spec alone; facts --hosts says what each node reports.

    \b
    Exit codes: 0 ok, 1 failed, 2 bad spec or usage, 3 nodes disagree,
    4 node unreachable, 130 interrupted. Runbooks: deploy/ in the source tree.
    Shell completion (commands, options, spec files, deployments, nodes):
      eval "$(_SPARK_LAUNCH_COMPLETE=bash_source spark-launch)"  # ~/.bashrc
      eval "$(_SPARK_LAUNCH_COMPLETE=zsh_source spark-launch)"   # ~/.zshrc
      _SPARK_LAUNCH_COMPLETE=fish_source spark-launch | source   # fish config
    """


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI (usage errors exit 2, as click has them; what commands return or
    raise, as `Launcher.invoke` maps it), answering the shell's completion requests too."""
    if "_SPARK_LAUNCH_COMPLETE" in os.environ:  # the shell asks for its script, or for answers
        from launcher.cli.shells import register

        register()
    cli.main(args=list(argv) if argv is not None else None, prog_name=PROG)


def entry() -> None:
    """The `spark-launch` program (and `python -m launcher`): `main` in a process of its own.

    Everything start-up made (click, the imported modules) lives as long as the process, so it
    is frozen out of the cyclic collector's sight, and once more at the end: the interpreter's
    exit then skips examining every object the command made, a seventh of a `plan`. Objects
    are still freed, files closed and atexit handlers run as ever; what a frozen reference cycle
    holds stays until the process ends, as it would in any process that ends. Tests calling
    `main` in their own process are not frozen: they keep collecting between commands.
    """
    gc.freeze()
    try:
        main()
    finally:
        gc.freeze()
