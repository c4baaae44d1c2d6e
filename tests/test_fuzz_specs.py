"""Generated malformed and hostile specs keep the README's promises (a few hundred here;
`make fuzz` runs thousands and reports time and memory per call)."""

from __future__ import annotations

import random
import shlex
from collections import Counter
from pathlib import Path

import pytest
import yaml

from launcher.core import render
from launcher.errors import SpecError
from tests.conftest import ROOT
from tests.fuzz.promises import SECRET_VALUE, check_file
from tests.fuzz.specs import DATA_MUTATIONS, SECRET_NAMES, generate
from tests.fuzz.yaml_text import TEXT_MUTATIONS

SEED = 11
EXAMPLES = 300


@pytest.fixture(autouse=True)
def planted_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every secret a generated spec may name (the examples' endpoint key too) set to a value
    that must never be printed: `up --dry-run` judges them set, as `up` does."""
    for name in (*SECRET_NAMES, "SPARK_ENDPOINT_KEY"):
        monkeypatch.setenv(name, SECRET_VALUE)


def test_generated_specs_keep_every_promise(tmp_path: Path) -> None:
    broken, codes, seen = [], Counter(), Counter()
    for i in range(EXAMPLES):
        raw, applied = generate(random.Random(f"{SEED}-{i}"))
        path = tmp_path / f"spec-{i}.yaml"
        path.write_bytes(raw)
        outcome = check_file(path, trace=False)
        codes[outcome.code] += 1
        seen.update(applied)
        # Reproduce one with: generate(random.Random(f"{SEED}-{i}")).
        broken += [f"spec {i} {applied}: {b}" for b in outcome.broken]
    assert not broken, "\n".join(broken[:20])
    assert set(codes) == {0, 2}, codes  # some plan, most are refused; nothing else
    assert codes[0] >= EXAMPLES // 20, codes
    missing = {*DATA_MUTATIONS, *TEXT_MUTATIONS, "bad_utf8"} - set(seen)
    assert not missing, f"mutations never drawn: {missing}"


def _spec(tmp_path: Path, **serve: object) -> Path:
    data = yaml.safe_load((ROOT / "configs" / "qwen3-next-2x-spark.yaml").read_text())
    data["serve"].update(serve)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_checker_sees_a_shown_command_that_is_not_what_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _spec(tmp_path, chat_template="{{ a }}\n  b")
    assert check_file(path, trace=False).broken == []
    # POSIX quotes keep the line break raw; the plan's indentation then lands inside the word.
    monkeypatch.setattr(render, "shown_word", shlex.quote)
    assert any("differ from plan --json" in b for b in check_file(path, trace=False).broken)


def test_the_checker_sees_an_unlocated_or_multi_line_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text('name: t\n"a\\nb": 1\n')
    assert check_file(path, trace=False).broken == []

    def raw_render(self: SpecError) -> str:
        return "\n".join(f"{self.filename}:1: {p.dotted}: {p.message}" for p in self.problems)

    monkeypatch.setattr(SpecError, "render", raw_render)
    assert any("unlocated problem line" in b for b in check_file(path, trace=False).broken)


def test_the_checker_sees_an_exception_and_an_option_smuggled_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from launcher.core import plan

    path = _spec(tmp_path)
    monkeypatch.setattr(plan, "_served_name", lambda spec, catalog: ["--privileged"])
    assert any("is no flag of vLLM" in b for b in check_file(path, trace=False).broken)

    def crash(spec: object, catalog: object) -> list[str]:
        raise IndexError("planted")

    monkeypatch.setattr(plan, "_served_name", crash)
    assert any("exception out of main: IndexError" in b for b in check_file(path, trace=False).broken)
