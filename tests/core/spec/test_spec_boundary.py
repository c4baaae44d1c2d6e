"""The spec boundary is total: each class of hostile input found by fuzzing, pinned with its
exact report. Every report line is `file:line: key.path: message` (or its hint)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from launcher.catalogs import load_catalog
from launcher.core.spec.yamlsource import MAX_VALUES
from launcher.errors import SparkLaunchError, SpecError
from launcher.load import plan_file
from tests.conftest import ROOT, base_spec, edit, write


def hybrid_spec() -> dict[str, Any]:
    """The base spec with its model declared hybrid: it plans where its config.json is not."""
    return edit(base_spec(), **{"model.hybrid": True})


SPEC = """\
name: t
vllm: {version: "0.32.0", venv: /opt/vllm}
nodes:
  - {name: n1, ssh: n1, address: 10.0.0.1, interface: eth0}
  - {name: n2, ssh: n2, address: 10.0.0.2, interface: eth0}
model: {path: /models/m, hybrid: true}
serve:
  tensor_parallel_size: 2
"""


def report(path: Path) -> str:
    """What `validate` prints for the spec at `path`, with the file shown as s.yaml."""
    with pytest.raises(SpecError) as caught:
        plan_file(path)
    return caught.value.render().replace(str(path), "s.yaml")


def report_text(tmp_path: Path, text: str | bytes) -> str:
    path = tmp_path / "s.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return report(path)


def report_data(tmp_path: Path, **changes: Any) -> str:
    return report(write(tmp_path, edit(hybrid_spec(), **changes), "s.yaml"))


# -- what used to end in a traceback --------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            SPEC.replace(
                "nodes:\n  - {name: n1, ssh: n1, address: 10.0.0.1, interface: eth0}\n", "nodes: []\n"
            ).replace("  - {name: n2, ssh: n2, address: 10.0.0.2, interface: eth0}\n", ""),
            "s.yaml:3: nodes: needs at least one node\n    hint: list the machines; the first is rank 0",
        ),
        (
            SPEC + "  seed: " + "9" * 5000 + "\n",
            "s.yaml:9: serve.seed: a number of 5000 characters is not a usable value",
        ),
        (
            SPEC + "  x: " + "[" * 40 + "]" * 40 + "\n",
            "s.yaml:9: serve.x[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]"
            "[0][0][0][0][0]: nested deeper than 32 levels",
        ),
        (
            SPEC + "  speculative_config: &c {method: mtp, again: *c}\n",
            "s.yaml:9: serve.speculative_config.again: an alias refers to a value that contains it "
            "(a recursive structure)\n    hint: remove the alias",
        ),
        (
            SPEC.replace("name: t", "name: t\x07"),
            "s.yaml:1: (top level): the file holds the character '\\x07', which YAML does not allow\n"
            '    hint: write it as an escape inside double quotes, e.g. "\\x07"',
        ),
        (
            SPEC + "  seed: !!int 0x\n",
            "s.yaml:9: serve.seed: '0x' is not a valid integer: invalid literal for int() with base 16: ''\n"
            "    hint: quote it to keep it as text",
        ),
        (
            SPEC + "  enforce_eager: !!bool 2\n",
            "s.yaml:9: serve.enforce_eager: '2' is not a valid boolean: '2'\n"
            "    hint: quote it to keep it as text",
        ),
        (
            SPEC + "  x: 2024-13-45\n",
            "s.yaml:9: serve.x: '2024-13-45' is not a valid date: month must be in 1..12\n"
            "    hint: quote it to keep it as text",
        ),
    ],
    ids=["empty nodes", "huge int", "deep", "recursive alias", "control byte", "!!int", "!!bool", "bad date"],
)
def test_inputs_that_crashed_are_located_problems(tmp_path: Path, text: str, expected: str) -> None:
    assert report_text(tmp_path, text) == expected


def test_bytes_that_are_not_utf8_are_a_located_problem(tmp_path: Path) -> None:
    assert report_text(tmp_path, SPEC.encode().replace(b"name: t", b"name: t\xff")) == (
        "s.yaml:1: (top level): not UTF-8 text: byte 0xff at column 8\n    hint: save the file as UTF-8"
    )


def test_dates_sets_and_binary_never_become_json_arguments(tmp_path: Path) -> None:
    text = SPEC + (
        "  speculative_config: {method: mtp, num_speculative_tokens: 2, when: 2024-01-01,\n"
        "    s: !!set {a}, b: !!binary aGk=, 1: x, n: .nan}\n"
    )
    assert report_text(tmp_path, text) == (
        "s.yaml:9: serve.speculative_config.when: a date is not a value a command line can take\n"
        "    hint: quote it to make it text\n"
        "s.yaml:10: serve.speculative_config.s: a set (!!set) is not a value a command line can take\n"
        "    hint: write a list\n"
        "s.yaml:10: serve.speculative_config.b: "
        "binary data (!!binary) is not a value a command line can take\n"
        "    hint: quote it to make it text\n"
        "s.yaml:10: serve.speculative_config.1: a key must be text, got an integer\n"
        "    hint: quote it\n"
        "s.yaml:10: serve.speculative_config.n: must be a finite number, got nan\n"
        "    hint: write a number, not .inf or .nan"
    )


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # The pooling rule refuses, so prefix caching is never decided; the mamba rule needs it.
        # (Chunked prefill has its own reason to be written for a pooling model.)
        (
            {"serve.runner": "pooling", "serve.enable_prefix_caching": None},
            "s.yaml:18: serve.enable_prefix_caching: must be set explicitly for a pooling model\n"
            "    hint: vLLM's default for a pooling model depends on its pooler (the pooling type, and "
            "whether the attention is causal); write true or false\n"
            "s.yaml:18: serve.enable_chunked_prefill: must be set explicitly for a pooling model\n"
            "    hint: vLLM's default for a pooling model depends on its pooler (the pooling type, and "
            "whether the attention is causal); write true or false",
        ),
        (
            {"serve.enable_prefix_caching": "yes"},
            "s.yaml:20: serve.enable_prefix_caching: expected true or false, got 'yes'\n"
            "    hint: write true or false",
        ),
        # Not read as unset (prefix caching on), which would refuse mamba_cache_mode: none too.
        (
            {"serve.enable_prefix_caching": "no", "serve.mamba_cache_mode": "none"},
            "s.yaml:20: serve.enable_prefix_caching: expected true or false, got 'no'\n"
            "    hint: write true or false",
        ),
    ],
)
def test_a_value_one_rule_refuses_is_reported_once_and_read_by_no_later_rule(
    tmp_path: Path, changes: dict[str, Any], expected: str
) -> None:
    assert report_data(tmp_path, **changes) == expected


def test_a_version_that_would_name_a_long_file_is_refused_first(tmp_path: Path) -> None:
    long = "0.33.0+" + "x" * 300
    assert report_data(tmp_path, **{"vllm.version": long}) == (
        f"s.yaml:3: vllm.version: {long!r} is not a version number\n    hint: write the version the nodes "
        'report (PEP 440), quoted: "0.33.0", "0.33.0+cu130", "0.33.1.dev45+g7ee8a6dd0"'
    )
    assert report_data(tmp_path, **{"vllm.version": "9" * 300, "vllm.flags_from": "0.33.0"}).startswith(
        f"s.yaml:3: vllm.version: '{'9' * 300}' is not a version number"
    )
    with pytest.raises(SparkLaunchError, match="no flag catalog"):  # the known list, before any file
        load_catalog("9" * 5000)


# -- bounded work ---------------------------------------------------------------------
def test_an_alias_bomb_is_refused_without_expanding_it(tmp_path: Path) -> None:
    levels = [f"  l0: &l0 [{', '.join(['x'] * 9)}]"]
    levels += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]  # 9**10 values
    assert report_text(tmp_path, SPEC + "\n".join(levels) + "\n") == (
        f"s.yaml:13: serve.l4: aliases expand to more than {MAX_VALUES} values here\n"
        "    hint: write the values out, or use fewer nested aliases"
    )


@pytest.mark.parametrize("item", ["1", "!!str x", "*a"], ids=["plain", "tagged", "aliases"])
def test_a_file_of_many_values_stops_loading_at_the_limit(tmp_path: Path, item: str) -> None:
    text = SPEC + f"  a: &a 1\n  x: [{', '.join([item] * MAX_VALUES)}]\n"
    assert report_text(tmp_path, text) == (
        f"s.yaml:10: (top level): the file holds more than {MAX_VALUES} values; a spec needs a few hundred"
    )


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    assert report_text(tmp_path, SPEC + "#" * (256 << 10)) == (
        "s.yaml:1: (top level): the file is larger than 256 KiB; a spec is a few KiB"
    )


# -- one line per problem, shown exactly ----------------------------------------------
def test_keys_values_and_file_names_with_line_breaks_stay_one_line(tmp_path: Path) -> None:
    path = tmp_path / "odd\nname.yaml"
    path.write_text(
        SPEC.replace("model: {path: /models/m,", 'model: {served_name: "a\\nb", path: /models/m,')
        + '  "x\\ny": 1\n'
    )
    with pytest.raises(SpecError) as caught:
        plan_file(path)
    assert caught.value.render().replace(str(tmp_path), "D") == (
        "D/odd\\nname.yaml:9: serve.x\\ny: is not a `vllm serve` option in vLLM 0.32.0\n"
        "    hint: see `vllm serve --help=all`\n"
        "D/odd\\nname.yaml:6: model.served_name: 'a\\nb' cannot be a served model name\n"
        "    hint: use a one-line name that does not start with '-'"
    )


def test_escape_bytes_reach_a_pipe_as_visible_escapes(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text((ROOT / "configs" / "demo.yaml").read_text().replace("tiny-qwen3-next", '"\\e[31mred"'))
    line = next(i for i, text in enumerate(spec.read_text().splitlines(), 1) if "served_name:" in text)
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "validate", str(spec)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2, done.stderr
    assert (
        f"{spec}:{line}: model.served_name: '\\x1b[31mred' contains the control character '\\x1b'"
        in done.stderr
    )
    assert "\x1b" not in done.stderr


def test_a_nul_byte_never_reaches_argv_or_env(tmp_path: Path) -> None:
    assert report_data(tmp_path, **{"env": {"X": "a\0b"}, "serve.chat_template": "t\0"}) == (
        "s.yaml:22: serve.chat_template: 't\\x00' contains a NUL character, "
        "which no command line, environment or file name can hold\n"
        "    hint: remove the control character (a stray paste?)\n"
        "s.yaml:24: env.X: 'a\\x00b' contains a NUL character, "
        "which no command line, environment or file name can hold\n"
        "    hint: remove the control character (a stray paste?)"
    )
