"""Version numbers as PEP 440 writes and orders them (what pip and vLLM's wheels report). Pure.

`0.33.0`, `0.33.0rc1`, `0.32.0.post1`, `0.33.1.dev45+g7ee8a6dd0`, `0.33.0+nv26.10`: parsed
into a Version whose order is PEP 440's (a dev release before its pre-releases, those
before the release, post-releases after it; a local label after the same public version).
Written here rather than taken from `packaging`: the core stays free of dependencies and
`plan` starts fast, and this is the whole of what the launcher needs.
"""

from __future__ import annotations

import functools
import re
from dataclasses import field

from launcher.records import record

# PEP 440, appendix B (the canonical pattern), with a bound on each number.
_PATTERN = r"""
    v?
    (?:(?P<epoch>\d{1,4})!)?
    (?P<release>\d{1,9}(?:\.\d{1,9}){0,7})
    (?P<pre>[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>\d{1,9})?)?
    (?P<post>(?:-(?P<post_n1>\d{1,9}))|(?:[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d{1,9})?))?
    (?P<dev>[-_.]?dev[-_.]?(?P<dev_n>\d{1,9})?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    """
MAX_LENGTH = 96  # a version names cache files: no more than a real one ever needs
_PRE = {"a": "a", "alpha": "a", "b": "b", "beta": "b", "c": "rc", "rc": "rc", "pre": "rc", "preview": "rc"}


@record(eq=False)  # its own __eq__ and __hash__, by _key: none generated for nothing
class Version:
    """One PEP 440 version, normalised; compares in PEP 440's order."""

    epoch: int
    release: tuple[int, ...]
    pre: tuple[str, int] | None = None  # ("a" | "b" | "rc", N)
    post: int | None = None
    dev: int | None = None
    local: tuple[str, ...] = ()
    _key: tuple[object, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", (*self._public_key(), _local_key(self.local)))

    def _public_key(self) -> tuple[object, ...]:
        release = list(self.release)
        while len(release) > 1 and release[-1] == 0:  # 1.0 == 1.0.0
            release.pop()
        if self.pre is None and self.post is None and self.dev is not None:
            pre: tuple[int, str, int] = (0, "", 0)  # 1.0.dev1 comes before 1.0a1
        elif self.pre is None:
            pre = (2, "", 0)  # a release comes after its pre-releases
        else:
            pre = (1, *self.pre)
        post = (0, 0) if self.post is None else (1, self.post)
        dev = (1, 0) if self.dev is None else (0, self.dev)
        return (self.epoch, tuple(release), pre, post, dev)

    def __lt__(self, other: Version) -> bool:
        return self._key < other._key

    def __le__(self, other: Version) -> bool:
        return self._key <= other._key

    def __gt__(self, other: Version) -> bool:
        return self._key > other._key

    def __ge__(self, other: Version) -> bool:
        return self._key >= other._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    @property
    def public(self) -> Version:
        """The same version without its local label (the release as published)."""
        return Version(self.epoch, self.release, self.pre, self.post, self.dev)

    @property
    def base(self) -> Version:
        """The release it is a build of, before or after: 0.33.1 for 0.33.1.dev45+g7ee8a6dd0."""
        return Version(self.epoch, self.release)

    @property
    def is_final(self) -> bool:
        """True for a release as published (or a post-release), local label or not."""
        return self.pre is None and self.dev is None

    def __str__(self) -> str:
        text = (f"{self.epoch}!" if self.epoch else "") + ".".join(map(str, self.release))
        text += f"{self.pre[0]}{self.pre[1]}" if self.pre else ""
        text += f".post{self.post}" if self.post is not None else ""
        text += f".dev{self.dev}" if self.dev is not None else ""
        return text + ("+" + ".".join(self.local) if self.local else "")


def _local_key(local: tuple[str, ...]) -> tuple[object, ...]:
    """PEP 440: no label first; numeric segments compare as numbers, after any text segment."""
    if not local:
        return (0,)
    return (1, *((1, int(s), "") if s.isdigit() else (0, 0, s) for s in local))


@functools.cache
def _pattern() -> re.Pattern[str]:
    return re.compile(_PATTERN, re.VERBOSE | re.IGNORECASE)


def _release_only(text: str) -> tuple[int, ...] | None:
    """The numbers of a bare release (0.33.0) as the pattern reads them; None for any other text."""
    parts = text.split(".")
    if len(parts) <= 8 and all(0 < len(p) <= 9 and p.isascii() and p.isdigit() for p in parts):
        return tuple(int(p) for p in parts)
    return None


def parse(text: str) -> Version:
    """A PEP 440 version from its text (case, separators and a leading v as PEP 440 allows)."""
    release = _release_only(text)
    if release is not None:  # the usual version, read without compiling the pattern (a cold start's cost)
        return Version(0, release)
    found = _pattern().fullmatch(text) if len(text) <= MAX_LENGTH else None
    if found is None:
        raise ValueError(f"not a PEP 440 version: {text!r}")
    pre = None
    if found["pre"]:
        pre = (_PRE[found["pre_l"].lower()], int(found["pre_n"] or 0))
    post = None
    if found["post"]:
        post = int(found["post_n1"] or found["post_n2"] or 0)
    local = tuple(re.split(r"[-_.]", found["local"].lower())) if found["local"] else ()
    return Version(
        int(found["epoch"] or 0),
        tuple(int(p) for p in found["release"].split(".")),
        pre,
        post,
        int(found["dev_n"] or 0) if found["dev"] else None,
        local,
    )


def is_version(text: str) -> bool:
    """True when `text` is a PEP 440 version."""
    try:
        parse(text)
    except ValueError:
        return False
    return True
