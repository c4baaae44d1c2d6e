"""diagnose: one bundle with everything a bug report needs, and no secret in it. Run through the
real node agent (FAKE vllm) here; on the real pair in tests/e2e/test_serving.py."""

from __future__ import annotations

import secrets
import tarfile
from pathlib import Path

import pytest
import yaml

from launcher.commands.diagnose import collect, node_files, write_bundle
from launcher.core.redact import redact
from launcher.operations.reporter import Silent
from launcher.operations.running.starting import UpOptions, up
from launcher.operations.running.stopping import down
from tests.conftest import ROOT, base_spec, free_port, local_cluster

SECRET = "sk-planted-" + secrets.token_hex(8)


def test_known_values_and_secret_looking_assignments_are_redacted() -> None:
    text = (
        f"token {SECRET}; HF_TOKEN={SECRET}x api_key: 'abc123' Authorization: Bearer eyJabc.def "
        "max_num_batched_tokens=8192"
    )
    out = redact(text, [SECRET])
    assert SECRET not in out and "abc123" not in out and "eyJabc" not in out
    assert "HF_TOKEN=<redacted>" in out and "max_num_batched_tokens=8192" in out


def test_the_bundle_holds_every_part_and_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "vllm").symlink_to(ROOT / "tests" / "fakes" / "vllm")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("SPARK_TEST_TOKEN", raising=False)  # known only to the running processes
    data = {**base_spec("0.32.0", nodes=2), "secrets": ["SPARK_TEST_TOKEN"]}
    data["vllm"]["venv"] = str(venv)
    data["serve"]["port"] = free_port()
    spec_path = tmp_path / "cluster.yaml"
    spec_path.write_text(yaml.safe_dump(data))
    cluster = local_cluster(data, tmp_path / "home")
    up(cluster, {"SPARK_TEST_TOKEN": SECRET}, UpOptions(timeout=60, check=False, grace=2), Silent())
    try:
        state = tmp_path / "home" / ".spark-launch" / cluster.spec.name / "n2" / "logs"
        log = next(state.glob("*.log"))
        with log.open("a") as f:  # as if the engine had printed it
            f.write(f"DEBUG loaded token {SECRET} from the environment\n")
        files = collect(cluster, str(spec_path), {}, Silent(), lines=50)
    finally:
        down(cluster, 2, Silent())
    bundle = tmp_path / "bundle.tar.gz"
    write_bundle(files, str(bundle), "diag")
    with tarfile.open(bundle) as tar:
        names = set(tar.getnames())
        blobs = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())  # type: ignore[union-attr]
    for part in ("spec.yaml", "plan.json", "plan.txt", "check.json", "status.json", "launcher.json"):
        assert f"diag/{part}" in names
    for node in ("n1", "n2"):
        for part in (
            "nvidia-smi-q.txt",
            "ip-addr.txt",
            "rdma-link.txt",
            "dmesg-tail.txt",
            "versions.json",
            "state.json",
        ):
            assert f"diag/nodes/{node}/{part}" in names
        assert any(n.startswith(f"diag/nodes/{node}/logs/") for n in names)
    assert b"loaded token <redacted> from the environment" in blobs
    assert SECRET.encode() not in blobs
    assert b'"state": "serving"' in blobs  # the watchdog's verdict, in status.json


def test_the_bundle_is_mode_0600_even_over_a_file_of_another_mode_or_a_link(tmp_path: Path) -> None:
    out = tmp_path / "bundle.tar.gz"
    out.write_text("an older bundle")
    out.chmod(0o644)
    write_bundle({"a.txt": "x"}, str(out), "diag")
    assert out.stat().st_mode & 0o777 == 0o600 and tarfile.is_tarfile(out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep")
    link = tmp_path / "link.tar.gz"
    link.symlink_to(elsewhere)
    write_bundle({"a.txt": "x"}, str(link), "diag")
    assert elsewhere.read_text() == "keep" and not link.is_symlink()
    assert link.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.tar.gz", "elsewhere", "link.tar.gz"]


def test_the_bundle_names_its_members_itself_whatever_a_node_calls_them(tmp_path: Path) -> None:
    found = {
        "../../../etc/cron.d/evil": "a",
        "/root/.ssh/authorized_keys": "b",
        "logs/20260101-000000-abcd.log": "c",
        ".hidden": "d",
        "ok\x1b[2Jname": "e",
        "logs/../../up": "f",
    }
    files = node_files("n1", found)
    out = tmp_path / "bundle.tar.gz"
    write_bundle(files, str(out), "diag")
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert all(n.startswith("diag/nodes/n1/") and ".." not in n.split("/") for n in names)
    assert "diag/nodes/n1/logs/20260101-000000-abcd.log" in names
    assert len([n for n in names if "/unnamed-" in n]) == 5
    renamed = next(text for name, text in files.items() if text.endswith("\na"))
    assert renamed.startswith("(the node called this file '../../../etc/cron.d/evil')")
    assert "\x1b" not in "".join(text.split("\n")[0] for text in files.values())
