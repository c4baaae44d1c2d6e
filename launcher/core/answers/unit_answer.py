"""The install script's answer: the unit kept on the node, or why it cannot be. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.answers.read import At
from launcher.core.answers.run_answer import failed


@dataclass(frozen=True, slots=True)
class Kept:
    """The unit kept (and the other versions removed with it), or the reason it is not."""

    unit: str | None = None
    removed: tuple[str, ...] = ()
    error: str | None = None

    @classmethod
    def parse(cls, raw: object) -> Kept:
        """From the install script's answer."""
        at = At(raw)
        error = failed(at)
        if error is not None:
            return cls(error=error)
        removed = tuple(a.name() for a in at.field("removed").items(1000))
        return cls(at.field("unit").hexdigest(), removed)
