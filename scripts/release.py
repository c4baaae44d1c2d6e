#!/usr/bin/env python3
"""The release machine: the machine's part of supporting a new vLLM release.

    .venv/bin/python scripts/release.py VERSION      # `make release VERSION=0.34.0`

1. installs VERSION (scripts/vllm-venv.sh: cached by version and Python);
2. writes its catalog (scripts/gen_catalog.py, with its own python);
3. resolves the conformance tier's commands (tests/conformance: every case of model kind,
   prefix caching, chunked prefill, MTP and tensor/pipeline layout, planned for each release,
   on its tiny synthetic models) with VERSION and with the newest supported release before
   it, on vLLM's CPU platform, the two at once;
4. compares every field of the resolved configs, the two catalogs and the APIs the node
   scripts use (scripts/release_apis.py), and writes launcher/catalogs/report-VERSION.md.

It exits 1 while a change is not covered by the review file (launcher/catalogs/review-VERSION.json:
a rule, a row of `check`, a change of the node scripts, or "no effect on agreement" with its
reason), and prints what is not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from launcher.catalogs import CATALOG_DIR, known_versions  # noqa: E402
from launcher.core.spec.versions import parse  # noqa: E402
from scripts import release_report  # noqa: E402
from tests.conformance.conftest import Answers, cpu_env, jobs_of, run_probe, venv_for  # noqa: E402
from tests.conformance.models import write_models  # noqa: E402


def write_catalog(version: str, python: Path) -> None:
    """The release's catalog, from its own package."""
    out = CATALOG_DIR / f"vllm-{version}.json"
    subprocess.run([str(python), str(ROOT / "scripts" / "gen_catalog.py"), str(out)], check=True)


def apis(version: str, python: Path) -> dict[str, Any]:
    """What the release offers of the node scripts' APIs (scripts/release_apis.py, its own python)."""
    done = subprocess.run(
        [str(python), str(ROOT / "scripts" / "release_apis.py")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **cpu_env(version)},
    )
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def resolved(version: str, where: Path, models: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Every conformance command, resolved by `version`, by key ("plan/hybrid/1", ...)."""
    answers = Answers(version, where)
    jobs = jobs_of(answers, models)
    return {"/".join(k): r for k, r in zip(jobs, run_probe(where, jobs.values(), version), strict=True)}


def baseline_of(version: str) -> str:
    """The newest supported release before `version`."""
    older = [v for v in known_versions() if parse(v) < parse(version)]
    if not older:
        raise SystemExit(f"release.py: no supported release before {version} to compare with")
    return older[-1]


def main(argv: list[str]) -> int:
    """Install, catalog, resolve, compare, report; 1 while a change is not covered."""
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    version = argv[0]
    began = time.monotonic()
    new = venv_for(version)
    write_catalog(version, new / "bin" / "python")
    baseline = baseline_of(version)
    old = venv_for(baseline)
    print(f"release: {version} against {baseline} ({time.monotonic() - began:.0f} s so far)", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="spark-launch-release-") as tmp:
        models = write_models(Path(tmp), old / "bin" / "python")
        pairs = ((baseline, old), (version, new))
        with ThreadPoolExecutor(2) as pool:  # the two releases at once: each its own processes
            resolving = {v: pool.submit(resolved, v, w, models) for v, w in pairs}
            asking = {v: pool.submit(apis, v, w / "bin" / "python") for v, w in pairs}
            results = {v: f.result() for v, f in resolving.items()}
            found = {v: f.result() for v, f in asking.items()}
        catalogs = {v: json.loads((CATALOG_DIR / f"vllm-{v}.json").read_text()) for v in (baseline, version)}
        report = release_report.build(
            version, baseline, results, catalogs, found, [tmp], release_report.read_entries(version)
        )
    path = release_report.report_file(version)
    path.write_text(release_report.render(report))
    print(f"release: wrote {path.relative_to(ROOT)} ({time.monotonic() - began:.0f} s)", file=sys.stderr)
    for problem in report.problems:
        print(f"release: {problem}", file=sys.stderr)
    if not report.ok:
        print(
            f"release: cover each change in {release_report.review_file(version).relative_to(ROOT)} "
            "(a rule, a check row, the probe, or no effect, with why), then run it again",
            file=sys.stderr,
        )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
