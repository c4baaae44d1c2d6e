"""What is installed is what was reviewed: the router and the launcher's CI from hashed locks, and
the router reaching no one but its deployments."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from launcher.load import plan_fleet
from tests.conftest import ROOT

SCRIPTS = ROOT / "scripts"
ROUTER = ROOT / "launcher" / "catalogs"  # the router's lock and its install script ship with the launcher
ROUTER_LOCK = ROUTER / "router-requirements.txt"
CI_LOCK = ROOT / "requirements" / "ci.lock"
MULTI = ROOT / "configs" / "multi-2x-spark.yaml"
# What the router is told so that LiteLLM fetches nothing (core/endpoint.py says why each).
ROUTER_OFFLINE = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_LOCAL_POLICY_TEMPLATES": "True",
    "LITELLM_MODE": "PRODUCTION",
    "HF_HUB_OFFLINE": "1",
}


def locked(text: str) -> dict[str, tuple[str, dict[str, str]]]:
    """A lock written by scripts/lock.py: name -> (version, {file: sha256}), each file named in
    the comment lines above its package, in the order of its hashes."""
    packages: dict[str, tuple[str, dict[str, str]]] = {}
    files: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("# ") and line.endswith(".whl"):
            files.append(line[2:])
        elif re.match(r"^[a-z0-9][a-z0-9.-]*==\S+ \\$", line):
            name, version = line[:-2].split("==")
            hashes = []
            while True:
                entry = next(lines).strip()
                match = re.fullmatch(r"--hash=sha256:([0-9a-f]{64})( \\)?", entry)
                assert match, f"{name}: not a hash: {entry!r}"
                hashes.append(match[1])
                if not entry.endswith("\\"):
                    break
            assert len(hashes) == len(files), f"{name}: {len(files)} files named, {len(hashes)} hashes"
            packages[name] = (version, dict(zip(files, hashes, strict=True)))
            files = []
        else:
            assert not line or line.startswith("#"), f"not a pinned, hashed requirement: {line!r}"
    return packages


def test_the_locks_pin_every_package_to_one_version_with_a_hash_per_wheel() -> None:
    packages = locked(ROUTER_LOCK.read_text())
    assert {"litellm", "litellm-proxy-extras", "fastapi", "uvicorn", "openai", "pydantic"} <= set(packages)
    assert len(packages) > 60  # litellm[proxy]'s own dependencies, not litellm alone
    for name, (version, files) in [*packages.items(), *locked(CI_LOCK.read_text()).items()]:
        assert files and all(f.endswith(".whl") for f in files), name  # wheels only: nothing is built
        normalised = name.replace("-", "_")
        assert all(f.lower().startswith(f"{normalised}-{version}-") for f in files), (name, files)


@pytest.mark.parametrize("lock", [ROUTER_LOCK, CI_LOCK], ids=["router", "ci"])
def test_every_package_of_a_lock_has_a_wheel_for_every_target(lock: Path) -> None:
    text = lock.read_text()
    targets = re.search(r"^# targets: (.+)$", text, re.MULTILINE)
    assert targets is not None
    assert {"x86_64-3.11", "aarch64-3.12"} <= set(targets[1].split())  # the test bed and CI; DGX OS
    for target in targets[1].split():
        arch, python = target.split("-")
        cp = "cp" + python.replace(".", "")
        for name, (_, files) in locked(text).items():
            tags = [f.removesuffix(".whl").split("-")[-3:] for f in files]
            fits = [
                (py, abi, platform)
                for py, abi, platform in tags
                if (platform == "any" or arch in platform)
                and (cp in py.split(".") or abi in {"abi3", "none"})
            ]
            assert fits, f"{name}: no wheel for {target} in {files}"


def test_the_router_venv_installs_from_the_lock_alone_with_hashes_required() -> None:
    script = (ROUTER / "router-venv.sh").read_text()
    installs = [line for line in script.splitlines() if "pip install" in line and not line.startswith("#")]
    assert installs == [
        '"$venv/bin/python" -m pip install -q --require-hashes --no-deps --only-binary :all: '
        '-r "$requirements" >&2 </dev/null'
    ]
    assert "pip check" in script  # every package the router needs is in the lock


def router_script_copy(folder: Path, lock: str) -> Path:
    """router-venv.sh beside a lock of our own, for this machine's CPU and Python."""
    folder.mkdir()
    shutil.copy(ROUTER / "router-venv.sh", folder)
    (folder / "router-requirements.txt").write_text(lock)
    return folder / "router-venv.sh"


def where(script: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARK_LAUNCH_CACHE": str(tmp_path / "cache"), "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(script), "--where"], capture_output=True, text=True, env=env, check=False
    )


def test_the_router_venvs_cache_key_follows_the_lock(tmp_path: Path) -> None:
    target = f"{os.uname().machine}-{sys.version_info[0]}.{sys.version_info[1]}"
    lock = f"# targets: {target}\nlitellm==1.2.3 \\\n    --hash=sha256:{'0' * 64}\n"
    first = where(router_script_copy(tmp_path / "a", lock), tmp_path)
    again = where(router_script_copy(tmp_path / "b", lock), tmp_path)
    relocked = where(router_script_copy(tmp_path / "c", lock.replace("0" * 64, "1" * 64)), tmp_path)
    assert first.returncode == 0, first.stderr
    assert f"/venvs/router-litellm-1.2.3-py{sys.version_info[0]}.{sys.version_info[1]}-" in first.stdout
    assert again.stdout == first.stdout and relocked.stdout != first.stdout
    other = where(router_script_copy(tmp_path / "d", lock.replace(target, "riscv64-3.99")), tmp_path)
    assert other.returncode == 1 and f"has no wheels for {target}" in other.stderr


def test_the_router_environment_switches_off_every_remote_fetch_of_litellm(tmp_path: Path) -> None:
    data = yaml.safe_load(MULTI.read_text())
    data["env"] = {**data.get("env", {}), "LITELLM_MODE": "DEV", "LITELLM_LOCAL_MODEL_COST_MAP": "False"}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    for spec in (MULTI, path):
        endpoint = plan_fleet(spec).endpoint
        assert endpoint is not None
        assert {k: endpoint.env.get(k) for k in ROUTER_OFFLINE} == ROUTER_OFFLINE, spec


def test_the_router_is_told_every_local_switch_the_locked_litellm_reads() -> None:
    """Against the installed release (the venv `make router-venv` builds): LiteLLM names each
    remote fetch's switch LITELLM_LOCAL_*; a new one in a new release fails here."""
    venv = subprocess.run(
        ["bash", str(ROUTER / "router-venv.sh"), "--where"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not venv or not (Path(venv) / ".complete").exists():
        pytest.skip("the router venv is not built here: make router-venv")
    switches = set()
    for source in Path(venv).glob("lib/python3*/site-packages/litellm/**/*.py"):
        switches |= set(re.findall(r"\bLITELLM_LOCAL_[A-Z_]+\b", source.read_text(errors="replace")))
    assert "LITELLM_LOCAL_MODEL_COST_MAP" in switches
    assert switches <= set(ROUTER_OFFLINE)


def pyproject_requirements() -> dict[str, list[Requirement]]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 or newer, as CI
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {
        "build": [Requirement(r) for r in data["build-system"]["requires"]],
        "run": [Requirement(r) for r in data["project"]["dependencies"]],
        "dev": [Requirement(r) for r in data["project"]["optional-dependencies"]["dev"]],
    }


def test_the_launchers_dependencies_are_bounded_below_their_next_major() -> None:
    groups = pyproject_requirements()
    unbounded = [
        str(r) for r in groups["run"] + groups["dev"] if not any(s.operator == "<" for s in r.specifier)
    ]
    assert not unbounded  # an operator's plain `pip install` gets no untested major release


def test_the_ci_lock_pins_every_requirement_of_pyproject_within_its_bounds() -> None:
    packages = locked(CI_LOCK.read_text())
    groups = pyproject_requirements()
    click = Requirement("click>=8.2,<9")  # the command line's next dependency, locked ahead
    for requirement in [*groups["build"], *groups["run"], *groups["dev"], click]:
        name = canonicalize_name(requirement.name)
        assert name in packages, f"{requirement} is not in requirements/ci.lock: scripts/lock-ci.sh"
        version = packages[name][0]
        assert requirement.specifier.contains(version), f"{name}=={version} is not {requirement}"


def test_make_dev_installs_the_ci_lock_with_hashes_required_then_the_launcher_alone() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^\$\(BIN\)/pytest: (.*)\n\t(.*)$", makefile, re.MULTILINE)
    assert recipe is not None and "requirements/ci.lock" in recipe[1].split()
    assert recipe[2].split(" && ")[1:3] == [
        "$(BIN)/pip install -q --require-hashes --no-deps --only-binary :all: -r requirements/ci.lock",
        "$(BIN)/pip install -q --no-deps --no-build-isolation -e .",  # nothing fetched: no build isolation
    ]
    install = re.search(r"^\$\(BIN\)/spark-launch: .*\n\t(.*)$", makefile, re.MULTILINE)
    assert install is not None and "pip install -q -e ." in install[1]  # an operator's: plain pip


def test_security_md_names_every_switch_the_router_is_given_and_the_refresh_commands() -> None:
    text = (ROOT / "SECURITY.md").read_text()
    assert all(name in text for name in ROUTER_OFFLINE)
    assert all(
        s in text
        for s in ("scripts/lock-router.sh", "scripts/lock-ci.sh", "make lock", "requirements/ci.lock")
    )


def test_the_router_lock_and_its_install_script_ship_with_the_launcher() -> None:
    """`up` sends both to the head from an installed launcher (pipx), not only from a checkout."""
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert {"router-requirements.txt", "router-venv.sh"} <= set(data["launcher.catalogs"])
    assert ROUTER_LOCK.is_file() and (ROUTER / "router-venv.sh").is_file()
