"""The commands of a group, each imported from its module only when it is used.

A run of `spark-launch plan` then imports the plan command's module and nothing of the
others (SSH, sync, supervise): its cold start is the cost of what it runs. `--help` and the
shell completion list every command, and so import them all.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping

from launcher.cli.commandline import Command


class LazyCommands(MutableMapping[str, Command]):
    """Command name -> "module:attribute", imported on first access; a group's `commands`."""

    def __init__(self, where: dict[str, str]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded:
            module, _, attribute = self._where[name].partition(":")  # KeyError: no such command
            self._loaded[name] = getattr(importlib.import_module(module), attribute)
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._where.setdefault(name, "")
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._where[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)
