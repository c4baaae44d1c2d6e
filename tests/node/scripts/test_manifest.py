"""The manifest node script, run as it is sent (python3 - on stdin), on real files: content, not size.

The hashes are cached in the node user's own ~/.cache (never in the model directory); a
file's entry is reused only while its size, mtime, ctime, inode and device are unchanged,
so a same-size rewrite whose mtime was put back is still found. The prepare script removes
only paths inside the model directory. The link policy: tests/node/scripts/test_model_links.py.
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

from launcher.core.sync.model_manifest import FileEntry, Manifest, missing_parts
from launcher.core.sync.transfer_plan import rsync_argv
from launcher.node.agent import Agent
from launcher.node.scripts import bundle
from tests.fakes.local import LocalExecutor
from tests.node_scripts import prepare


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


def copy_with_times(source: Path, target: Path) -> None:
    """A copy as rsync leaves it: each file's content, then the source's times."""
    target.mkdir()
    for item in source.iterdir():
        shutil.copyfile(item, target / item.name)
        shutil.copystat(item, target / item.name)


def proof(source: Manifest) -> dict[str, list[Any]]:
    """What the launcher hands the target after a copy rsync proved: {file: [size, mtime, sha256]}."""
    return {rel: [f.size, source.mtimes[rel], f.sha256] for rel, f in source.files.items()}


def test_files_a_copy_proved_are_recorded_and_not_read_again(tmp_path: Path) -> None:
    make_model(tmp_path / "src")
    source = agent(tmp_path / "home").manifest(str(tmp_path / "src"))
    copy_with_times(tmp_path / "src", tmp_path / "dst")
    node = agent(tmp_path / "home2")
    answer = node.manifest(str(tmp_path / "dst"), adopt=proof(source))
    assert answer.adopted == len(source.files) and answer.hashed_bytes == 0
    assert answer.files == source.files


def test_a_proved_file_found_at_another_size_or_mtime_is_hashed_not_adopted(tmp_path: Path) -> None:
    make_model(tmp_path / "src")
    source = agent(tmp_path / "home").manifest(str(tmp_path / "src"))
    copy_with_times(tmp_path / "src", tmp_path / "dst")
    shard = tmp_path / "dst" / "model-00001-of-00002.safetensors"
    os.utime(shard, (1, 1))  # not as the copy left it: not the file rsync proved
    answer = agent(tmp_path / "home2").manifest(str(tmp_path / "dst"), adopt=proof(source))
    assert answer.adopted == len(source.files) - 1 and answer.hashed_bytes == shard.stat().st_size
    assert answer.files == source.files  # hashed: the same bytes, found so


def test_a_write_after_the_proof_is_caught_even_with_size_and_mtime_put_back(tmp_path: Path) -> None:
    make_model(tmp_path / "src")
    source = agent(tmp_path / "home").manifest(str(tmp_path / "src"))
    copy_with_times(tmp_path / "src", tmp_path / "dst")
    node = agent(tmp_path / "home2")
    node.manifest(str(tmp_path / "dst"), adopt=proof(source))
    shard = tmp_path / "dst" / "model-00002-of-00002.safetensors"
    before = shard.stat()
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF  # one byte changed, same size
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))  # and its mtime put back
    after = node.manifest(str(tmp_path / "dst"))
    assert after.files[shard.name].sha256 == sha(shard) != source.files[shard.name].sha256


def transfer(tmp_path: Path, source: Path, target: Path, attest: dict[str, str]) -> dict[str, Any]:
    """The transfer script's send on the source node (home: tmp_path/home, where its manifest
    cache is), with a real local rsync: its final answer."""
    job = {
        "argv": list(rsync_argv(str(source), f"{target}/")),
        "files": sorted(attest),
        "attest": attest,
        "root": str(source),
        "default_rsh": "ssh",
        "relay": False,
        "host": "localhost",  # whom the remote shell would reach: a local rsync reaches none
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    done = subprocess.run(
        ["python3", "-", "transfer", str(tmp_path), "send", str(tmp_path / "job.json")],
        input=bundle("transfer"),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HOME": str(tmp_path / "home")},
    )
    answer: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return answer


def test_the_source_names_the_files_rsync_sent_whose_bytes_are_the_ones_it_hashed(tmp_path: Path) -> None:
    make_model(tmp_path / "src")
    source = agent(tmp_path / "home").manifest(str(tmp_path / "src"))
    answer = transfer(
        tmp_path, tmp_path / "src", tmp_path / "dst", {r: f.sha256 for r, f in source.files.items()}
    )
    assert answer["ok"] and answer["verified"] == sorted(source.files)
    assert agent(tmp_path / "home2").manifest(str(tmp_path / "dst")).files == source.files


def test_a_source_file_written_since_it_was_hashed_is_not_vouched_for(tmp_path: Path) -> None:
    make_model(tmp_path / "src")
    source = agent(tmp_path / "home").manifest(str(tmp_path / "src"))
    (tmp_path / "src" / "config.json").write_text('{"model_type": "y"}')  # after the manifest
    answer = transfer(
        tmp_path, tmp_path / "src", tmp_path / "dst", {r: f.sha256 for r, f in source.files.items()}
    )
    assert answer["ok"] and "config.json" not in answer["verified"]
    assert len(answer["verified"]) == len(source.files) - 1


def test_a_listed_file_rsync_did_not_send_is_not_vouched_for(tmp_path: Path) -> None:
    """rsync skips a file whose size and mtime match on the target, whatever its bytes: only a
    file it sent, and so checked, may be adopted."""
    make_model(tmp_path / "src")
    source = agent(tmp_path / "home").manifest(str(tmp_path / "src"))
    copy_with_times(tmp_path / "src", tmp_path / "dst")
    shard = tmp_path / "dst" / "model-00001-of-00002.safetensors"
    stat = shard.stat()
    shard.write_bytes(os.urandom(stat.st_size))  # other bytes, same size and mtime
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (tmp_path / "dst" / "config.json").unlink()
    answer = transfer(
        tmp_path, tmp_path / "src", tmp_path / "dst", {r: f.sha256 for r, f in source.files.items()}
    )
    assert answer["ok"] and answer["verified"] == ["config.json"]
