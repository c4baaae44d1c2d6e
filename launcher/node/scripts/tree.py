"""A model directory walked under one link policy, and its files read without surprises.

The policy, the same for `check`, `sync models` and the copy's verification:
- a regular file is the model's; a directory is walked; a link is never followed to walk;
- a Hugging Face cache snapshot (the model is `<repo>/snapshots/<revision>`, its files are
  links into `<repo>/blobs`) is a model like any other: such a link stands for its blob's
  content, which is hashed and copied;
- a relative link that stays inside the model directory, to a file or a directory there, is
  reproduced as a link: its target as written is part of the model;
- anything else is refused, with the reason: a link pointing outside, a dangling link, a
  loop, and a device, a FIFO or a socket (or a link to one), none of which is ever opened.
Not the model: `.spark-launch*` (ours) and `.cache` (Hugging Face's download state) at its top.

Reading is bounded: only what was found a regular file is opened, never through a link it
did not pass, and never more than the size it had when it was found.
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

OURS = ".spark-launch"  # every file spark-launch keeps beside a model starts so
NOT_MODEL = (".cache",)
MAX_ENTRIES = 1000000  # more than any model holds: beyond it, it is not a model directory
MAX_DEPTH = 32
HF_REPOS = ("models--", "datasets--", "spaces--")
KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


class Changed(OSError):
    """A file that is not what the walk found (replaced, grown): it is not hashed this time."""


class TooLarge(OSError):
    """More entries (or a deeper tree) than any model directory has."""


def kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def hf_blobs(real_root: str) -> str | None:
    """The blobs folder of the Hugging Face cache repository whose snapshot the model is, or None."""
    snapshots = os.path.dirname(real_root)
    repo = os.path.dirname(snapshots)
    if os.path.basename(snapshots) != "snapshots" or not os.path.basename(repo).startswith(HF_REPOS):
        return None
    return os.path.join(repo, "blobs")


def within(path: str, folder: str) -> bool:
    """True when the (resolved) path is the folder or lies under it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class Tree:
    """A model directory by entry: files (stat of the content), links kept as links, refusals."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self.blobs = hf_blobs(self.real_root)
        self.files: dict[str, os.stat_result] = {}
        self.links: dict[str, str] = {}  # relative path -> the link's target as written
        self.refused: dict[str, str] = {}  # relative path -> why it is neither read nor copied
        self.unlisted: list[str] = []  # directories that could not be listed
        self.through: dict[str, bool] = {}  # files reached through a link (into the cache's blobs)
        self.count = 0

    def walk(self) -> Tree:
        """Every entry under the root, depth first, sorted; never through a link."""
        stack: list[tuple[str, int]] = [("", 0)]
        while stack:
            rel_dir, depth = stack.pop()
            for name, st in self._entries(rel_dir):
                rel = os.path.join(rel_dir, name) if rel_dir else name
                if stat.S_ISDIR(st.st_mode):
                    if depth + 1 > MAX_DEPTH:
                        raise TooLarge(errno.E2BIG, f"deeper than {MAX_DEPTH} levels at {rel}")
                    stack.append((rel, depth + 1))
                elif stat.S_ISREG(st.st_mode):
                    self.files[rel] = st
                elif stat.S_ISLNK(st.st_mode):
                    self._link(rel)
                else:
                    self.refused[rel] = f"{kind(st.st_mode)}: never read"
        return self

    def _entries(self, rel_dir: str) -> list[tuple[str, os.stat_result]]:
        try:
            with os.scandir(os.path.join(self.root, rel_dir)) as found:
                names = [(e.name, e.stat(follow_symlinks=False)) for e in found]
        except OSError:
            self.unlisted.append(rel_dir + "/")
            return []
        self.count += len(names)
        if self.count > MAX_ENTRIES:
            raise TooLarge(errno.E2BIG, f"more than {MAX_ENTRIES} entries: not a model directory")
        if not rel_dir:
            names = [(n, s) for n, s in names if not n.startswith(OURS) and n not in NOT_MODEL]
        # reversed: the stack pops them in order
        return sorted(names, reverse=True)

    def _link(self, rel: str) -> None:
        """Classify one link: the content of a blob, a link kept as a link, or refused."""
        path = os.path.join(self.root, rel)
        target = os.readlink(path)
        try:
            st = os.stat(path)  # follows; a loop or a dangling link fails here, nothing is opened
        except OSError as exc:
            loop = exc.errno == errno.ELOOP
            self.refused[rel] = "a link loop" if loop else f"a dangling link (to {target})"
            return
        real = os.path.realpath(path)
        regular, folder = stat.S_ISREG(st.st_mode), stat.S_ISDIR(st.st_mode)
        if self.blobs is not None and within(real, self.blobs) and real != self.blobs:
            if regular:
                self.files[rel], self.through[rel] = st, True
            else:
                self.refused[rel] = f"a link to {kind(st.st_mode)} in the cache's blobs: never read"
            return
        lexical = os.path.normpath(os.path.join(os.path.dirname(rel), target))
        inside = not os.path.isabs(target) and lexical != ".." and not lexical.startswith("../")
        if inside and within(real, self.real_root) and (regular or folder):
            self.links[rel] = target
        elif inside and within(real, self.real_root):
            self.refused[rel] = f"a link to {kind(st.st_mode)}: never read"
        elif regular or folder:
            self.refused[rel] = f"a link pointing outside the model directory (to {target})"
        else:
            what = kind(st.st_mode)
            self.refused[rel] = f"a link to {what} outside the model directory ({target}): never read"


def open_found(tree: Tree, rel: str) -> int:
    """A read-only descriptor of the file the walk found at rel: the same file (device and
    inode), still regular; a Changed error otherwise. A link is followed only into the blobs."""
    follow = tree.through.get(rel, False)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(os.path.join(tree.root, rel), flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a link since the walk
            raise Changed(errno.ESTALE, "replaced by a link since it was listed") from None
        raise
    st, want = os.fstat(fd), tree.files[rel]
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (want.st_dev, want.st_ino):
        os.close(fd)
        raise Changed(errno.ESTALE, "replaced since it was listed")
    return fd


def read_bounded(fd: int, size: int, buffer: bytearray, on_block: Any) -> None:
    """Hand the file's `size` bytes to `on_block(view)`, block by block; Changed when it holds
    more (or less) than that: it is being written, and is hashed another time."""
    view = memoryview(buffer)
    with os.fdopen(fd, "rb", buffering=0) as f:
        left = size
        while left > 0:
            n = f.readinto(view[: min(left, len(buffer))])
            if not n:
                raise Changed(errno.ESTALE, "shorter than when it was listed")
            on_block(view[:n])
            left -= n
        if f.readinto(view[:1]):
            raise Changed(errno.ESTALE, "grew while it was hashed")
