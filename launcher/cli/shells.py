"""The shells' side of completion: click's scripts for bash, zsh and fish, with one repair to fish's.
Imported only when a shell asks (`_SPARK_LAUNCH_COMPLETE`).

click's fish script (8.4.2 and later) splits each answer at every comma, so fish would show a
description only up to its first comma ("Show every node (running") and offer `--hosts a,b` as
`a`. Splitting at the first comma only (the one click writes after the answer's type) keeps both.
"""

from __future__ import annotations

from click.shell_completion import FishComplete, add_completion_class


class Fish(FishComplete):
    """click's fish completion, each answer split at its first comma only."""

    source_template = FishComplete.source_template.replace(
        '(string split "," $completion)', '(string split -m 1 "," -- $completion)'
    )


def register() -> None:
    """Answer fish with `Fish` (bash and zsh as click does)."""
    add_completion_class(Fish)
