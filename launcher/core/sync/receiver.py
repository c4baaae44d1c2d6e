"""The receiver of a relayed copy: the rsync the launcher runs on the target, from its own plan. Pure.

With `sync models --relay` the source's rsync asks its remote shell (the launcher) for
`rsync --server FLAGS OPTIONS . DEST` on the target. Those words come from the source, and
a source is not trusted: the launcher builds the receiver from the transfer it planned (the
program, the long options its own rsync argv passes on, the destination: the target's model
directory) and runs that, quoted, only when the source asked for exactly it. The one word
rsync itself composes is the compact flag word (`-logDtpRe.LsfxCIvu`: the short options of
the planned ones, then the protocol capabilities of the source's rsync release); it is taken
only when each letter is one of those. Anything else is refused, naming the source.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from dataclasses import dataclass

# What --archive (with --files-from, rsync leaves out -r) and --relative make rsync pass to
# its server, by release. Never -L: a receiver told to follow links writes through them.
SERVER_LETTERS = frozenset("logDtpRr")
CAPABILITIES = frozenset("iLsfxCIvu")  # rsync's `-e.` protocol capability letters (3.0 to 3.4)
LINKS = ("--safe-links", "--copy-unsafe-links")  # the link policy: passed on as they are
FLAG_WORD = re.compile(r"-([A-Za-z]+?)(?:e\.([A-Za-z]*))?\Z")


class NotTheReceiver(ValueError):
    """The source asked the relay for something else than the receiver of the planned copy."""


@dataclass(frozen=True, slots=True)
class Receiver:
    """The rsync receiver a relayed copy runs on its target, as the launcher planned it."""

    destination: str  # the target's model directory, with the trailing slash rsync gives it
    options: tuple[str, ...]  # the long options the source's rsync passes on to its server

    def argv(self, flags: str) -> tuple[str, ...]:
        """The receiver's command line, with rsync's flag word `flags` (already checked)."""
        return ("rsync", "--server", flags, *self.options, ".", self.destination)

    def command(self, flags: str) -> str:
        """The receiver as a shell line for the target's login shell: every word quoted."""
        return shlex.join(self.argv(flags))


def receiver_for(argv: tuple[str, ...], path: str) -> Receiver:
    """The receiver of a copy by the source's rsync `argv` (`transfer.rsync_argv`) into `path`."""
    # An --out-format makes the sender ask its receiver to log too, with a placeholder format.
    passed = ["--log-format=X"] if any(w.startswith("--out-format=") for w in argv) else []
    passed += [w for w in argv if w.startswith(("--timeout=", "--bwlimit="))]
    passed += [w for w in argv if w in LINKS]
    append = ["--append", "--append"] if "--append-verify" in argv else []  # how rsync says verify
    return Receiver(path.rstrip("/") + "/", (*passed, *append))


def checked(receiver: Receiver, asked: tuple[str, ...]) -> str:
    """The shell line to run on the target when `asked` is that receiver; else NotTheReceiver."""
    if len(asked) < 5 or asked[:2] != ("rsync", "--server"):
        raise NotTheReceiver("not an rsync receiver (`rsync --server ...`)")
    flags, *options, dot, destination = asked[2:]
    found = FLAG_WORD.match(flags)
    if (
        not found
        or not set(found.group(1)) <= SERVER_LETTERS
        or not set(found.group(2) or "") <= CAPABILITIES
    ):
        raise NotTheReceiver(f"the flag word {flags[:60]!r} holds options this copy does not use")
    if Counter(options) != Counter(receiver.options):
        raise NotTheReceiver(
            f"the options {' '.join(options)[:200]!r} are not the planned {' '.join(receiver.options)!r}"
        )
    if dot != "." or _unescaped(destination) != receiver.destination:
        raise NotTheReceiver(f"the destination {destination[:200]!r} is not {receiver.destination!r}")
    return receiver.command(flags)


def _unescaped(word: str) -> str:
    """A word as rsync (3.2.4 and later) escapes it for the remote shell, unescaped."""
    return re.sub(r"\\(.)", r"\1", word)
