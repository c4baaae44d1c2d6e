"""The project stands alone: nothing in it points at documents or paths outside the repository."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT

OUTSIDE = re.compile(r"\.\./shared|/work/|shared/(PROBLEM|TESTBED|VLLM|STYLE)\.md")


def test_no_file_points_outside_the_repository() -> None:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    hits = []
    for name in files:
        path = ROOT / name
        if not path.is_file() or path.suffix in (".json",) or name == "tests/test_repository.py":
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{name}:{number}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_no_link_in_the_repository_points_back_up_its_own_path() -> None:
    """A link to one of its own ancestors is a loop: every walk that follows links (setuptools'
    file list in `pip install -e .`, the first step of `make test`) would never end."""
    staged = subprocess.run(
        ["git", "ls-files", "--stage", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    links = [line.split("\t", 1)[1] for line in staged if line.startswith("120000 ")]
    loops = [
        name
        for name in links
        if (ROOT / name).resolve() in (ROOT / name).parents or (ROOT / name).resolve() == ROOT
    ]
    assert not loops, loops
