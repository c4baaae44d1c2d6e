"""The manifest node script, run as it is sent (python3 - on stdin), on real files: content, not size.

The hashes are cached in the node user's own ~/.cache (never in the model directory); a
file's entry is reused only while its size, mtime, ctime, inode and device are unchanged,
so a same-size rewrite whose mtime was put back is still found. The prepare script removes
only paths inside the model directory. The link policy: tests/test_model_links.py.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launcher.core import remote
from launcher.core.answers.sync import manifest
from launcher.core.sync.manifest import FileEntry, missing_parts
from launcher.node.agent import Agent
from launcher.node.scripts import bundle
from tests.fakes.local import LocalExecutor


def agent(home: Path) -> Agent:
    home.mkdir(exist_ok=True)
    return Agent(LocalExecutor(home), "t", "n1")


def make_model(root: Path, shards: int = 2, size: int = 3 << 20) -> None:
    """config, tokenizer, shards of random bytes and their safetensors index."""
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "x"}')
    (root / "tokenizer.json").write_text("{}")
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    for name in names:
        (root / name).write_bytes(os.urandom(size))
    index = {"metadata": {}, "weight_map": {f"w{i}": n for i, n in enumerate(names)}}
    (root / "model.safetensors.index.json").write_text(json.dumps(index))


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_file_by_size_and_sha256(tmp_path: Path) -> None:
    make_model(tmp_path / "m")
    (tmp_path / "m" / "sub").mkdir()
    (tmp_path / "m" / "sub" / "extra.bin").write_bytes(b"x" * 10)
    (tmp_path / "m" / ".cache" / "huggingface").mkdir(parents=True)
    (tmp_path / "m" / ".cache" / "huggingface" / "lock").write_text("node-local")
    m = agent(tmp_path / "home").manifest(str(tmp_path / "m"))
    assert sorted(m.files) == sorted(
        [
            "config.json",
            "tokenizer.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json",
            "sub/extra.bin",
        ]
    )
    shard = tmp_path / "m" / "model-00002-of-00002.safetensors"
    assert m.files[shard.name].sha256 == sha(shard) and m.files[shard.name].size == 3 << 20
    assert m.indexes == {"model.safetensors.index.json": tuple(sorted(n for n in m.files if "-of-" in n))}
    assert missing_parts(m) == [] and m.hashed_bytes == m.total_bytes


def test_a_second_run_hashes_nothing_and_the_cache_is_not_part_of_the_model(tmp_path: Path) -> None:
    make_model(tmp_path / "m")
    node = agent(tmp_path / "home")
    before = sorted(os.listdir(tmp_path / "m"))
    first = node.manifest(str(tmp_path / "m"))
    second = node.manifest(str(tmp_path / "m"))
    [cache] = (tmp_path / "home" / ".cache" / "spark-launch" / "manifests").iterdir()
    assert first.hashed_bytes > 0
    assert second.hashed_bytes == 0 and second.files == first.files
    assert sorted(os.listdir(tmp_path / "m")) == before  # nothing written beside the model
    assert cache.stat().st_mode & 0o777 == 0o600 and cache.parent.stat().st_mode & 0o777 == 0o700


def test_a_same_size_change_with_its_mtime_put_back_is_rehashed(tmp_path: Path) -> None:
    """Size and mtime alone would miss it (touch -r, or a copy keeping times, does this)."""
    make_model(tmp_path / "m")
    node = agent(tmp_path / "home")
    shard = tmp_path / "m" / "model-00001-of-00002.safetensors"
    before = node.manifest(str(tmp_path / "m")).files[shard.name]
    stat = shard.stat()
    with shard.open("r+b") as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert shard.stat().st_mtime_ns == stat.st_mtime_ns and shard.stat().st_size == stat.st_size
    after = node.manifest(str(tmp_path / "m"))
    assert after.files[shard.name] == FileEntry(stat.st_size, sha(shard)) != before
    assert after.hashed_bytes == stat.st_size  # only the changed file


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """path not writable: a read-only bind mount for root (who may write anywhere), modes otherwise."""
    if os.geteuid() == 0:
        subprocess.run(["mount", "--bind", "-o", "ro", str(path), str(path)], check=True)
    else:
        path.chmod(0o555)
    try:
        yield
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(path)], check=True)
        else:
            path.chmod(0o755)


def test_a_read_only_model_directory_keeps_its_cache_in_the_users_home(tmp_path: Path) -> None:
    make_model(tmp_path / "m")
    node = agent(tmp_path / "home")
    with read_only(tmp_path / "m"):
        first = node.manifest(str(tmp_path / "m"))
        second = node.manifest(str(tmp_path / "m"))
    assert list((tmp_path / "home" / ".cache" / "spark-launch" / "manifests").iterdir())
    assert first.hashed_bytes > 0 and second.hashed_bytes == 0
    assert first.room is not None and first.room.writable is False


def test_a_missing_directory_reports_where_it_would_go(tmp_path: Path) -> None:
    m = agent(tmp_path / "home").manifest(str(tmp_path / "models" / "m"))
    assert not m.exists and m.room is not None and m.room.at == str(tmp_path) and m.room.writable
    assert m.room.free > 0 and m.room.block > 0
    assert missing_parts(m) == [f"the directory {tmp_path / 'models' / 'm'}"]


def prepare(tmp_path: Path, path: Path, remove: list[str]) -> dict[str, Any]:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"path": str(path), "remove": remove}))
    done = subprocess.run(
        ["python3", "-", "prepare", str(tmp_path), str(job)],
        input=bundle("prepare"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert not job.exists()  # the job file is taken
    answer: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return answer


def test_prepare_removes_only_paths_inside_the_model(tmp_path: Path) -> None:
    make_model(tmp_path / "m")
    (tmp_path / "m" / "old").mkdir()
    (tmp_path / "m" / "old" / "stale.bin").write_bytes(b"x")
    (tmp_path / "keep").write_text("outside")
    answer = prepare(tmp_path, tmp_path / "m", ["old/stale.bin", "config.json", "../keep", "/etc/hostname"])
    assert answer["removed"] == 2 and not answer["ok"]
    assert answer["errors"] == [
        f"../keep: not a path inside {tmp_path / 'm'}",
        f"/etc/hostname: not a path inside {tmp_path / 'm'}",
    ]
    assert (tmp_path / "keep").exists() and not (tmp_path / "m" / "old").exists()
    assert not (tmp_path / "m" / "config.json").exists()


def test_prepare_creates_the_directory(tmp_path: Path) -> None:
    assert prepare(tmp_path, tmp_path / "a" / "b", [])["ok"]
    assert (tmp_path / "a" / "b").is_dir()


@pytest.mark.parametrize("name", ["manifest", "transfer", "prepare"])
def test_the_sync_scripts_parse_as_python_3_8(name: str) -> None:
    """Sent whole to nodes whose python3 may be old: no syntax newer than 3.8."""
    ast.parse(bundle(name), feature_version=(3, 8))


def test_while_a_copy_runs_each_finished_file_is_hashed_into_the_cache(tmp_path: Path) -> None:
    """The watch: a file counts as finished once it has the source's size and mtime (rsync sets
    the mtime last); the manifest after the copy then hashes nothing that was watched."""
    make_model(tmp_path / "src")
    source = agent(tmp_path / "home").manifest(str(tmp_path / "src"))
    node = agent(tmp_path / "home2")
    (tmp_path / "dst").mkdir()
    expect = {rel: [source.files[rel].size, source.mtimes[rel]] for rel in source.files}
    watcher = node.open(remote.prehash_call(node.dir, str(tmp_path / "dst"), expect))
    for rel in source.files:  # the copy: content first, the source's times last
        shutil.copyfile(tmp_path / "src" / rel, tmp_path / "dst" / rel)
        shutil.copystat(tmp_path / "src" / rel, tmp_path / "dst" / rel)
    out = b"".join(iter(lambda: watcher.recv(65536), b""))
    assert watcher.wait() == 0
    final = json.loads(out.splitlines()[-1])  # ends with the directory's manifest, all from the cache
    assert final["ok"] and final["watched"] == source.total_bytes and final["hashed_bytes"] == 0
    assert manifest(final, str(tmp_path / "dst")).files == source.files
    after = node.manifest(str(tmp_path / "dst"))
    assert after.hashed_bytes == 0 and after.files == source.files


def test_a_file_not_finished_is_not_hashed_while_watching(tmp_path: Path) -> None:
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "a.bin").write_bytes(b"x" * 100)  # the right size, but not the source's mtime
    node = agent(tmp_path / "home")
    watcher = node.open(remote.prehash_call(node.dir, str(tmp_path / "dst"), {"a.bin": [100, 1]}))
    first = b""
    while b"\n" not in first:
        first += watcher.recv(65536)
    watcher.close()
    assert json.loads(first.splitlines()[0]) == {"event": "idle", "bytes": 0, "pending": 1}
    assert os.listdir(tmp_path / "dst") == ["a.bin"]
    assert not list((tmp_path / "home").glob(".cache/spark-launch/manifests/*.json"))
