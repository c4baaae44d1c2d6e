"""The link policy of model directories, on real files, through the node scripts as they are sent.

A Hugging Face cache snapshot (its files are links into the repository's blobs) is a model
like any other; a link inside the model is kept as a link; a link pointing outside, a loop,
a dangling link, a FIFO or a device (or a link to one) is refused and named, never read nor
followed; a link on a target is removed, never followed to delete. The hash cache lives in
the node user's own home, never where others may write.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from launcher.core.answers.sync_answer import manifest as read_manifest
from launcher.core.checks.model_rows import _directory_rows
from launcher.core.sync.model_manifest import FileEntry, LinkEntry, Manifest, missing_parts, refusals
from launcher.core.sync.transfer_plan import plan_transfer
from launcher.node.scripts import bundle
from launcher.node.scripts.tree import Changed, read_bounded
from tests.node_scripts import HANG, prepare


def manifest(path: Path, home: Path) -> dict[str, Any]:
    """The manifest script's answer, run as it is sent (python3 -, its source on stdin)."""
    home.mkdir(exist_ok=True)
    done = subprocess.run(
        ["python3", "-", "manifest", str(home / "run"), json.dumps({"path": str(path)})],
        input=bundle("manifest"),
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        timeout=HANG,
        check=True,
    )
    answer: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert answer["ok"], answer
    return answer


def parsed(path: Path, home: Path) -> Manifest:
    """The manifest script's answer as the agent reads it (strictly)."""
    return read_manifest(manifest(path, home), str(path))


def small_model(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text('{"model_type": "x"}')
    (root / "tokenizer.json").write_text("{}")
    (root / "model.safetensors").write_bytes(os.urandom(1 << 16))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def hf_snapshot(cache: Path) -> tuple[Path, dict[str, bytes]]:
    """models--org--name/snapshots/REV/* -> ../../blobs/<sha256>, as huggingface_hub lays it out."""
    repo = cache / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abcd"
    (snapshot / "sub").mkdir(parents=True)
    contents = {
        "config.json": b'{"model_type": "x"}',
        "tokenizer.json": b"{}",
        "model.safetensors": os.urandom(1 << 16),
        "sub/extra.txt": b"more",
    }
    for rel, data in contents.items():
        (repo / "blobs" / sha(data)).write_bytes(data)
        up = "../" * (rel.count("/") + 2)
        (snapshot / rel).symlink_to(f"{up}blobs/{sha(data)}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    return snapshot, contents


def test_a_hugging_face_snapshot_is_a_model_by_its_blobs_content(tmp_path: Path) -> None:
    snapshot, contents = hf_snapshot(tmp_path / "hub")
    m = parsed(snapshot, tmp_path / "home")
    assert m.files == {rel: FileEntry(len(data), sha(data)) for rel, data in contents.items()}
    assert m.links == {} and m.refused == {} and missing_parts(m) == [] and m.snapshot


def test_a_link_inside_the_model_is_kept_as_a_link_and_not_walked(tmp_path: Path) -> None:
    small_model(tmp_path / "m")
    (tmp_path / "m" / "sub").mkdir()
    (tmp_path / "m" / "sub" / "a.bin").write_bytes(b"a")
    (tmp_path / "m" / "alias.json").symlink_to("config.json")
    (tmp_path / "m" / "again").symlink_to("sub")
    (tmp_path / "m" / "sub" / "up").symlink_to("../tokenizer.json")
    m = parsed(tmp_path / "m", tmp_path / "home")
    assert m.links == {"again": "sub", "alias.json": "config.json", "sub/up": "../tokenizer.json"}
    assert sorted(m.files) == ["config.json", "model.safetensors", "sub/a.bin", "tokenizer.json"]
    assert m.refused == {} and missing_parts(m) == [] and not m.snapshot


def test_links_out_of_the_model_are_refused_and_named_never_followed(tmp_path: Path) -> None:
    small_model(tmp_path / "m")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.bin").write_bytes(b"not the model's")
    (tmp_path / "m" / "weights.bin").symlink_to(tmp_path / "outside" / "secret.bin")
    (tmp_path / "m" / "escape").symlink_to("../outside")
    (tmp_path / "m" / "gone.bin").symlink_to("nowhere.bin")
    m = parsed(tmp_path / "m", tmp_path / "home")
    assert m.refused == {
        "escape": "a link pointing outside the model directory (to ../outside)",
        "gone.bin": "a dangling link (to nowhere.bin)",
        "weights.bin": f"a link pointing outside the model directory (to {tmp_path}/outside/secret.bin)",
    }
    assert not any(rel.startswith("escape") for rel in m.files)
    assert refusals(m)[0].startswith("escape: a link pointing outside")


def test_a_link_loop_is_refused_once_and_no_file_is_listed_twice(tmp_path: Path) -> None:
    small_model(tmp_path / "m")
    (tmp_path / "m" / "sub").mkdir()
    (tmp_path / "m" / "sub" / "a.bin").write_bytes(b"a")
    (tmp_path / "m" / "sub" / "back").symlink_to("..")  # back to the top: a loop for a walker
    (tmp_path / "m" / "self").symlink_to("self")
    (tmp_path / "m" / "ping").symlink_to("pong")
    (tmp_path / "m" / "pong").symlink_to("ping")
    m = parsed(tmp_path / "m", tmp_path / "home")
    assert sorted(m.files) == ["config.json", "model.safetensors", "sub/a.bin", "tokenizer.json"]
    assert m.links == {"sub/back": ".."}
    assert m.refused == {"ping": "a link loop", "pong": "a link loop", "self": "a link loop"}


def test_a_fifo_a_socket_and_links_to_devices_are_named_and_never_read(tmp_path: Path) -> None:
    """Reading any of them would never end (a FIFO without a writer, /dev/zero): the answer
    comes, naming each, and the time guard (HANG) never fires."""
    import socket

    small_model(tmp_path / "m")
    os.mkfifo(tmp_path / "m" / "pipe.safetensors")
    (tmp_path / "m" / "zero.safetensors").symlink_to("/dev/zero")
    (tmp_path / "m" / "to-pipe.bin").symlink_to("pipe.safetensors")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "m" / "sock"))
        m = parsed(tmp_path / "m", tmp_path / "home")
    assert m.refused == {
        "pipe.safetensors": "a FIFO: never read",
        "sock": "a socket: never read",
        "to-pipe.bin": "a link to a FIFO: never read",
        "zero.safetensors": "a link to a character device outside the model directory (/dev/zero): "
        "never read",
    }
    assert sorted(m.files) == ["config.json", "model.safetensors", "tokenizer.json"]


def test_a_link_from_a_snapshot_to_a_fifo_in_its_blobs_is_refused(tmp_path: Path) -> None:
    snapshot, _ = hf_snapshot(tmp_path / "hub")
    os.mkfifo(snapshot.parent.parent / "blobs" / "pipe")
    (snapshot / "pipe.bin").symlink_to("../../blobs/pipe")
    m = parsed(snapshot, tmp_path / "home")
    assert m.refused == {"pipe.bin": "a link to a FIFO in the cache's blobs: never read"}


def test_check_fails_on_refused_entries_and_names_the_links_it_keeps() -> None:
    files = {"config.json": FileEntry(2, "c"), "tokenizer.json": FileEntry(2, "t")}
    good = Manifest("/m", True, files, links={"alias.json": "config.json"})
    links = {"alias.json": "config.json"}
    bad = Manifest("/m", True, files, links=links, refused={"x": "a FIFO: never read"})
    rows = {r.item: r for r in _directory_rows("model", "/m", {"n1": good, "n2": bad}, weights=False)}
    refused = rows["model: links and special files"]
    assert not refused.ok and refused.values == {"n1": "none", "n2": "x: a FIFO: never read"}
    assert "cp --remove-destination" in (refused.hint or "")
    rows = {r.item: r for r in _directory_rows("model", "/m", {"n1": good, "n2": good}, weights=False)}
    assert rows["model links kept as links"].values == {"n1": "alias.json -> config.json"} | {
        "n2": "alias.json -> config.json"
    }


def test_a_link_that_differs_between_nodes_is_a_difference() -> None:
    files = {"config.json": FileEntry(2, "c"), "tokenizer.json": FileEntry(2, "t")}
    one = Manifest("/m", True, files, links={"a": "config.json"})
    other = Manifest("/m", True, files, links={"a": "tokenizer.json"})
    assert one.digest != other.digest
    assert one.digest != Manifest("/m", True, files).digest == Manifest("/m", True, dict(files)).digest
    rows = [r for r in _directory_rows("model", "/m", {"n1": one, "n2": other}, weights=False) if not r.ok]
    assert [(r.item, r.values) for r in rows] == [
        ("a", {"n1": "a link to config.json", "n2": "a link to tokenizer.json"})
    ]


def test_the_copy_removes_what_a_target_refuses_and_replaces_links_and_files() -> None:
    source = Manifest(
        "/m",
        True,
        {"sub/x.bin": FileEntry(10, "x"), "a.json": FileEntry(3, "a")},
        links={"alias": "a.json", "same": "a.json"},
    )
    target = Manifest(
        "/m",
        True,
        {"alias": FileEntry(3, "a")},  # a file where the source has a link
        links={"a.json": "alias", "same": "a.json", "old": "a.json"},  # a link where it has a file
        refused={"sub": "a link pointing outside the model directory (to /etc)"},
    )
    t = plan_transfer(source, target)
    assert t.missing == ("sub/x.bin",) and t.replace == ("a.json", "alias")
    assert t.extra == ("old", "sub") and t.identical == 1
    assert t.remove == ("a.json", "alias", "old", "sub")  # `sub` itself: the link, not through it
    assert t.list_bytes == 13
    assert source.entries["alias"] == LinkEntry("a.json")


def test_a_link_on_a_target_is_never_followed_to_delete(tmp_path: Path) -> None:
    """A directory link in the target's model: what it points to survives, whatever the job says."""
    small_model(tmp_path / "m")
    (tmp_path / "outside").mkdir()
    victim = tmp_path / "outside" / "victim.bin"
    victim.write_bytes(b"not the model's")
    (tmp_path / "m" / "sub").symlink_to(tmp_path / "outside")
    answer = prepare(tmp_path, tmp_path / "m", ["sub/victim.bin"])
    assert victim.exists() and (tmp_path / "m" / "sub").is_symlink()
    assert answer["errors"] == ["sub/victim.bin: a link on the way: not followed"] and not answer["removed"]
    answer = prepare(tmp_path, tmp_path / "m", ["sub"])  # the link itself goes
    assert answer == {"ok": True, "removed": 1, "errors": []}
    assert victim.exists() and not (tmp_path / "m" / "sub").exists()


def test_the_cache_is_never_read_from_or_written_into_the_model_directory(tmp_path: Path) -> None:
    """Whoever may write the model directory could forge a cache there, or plant a link where a
    predictable temporary file would go: neither is used."""
    small_model(tmp_path / "m")
    real = manifest(tmp_path / "m", tmp_path / "fresh")["files"]
    st = (tmp_path / "m" / "model.safetensors").stat()
    key = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
    forged = {"version": 1, "files": {"model.safetensors": [*key, "0" * 64]}}
    (tmp_path / "m" / ".spark-launch-manifest.json").write_text(json.dumps(forged))
    (tmp_path / "victim").write_text("keep")
    for pid in range(os.getpid(), os.getpid() + 200):  # the old temporary name, for any next pid
        os.symlink(tmp_path / "victim", tmp_path / "m" / f".spark-launch-manifest.json.{pid}.tmp")
    answer = manifest(tmp_path / "m", tmp_path / "home")
    assert answer["files"] == real and (tmp_path / "victim").read_text() == "keep"
    assert Path(answer["cache"]).is_relative_to(tmp_path / "home")


def test_a_cache_folder_others_may_write_is_not_used(tmp_path: Path) -> None:
    small_model(tmp_path / "m")
    folder = tmp_path / "home" / ".cache" / "spark-launch" / "manifests"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    first = manifest(tmp_path / "m", tmp_path / "home")
    second = manifest(tmp_path / "m", tmp_path / "home")
    assert first["cache"] is None and not list(folder.iterdir())
    assert second["hashed_bytes"] == first["hashed_bytes"] > 0  # hashed again: nothing trusted


def test_hashing_reads_no_more_than_the_size_found(tmp_path: Path) -> None:
    path = tmp_path / "grown.bin"
    path.write_bytes(b"x" * 100)
    blocks: list[bytes] = []
    with pytest.raises(Changed, match="grew while it was hashed"):
        read_bounded(os.open(path, os.O_RDONLY), 60, bytearray(16), lambda v: blocks.append(bytes(v)))
    assert sum(map(len, blocks)) == 60
    with pytest.raises(Changed, match="shorter"):
        read_bounded(os.open(path, os.O_RDONLY), 200, bytearray(16), lambda v: None)
