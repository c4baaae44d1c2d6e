"""diagnose: one bundle with everything a bug report needs, and no secret in it. Run through the
real node agent (FAKE vllm) here; on the real pair in tests/e2e/test_serving.py."""

from __future__ import annotations

import secrets
import tarfile
from pathlib import Path

import pytest
import yaml

from launcher.commands.diagnose import collect, write_bundle
from launcher.commands.down import down
from launcher.commands.reporter import Silent
from launcher.commands.up import UpOptions, up
from launcher.core.redact import redact
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
