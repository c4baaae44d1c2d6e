"""Version numbers as PEP 440 writes and orders them (what pip and vLLM's wheels report). Pure.

`0.33.0`, `0.33.0rc1`, `0.32.0.post1`, `0.33.1.dev45+g7ee8a6dd0`, `0.33.0+nv26.10`: parsed and
ordered by `packaging.version`, as pip does. Ours is only a bound on the text (a version a node
reports names cache files) and the few views the launcher needs of a version.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

MAX_LENGTH = 96  # a version names cache files: no more than a real one ever needs

__all__ = ["MAX_LENGTH", "Version", "base", "is_version", "parse", "public"]


def parse(text: str) -> Version:
    """A PEP 440 version from its text; ValueError for any other text (spaces around it too)."""
    try:
        if len(text) <= MAX_LENGTH and text == text.strip():
            return Version(text)
    except InvalidVersion:
        pass
    raise ValueError(f"not a PEP 440 version: {text[:MAX_LENGTH]!r}")


def is_version(text: str) -> bool:
    """True when `text` is a PEP 440 version."""
    try:
        parse(text)
    except ValueError:
        return False
    return True


def public(version: Version) -> Version:
    """The same version without its local label (the release as published)."""
    return Version(version.public)


def base(version: Version) -> Version:
    """The release it is a build of, before or after: 0.33.1 for 0.33.1.dev45+g7ee8a6dd0."""
    return Version(version.base_version)
