"""The manifest of a model directory on this node: every file's size and sha256.

The directory is walked under the link policy of `tree.py` (a Hugging Face snapshot's links
into its blobs are content, a link inside is kept as a link, anything else is refused and
named, a device or FIFO is never opened). Hashes are cached in this user's own
~/.cache/spark-launch/manifests (never in the model directory, which others may write),
each keyed by the file's size, mtime, ctime, inode and device: a second run re-hashes
nothing that did not change, and a same-size rewrite whose mtime was put back is still
caught (every write moves ctime, and a replaced file has a new inode). Also reported: the
safetensors indexes' shard names, the free space where the model is (or would be) and what
cannot be written. After a copy, the files rsync proved are recorded as hashed without
reading them (`adopt`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import stat
import sys
import threading
import time

from .common import emit, private_dir, replace_file
from .tree import MAX_ENTRIES, Tree, open_found, read_bounded

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

CACHE_VERSION = 2
BLOCK = 8 << 20  # read size: big blocks keep hashing at disk speed
WORKERS = max(1, min(4, os.cpu_count() or 1))  # hashlib releases the GIL: files hash in parallel
INDEX_LIMIT = 64 << 20  # a safetensors index is small: a larger one is not read


def cache_key(st: os.stat_result) -> list[int]:
    """What every write of a file changes: size, mtime, ctime (not settable), inode, device."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def cache_path(root: str) -> str | None:
    """This user's cache file for the model directory, when only this user can write where it
    lies (else None: no cache is read or written, everything is hashed)."""
    home = os.path.expanduser("~")
    folder = home
    for part in (".cache", "spark-launch", "manifests"):
        folder = os.path.join(folder, part)
        if not private_dir(folder):
            return None
    tag = hashlib.sha256(directory_identity(root).encode()).hexdigest()[:16]
    return os.path.join(folder, tag + ".json")


def directory_identity(root: str) -> str:
    """The model directory as this node knows it: its real path, its device and inode, the host.
    Nodes sharing one home (NFS, or namespaces on one machine) keep caches apart that way."""
    try:
        st = os.stat(root)
        where = f"{st.st_dev}:{st.st_ino}"
    except OSError:
        where = "?"
    return "\0".join([os.path.realpath(root), where, socket.gethostname()])


def load_cache(root: str) -> dict[str, list[Any]]:
    """Cached entries {file: key + [sha256]}: only from this user's own cache file."""
    path = cache_path(root)
    try:
        fd = os.open(path or "", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    with os.fdopen(fd) as f:
        if os.fstat(f.fileno()).st_uid != os.geteuid():
            return {}
        try:
            data = json.load(f)
        except ValueError:
            return {}
    files = data.get("files") if isinstance(data, dict) and data.get("version") == CACHE_VERSION else None
    return files if isinstance(files, dict) else {}


def save_cache(root: str, entries: dict[str, list[Any]]) -> str | None:
    """Write the cache atomically, through a temporary file no one can guess; its path, or None."""
    path = cache_path(root)
    if path is None:
        return None
    try:
        replace_file(path, json.dumps({"version": CACHE_VERSION, "files": entries}, sort_keys=True))
    except OSError:
        return None
    return path


def sha256_of(tree: Tree, rel: str, progress: list[int], lock: threading.Lock) -> str:
    """The sha256 of the file the walk found at rel, read in big blocks, never more than its
    size then; `progress[0]` counts the bytes hashed."""
    digest = hashlib.sha256()

    def block(view: memoryview) -> None:
        digest.update(view)
        with lock:
            progress[0] += len(view)

    read_bounded(open_found(tree, rel), tree.files[rel].st_size, bytearray(BLOCK), block)
    return digest.hexdigest()


def hash_files(tree: Tree, todo: list[str], total: int) -> tuple[dict[str, str], list[str]]:
    """Hash `todo` in parallel, reporting progress each second; (hashes, unreadable files)."""
    from concurrent.futures import ThreadPoolExecutor  # only when something is hashed: not for `check`

    progress, lock = [0], threading.Lock()
    hashes: dict[str, str] = {}
    unreadable: list[str] = []

    def one(rel: str) -> None:
        try:
            hashes[rel] = sha256_of(tree, rel, progress, lock)
        except OSError:
            unreadable.append(rel)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = [pool.submit(one, rel) for rel in todo]
        while not all(f.done() for f in futures):
            time.sleep(0.2 if total < (1 << 30) else 1.0)
            emit(event="hashing", done=progress[0], total=total)
    return hashes, sorted(unreadable)


def manifest(root: str) -> dict[str, Any]:
    """Every file's size and sha256 (cached ones reused), the links kept as links, what is
    refused and why, the indexes, what could not be read."""
    tree = Tree(root).walk()
    files = tree.files
    cached = load_cache(root)
    sha: dict[str, str] = {}
    todo = []
    for rel, st in files.items():
        entry = cached.get(rel)
        if isinstance(entry, list) and entry[:5] == cache_key(st):
            sha[rel] = entry[5]
        else:
            todo.append(rel)
    todo.sort(key=lambda r: -files[r].st_size)  # big files first: the pool ends together
    hashed_bytes = sum(files[r].st_size for r in todo)
    fresh, unreadable = hash_files(tree, todo, hashed_bytes) if todo else ({}, [])
    sha.update(fresh)
    entries = {}
    for rel, digest in sha.items():
        try:
            now = cache_key(os.stat(os.path.join(root, rel), follow_symlinks=tree.through.get(rel, False)))
        except OSError:
            continue
        if now == cache_key(files[rel]):  # a file written while it was hashed is not cached
            entries[rel] = [*now, digest]
    cache = save_cache(root, entries) if fresh or set(cached) != set(entries) else None
    return {
        "files": {rel: [files[rel].st_size, sha[rel]] for rel in sorted(sha)},
        "mtimes": {rel: int(files[rel].st_mtime) for rel in sorted(sha)},
        "links": dict(sorted(tree.links.items())),
        "refused": dict(sorted(tree.refused.items())),
        "snapshot": bool(tree.through),
        "indexes": indexes(tree),
        "unreadable": sorted(unreadable + tree.unlisted),
        "hashed_bytes": hashed_bytes,
        "cache": cache,
    }


def adopt(root: str, proven: dict[str, list[Any]]) -> int:
    """Record, as hashed, files a copy has just written and proven ({file: [size, mtime, sha256]}):
    rsync checked each against a whole-file checksum of the source's bytes, whose sha256 the
    source's manifest holds. Only a regular file found at that size and mtime (rsync sets the
    mtime last) is recorded, under its cache key now: any later write moves that key and is
    hashed anew. Links are not followed. The number of files recorded."""
    entries, recorded = load_cache(root), 0
    for rel, (size, mtime, digest) in proven.items():
        try:
            st = os.lstat(os.path.join(root, rel))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size == size and int(st.st_mtime) == mtime:
            entries[rel] = [*cache_key(st), digest]
            recorded += 1
    if recorded:
        save_cache(root, entries)
    return recorded


def indexes(tree: Tree) -> dict[str, Any]:
    """The shard names each top-level *.index.json lists in its weight_map (None: unreadable)."""
    found: dict[str, Any] = {}
    for rel, st in tree.files.items():
        if "/" not in rel and rel.endswith(".index.json"):
            data = None
            if st.st_size <= INDEX_LIMIT:
                chunks: list[bytes] = []
                with contextlib.suppress(OSError):
                    read_bounded(open_found(tree, rel), st.st_size, bytearray(1 << 20), chunks.append)
                    data = json.loads(b"".join(chunks)) if chunks else None
            weight_map = data.get("weight_map") if isinstance(data, dict) else None
            found[rel] = sorted(set(weight_map.values())) if isinstance(weight_map, dict) else None
    return found


def room(root: str) -> dict[str, Any]:
    """Free space where the model is (or would be created), and what we cannot write there."""
    at = root
    while not os.path.isdir(at) and os.path.dirname(at) != at:
        at = os.path.dirname(at)
    vfs = os.statvfs(at)
    unwritable: list[str] = []
    seen = 0
    for directory, dirs, names in os.walk(root) if at == root else ():  # links are not walked
        rel_dir = os.path.relpath(directory, root)
        for name in dirs + names:
            rel = name if rel_dir == "." else os.path.join(rel_dir, name)
            if not os.access(os.path.join(directory, name), os.W_OK, follow_symlinks=False):
                unwritable.append(rel)
        seen += len(dirs) + len(names)
        if len(unwritable) >= 100 or seen > MAX_ENTRIES:
            break
    return {
        "free": vfs.f_bavail * vfs.f_frsize,
        "block": vfs.f_frsize or 4096,
        "at": at,
        "writable": os.access(at, os.W_OK),
        "unwritable": unwritable[:100],
    }


def manifest_answer(path: str, proven: dict[str, list[Any]] | None = None) -> dict[str, Any]:
    """The directory's manifest answer (after adopting `proven`), or where it would go, or why not."""
    started = time.monotonic()
    try:
        if not os.path.isdir(path):
            return {"ok": True, "path": path, "exists": False, "room": room(path)}
        adopted = adopt(path, proven) if proven else 0
        found = manifest(path)
        seconds = time.monotonic() - started
        return {"ok": True, "path": path, "exists": True, "room": room(path), "seconds": seconds,
                "adopted": adopted, **found}  # fmt: skip
    except OSError as exc:
        return {"ok": False, "path": path, "error": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str]) -> None:
    """manifest DIR REQUEST_JSON: {"path": the model directory[, "adopt": {file: [size, mtime, sha256]}]}"""
    request = json.loads(argv[1])
    emit(**manifest_answer(request["path"], request.get("adopt")))


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
