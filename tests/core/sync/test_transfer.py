"""What a target lacks against the source, whether it has room, and the rsync that copies it. Pure."""

from __future__ import annotations

import pytest

from launcher.core.sync.model_manifest import (
    FileEntry,
    Manifest,
    Room,
    missing_parts,
    model_dirs,
    needs_weights,
)
from launcher.core.sync.transfer_plan import (
    CopyProgress,
    plan_transfer,
    remote_target,
    room_problems,
    rsync_argv,
)
from tests.conftest import base_spec, edit, spec_of

MB = 1_000_000


def manifest(
    files: dict[str, tuple[int, str]], free: int = 10**12, writable: bool = True, **kw: object
) -> Manifest:
    entries = {rel: FileEntry(size, sha) for rel, (size, sha) in files.items()}
    room = Room(free, 4096, "/models/m", writable, tuple(kw.get("unwritable", ())))  # type: ignore[arg-type]
    return Manifest("/models/m", True, entries, room=room)


SOURCE = {
    "config.json": (1000, "c"),
    "tokenizer.json": (2000, "t"),
    "a.safetensors": (100 * MB, "a"),
    "b.safetensors": (100 * MB, "b"),
    "c.safetensors": (100 * MB, "x"),
}


def test_each_file_is_sent_continued_replaced_or_removed_by_content() -> None:
    target = {
        "config.json": (1000, "c"),  # identical
        "tokenizer.json": (2000, "t"),  # identical
        "a.safetensors": (40 * MB, "partial"),  # shorter: continued
        "b.safetensors": (100 * MB, "one byte changed"),  # same size, other bytes: replaced
        "old.bin": (5 * MB, "o"),  # not on the source: removed
    }
    t = plan_transfer(manifest(SOURCE), manifest(target))
    assert (t.missing, t.resume, t.replace, t.extra) == (
        ("c.safetensors",),
        ("a.safetensors",),
        ("b.safetensors",),
        ("old.bin",),
    )
    assert t.identical == 2 and t.needed
    assert t.send_bytes == 100 * MB + 60 * MB + 100 * MB
    assert t.list_bytes == 300 * MB
    assert t.send == ("a.safetensors", "b.safetensors", "c.safetensors")
    assert t.remove == ("b.safetensors", "old.bin")


def test_an_identical_target_needs_nothing() -> None:
    t = plan_transfer(manifest(SOURCE), manifest(dict(SOURCE)))
    assert not t.needed and t.send_bytes == 0 and t.identical == 5


def test_a_target_too_small_is_refused_with_the_numbers() -> None:
    empty = Manifest("/models/m", False, room=Room(50 * MB, 4096, "/models", True))
    t = plan_transfer(manifest(SOURCE), empty)
    [problem] = room_problems("n2", t, empty)
    assert problem.startswith("not enough space on n2: the copy needs 300.0 MB (300019712 bytes)")
    assert "/models has 50.0 MB (50000000 bytes) free" in problem


def test_space_counts_what_is_removed_first() -> None:
    """A node holding a wrong copy of the same size has room for the right one."""
    wrong = {rel: (size, "other") for rel, (size, _) in SOURCE.items()}
    target = manifest(wrong, free=0)
    t = plan_transfer(manifest(SOURCE), target)
    assert t.need_bytes == 0 and room_problems("n2", t, target) == []


def test_what_cannot_be_written_is_refused() -> None:
    read_only = manifest({}, writable=False)
    t = plan_transfer(manifest(SOURCE), read_only)
    assert room_problems("n2", t, read_only) == ["cannot write /models/m on n2"]
    root_owned = manifest({"a.safetensors": (1, "a")}, unwritable=("a.safetensors",))
    t = plan_transfer(manifest(SOURCE), root_owned)
    assert room_problems("n2", t, root_owned) == ["cannot write /models/m/a.safetensors on n2"]


def test_a_complete_model_has_config_tokenizer_and_every_indexed_shard() -> None:
    m = Manifest(
        "/m",
        True,
        {"config.json": FileEntry(1, "c"), "a.safetensors": FileEntry(1, "a")},
        {"model.safetensors.index.json": ("a.safetensors", "b.safetensors")},
    )
    assert missing_parts(m) == [
        "a tokenizer (tokenizer.json, tokenizer.model, vocab.json, ...)",
        "b.safetensors (named in model.safetensors.index.json)",
    ]
    no_weights = Manifest("/m", True, {"config.json": FileEntry(1, "c"), "tokenizer.json": FileEntry(1, "t")})
    assert missing_parts(no_weights) == ["weights (*.safetensors, *.bin, ...)"]
    assert missing_parts(no_weights, weights=False) == []


def test_the_model_dirs_include_a_local_draft_model() -> None:
    spec = spec_of(
        edit(
            base_spec(),
            **{"serve.speculative_config": {"model": "/models/draft", "num_speculative_tokens": 2}},
        )
    )
    assert model_dirs(spec) == [("model", "/models/m"), ("draft model", "/models/draft")]
    hub = spec_of(
        edit(base_spec(), **{"serve.speculative_config": {"model": "org/draft", "num_speculative_tokens": 2}})
    )
    assert model_dirs(hub) == [("model", "/models/m")]
    assert needs_weights(spec) and not needs_weights(
        spec_of(edit(base_spec(), **{"serve.load_format": "dummy"}))
    )


@pytest.mark.parametrize(
    ("address", "ssh", "expected"),
    [
        ("10.0.0.2", "spark-2", "10.0.0.2:/models/m/"),
        ("10.0.0.2", "admin@192.168.1.12", "admin@10.0.0.2:/models/m/"),
        ("fd00::2", "spark-2", "[fd00::2]:/models/m/"),
    ],
)
def test_rsync_goes_to_the_fabric_address(address: str, ssh: str, expected: str) -> None:
    assert remote_target(address, ssh, "/models/m/") == expected


def test_rsync_continues_files_and_takes_its_list_on_stdin() -> None:
    argv = rsync_argv("/models/m", "10.0.0.2:/models/m/", bwlimit_kib=1000)
    assert argv[0] == "rsync" and argv[-2:] == ("/models/m/", "10.0.0.2:/models/m/")
    assert {"--append-verify", "--from0", "--files-from=-", "--info=progress2", "--bwlimit=1000"} <= set(argv)
    assert "--safe-links" in argv and "--copy-unsafe-links" not in argv  # nothing outside is read
    snapshot = rsync_argv("/hub/models--o--m/snapshots/r", "10.0.0.2:/x/", snapshot=True)
    assert "--copy-unsafe-links" in snapshot and "--safe-links" not in snapshot  # the blobs' content


def test_progress_rate_and_eta() -> None:
    p = CopyProgress(1000 * MB, started=0.0, at=0.0).advance(100 * MB, 1.0).advance(200 * MB, 2.0)
    assert p.done == 200 * MB and p.rate == pytest.approx(100 * MB)
    assert p.eta == pytest.approx(8.0)
    assert p.line("node2") == "node2       200.0 MB / 1.0 GB     20%  100.0 MB/s  ETA 0:08"
    assert p.advance(5 * MB, 3.0).done == 200 * MB  # never goes back
