"""The manifest of a model directory on this node: every file's size and sha256.

Hashes are cached beside the model (`.spark-launch-manifest.json` in it, or under
~/.cache/spark-launch/manifests when the model directory is read-only), each keyed by the
file's size, mtime, ctime, inode and device: a second run re-hashes nothing that did not
change, and a same-size rewrite whose mtime was put back is still caught (every write
moves ctime, and a replaced file has a new inode). Also reported: the safetensors indexes'
shard names, the free space where the model is (or would be) and what cannot be written.
After a copy, the files rsync proved are recorded as hashed without reading them (`adopt`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from typing import Any

from launcher.node.scripts.common import emit, read_json  # inlined when sent

CACHE_NAME = ".spark-launch-manifest.json"
SKIP_TOP = (CACHE_NAME, ".cache")  # our cache; Hugging Face's download state (locks, metadata)
CACHE_VERSION = 1
BLOCK = 8 << 20  # read size: big blocks keep hashing at disk speed
WORKERS = max(1, min(4, os.cpu_count() or 1))  # hashlib releases the GIL: files hash in parallel


def model_files(root: str) -> dict[str, os.stat_result]:
    """Every regular file under root (symlinks followed), by path relative to root."""
    found = {}
    for directory, dirs, files in os.walk(root, followlinks=True):
        rel_dir = os.path.relpath(directory, root)
        if rel_dir == ".":
            dirs[:] = [d for d in dirs if d not in SKIP_TOP]
        dirs.sort()
        for name in sorted(files):
            rel = name if rel_dir == "." else os.path.join(rel_dir, name)
            if rel in SKIP_TOP:
                continue
            try:
                st = os.stat(os.path.join(directory, name))
            except OSError:
                continue  # a dangling link, or gone meanwhile: not a file of the model
            found[rel] = st
    return found


def cache_key(st: os.stat_result) -> list[int]:
    """What every write of a file changes: size, mtime, ctime (not settable), inode, device."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def cache_paths(root: str) -> list[str]:
    """Where the cache may be: in the model directory, else in this user's cache directory."""
    tag = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:16]
    home = os.path.join(os.path.expanduser("~"), ".cache", "spark-launch", "manifests", tag + ".json")
    return [os.path.join(root, CACHE_NAME), home]


def load_cache(root: str) -> dict[str, list[Any]]:
    """Cached entries {file: key + [sha256]} from every cache place (the model's own first)."""
    entries: dict[str, list[Any]] = {}
    for path in reversed(cache_paths(root)):
        data = read_json(path, {})
        if isinstance(data, dict) and data.get("version") == CACHE_VERSION:
            entries.update(data.get("files", {}))
    return entries


def save_cache(root: str, entries: dict[str, list[Any]]) -> str | None:
    """Write the cache where we can (atomically); the path written, or None."""
    body = json.dumps({"version": CACHE_VERSION, "files": entries}, sort_keys=True)
    for path in cache_paths(root):
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(tmp, "w") as f:
                f.write(body)
            os.replace(tmp, path)
            return path
        except OSError:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return None


def sha256_of(path: str, progress: list[int], lock: threading.Lock) -> str:
    """The file's sha256, read in big blocks; `progress[0]` counts the bytes hashed."""
    digest = hashlib.sha256()
    buffer = bytearray(BLOCK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buffer)
            if not n:
                return digest.hexdigest()
            digest.update(view[:n])
            with lock:
                progress[0] += n


def hash_files(root: str, todo: list[str], total: int) -> tuple[dict[str, str], list[str]]:
    """Hash `todo` in parallel, reporting progress each second; (hashes, unreadable files)."""
    from concurrent.futures import ThreadPoolExecutor  # only when something is hashed: not for `check`

    progress, lock = [0], threading.Lock()
    hashes: dict[str, str] = {}
    unreadable: list[str] = []

    def one(rel: str) -> None:
        try:
            hashes[rel] = sha256_of(os.path.join(root, rel), progress, lock)
        except OSError:
            unreadable.append(rel)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = [pool.submit(one, rel) for rel in todo]
        while not all(f.done() for f in futures):
            time.sleep(0.2 if total < (1 << 30) else 1.0)
            emit(event="hashing", done=progress[0], total=total)
    return hashes, sorted(unreadable)


def manifest(root: str) -> dict[str, Any]:
    """Every file's size and sha256 (cached ones reused), the indexes, what could not be read."""
    files = model_files(root)
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
    fresh, unreadable = hash_files(root, todo, hashed_bytes) if todo else ({}, [])
    sha.update(fresh)
    entries = {}
    for rel, digest in sha.items():
        try:
            now = cache_key(os.stat(os.path.join(root, rel)))
        except OSError:
            continue
        if now == cache_key(files[rel]):  # a file written while it was hashed is not cached
            entries[rel] = [*now, digest]
    cache = save_cache(root, entries) if fresh or set(cached) != set(entries) else None
    return {
        "files": {rel: [files[rel].st_size, sha[rel]] for rel in sorted(sha)},
        "mtimes": {rel: int(files[rel].st_mtime) for rel in sorted(sha)},
        "indexes": indexes(root, files),
        "unreadable": unreadable,
        "hashed_bytes": hashed_bytes,
        "cache": cache,
    }


def adopt(root: str, proven: dict[str, list[Any]]) -> int:
    """Record, as hashed, files a copy has just written and proven ({file: [size, mtime, sha256]}):
    rsync checked each against a whole-file checksum of the source's bytes, whose sha256 the
    source's manifest holds. Only a file found at that size and mtime (rsync sets the mtime
    last) is recorded, under its cache key now: any later write moves that key and is hashed
    anew. The number of files recorded."""
    entries, recorded = load_cache(root), 0
    for rel, (size, mtime, digest) in proven.items():
        try:
            st = os.stat(os.path.join(root, rel))
        except OSError:
            continue
        if st.st_size == size and int(st.st_mtime) == mtime:
            entries[rel] = [*cache_key(st), digest]
            recorded += 1
    if recorded:
        save_cache(root, entries)
    return recorded


def indexes(root: str, files: dict[str, os.stat_result]) -> dict[str, Any]:
    """The shard names each top-level *.index.json lists in its weight_map (None: unreadable)."""
    found: dict[str, Any] = {}
    for rel in files:
        if "/" not in rel and rel.endswith(".index.json"):
            data = read_json(os.path.join(root, rel))
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
    if at == root:
        for directory, dirs, names in os.walk(root):
            rel_dir = os.path.relpath(directory, root)
            for name in dirs + names:
                rel = name if rel_dir == "." else os.path.join(rel_dir, name)
                if not os.access(os.path.join(directory, name), os.W_OK) and len(unwritable) < 100:
                    unwritable.append(rel)
    return {
        "free": vfs.f_bavail * vfs.f_frsize,
        "block": vfs.f_frsize or 4096,
        "at": at,
        "writable": os.access(at, os.W_OK),
        "unwritable": unwritable,
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


if __name__ == "__main__":  # python3 - NAME DIR ARGS...
    main(sys.argv[2:])
