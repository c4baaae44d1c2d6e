"""Every value that reaches argv, an environment or a shell is typed and ranged: refused,
never coerced, never read as an option; and the plan shows each word exactly as it runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from launcher.core.render import pretty_command, shown_word
from launcher.core.views import plan_text
from launcher.errors import SpecError
from launcher.load import catalog_for, plan_file, read_model_facts
from tests.conftest import base_spec, edit, plan_of, spec_of, write


def hybrid_spec() -> dict[str, Any]:
    """The base spec with its model declared hybrid: it plans where its config.json is not."""
    return edit(base_spec(), **{"model.hybrid": True})


DOCKER = {"vllm.runtime": "docker", "vllm.image": "nvcr.io/nvidia/vllm:26.05-py3", "vllm.venv": None}


def problems(tmp_path: Path, **changes: Any) -> list[str]:
    """The spec's report lines without the file and line: `key.path: message`."""
    with pytest.raises(SpecError) as caught:
        plan_file(write(tmp_path, edit(hybrid_spec(), **changes)))
    return [f"{p.dotted}: {p.message}" + (f" ({p.hint})" if p.hint else "") for p in caught.value.problems]


# -- refused, not coerced ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"serve.tensor_parallel_size": 0},
            "serve.tensor_parallel_size: must be a positive integer, got 0 (1 or more)",
        ),
        (
            {"serve.tensor_parallel_size": False},
            "serve.tensor_parallel_size: expected an integer, got False "
            "(--tensor-parallel-size takes an integer)",
        ),
        (
            {"serve.tensor_parallel_size": ""},
            "serve.tensor_parallel_size: expected an integer, got '' "
            "(--tensor-parallel-size takes an integer)",
        ),
        (
            {"serve.tensor_parallel_size": []},
            "serve.tensor_parallel_size: expected an integer, got [] "
            "(--tensor-parallel-size takes an integer)",
        ),
        (
            {"serve.pipeline_parallel_size": 0},
            "serve.pipeline_parallel_size: must be a positive integer, got 0 (1 or more)",
        ),
        (
            {"serve.mamba_block_size": True},
            "serve.mamba_block_size: expected an integer, got True (--mamba-block-size takes an integer)",
        ),
        ({"serve.master_port": 0}, "serve.master_port: must be a port number, got 0 (1 to 65535)"),
        (
            {"serve.seed": 2**64},
            f"serve.seed: {2**64} is out of range for an integer option (at most 2**63 - 1)",
        ),
        (
            {"serve.gpu_memory_utilization": float("inf")},
            "serve.gpu_memory_utilization: must be a finite number, got inf "
            "(write a number, not .inf or .nan)",
        ),
        ({"nodes.0.gpus": 0}, "nodes[0].gpus: must be between 1 and 64, got 0 (a DGX Spark has 1)"),
        (
            {"nodes.0.address": "fe80::1%eth 0"},
            "nodes[0].address: 'fe80::1%eth 0': the scope 'eth 0' is not a network device name "
            "(vLLM binds to it (VLLM_HOST_IP): give the node's fabric IP, not a name)",
        ),
        (
            {"nodes.0.address": "0.0.0.0"},
            "nodes[0].address: '0.0.0.0' is not the address of one node "
            "(vLLM binds to it (VLLM_HOST_IP): give the node's fabric IP, not a name)",
        ),
        (
            {"env": {"X": "a\nb"}},
            "env.X: the value 'a\\nb' holds a line break "
            "(environment values are one line (a docker env file cannot hold more))",
        ),
        (
            {"ssh_config": "~root/.ssh/config"},
            "ssh_config: only a leading ~/ is expanded (write the path out)",
        ),
    ],
    ids=lambda v: str(v)[:40] if isinstance(v, dict) else "",
)
def test_values_are_refused_not_coerced(tmp_path: Path, changes: dict[str, Any], expected: str) -> None:
    assert problems(tmp_path, **changes) == [expected]


# -- no value becomes an option -------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {**DOCKER, "vllm.image": "--privileged"},
            "vllm.image: '--privileged' is not a container image reference "
            "(e.g. nvcr.io/nvidia/vllm:26.05-py3 (a word of `docker run`: no spaces, no leading '-'))",
        ),
        (
            {"nodes.0.ssh": "-oProxyCommand=touch /tmp/x"},
            "nodes[0].ssh: '-oProxyCommand=touch /tmp/x' is not an ssh target "
            "(use an ssh_config alias or user@host[:port] (no spaces, no leading '-', port 1-65535))",
        ),
        (
            {"nodes.0.ssh": "admin@spark-1:99999"},
            "nodes[0].ssh: 'admin@spark-1:99999' is not an ssh target "
            "(use an ssh_config alias or user@host[:port] (no spaces, no leading '-', port 1-65535))",
        ),
        (
            {"nodes.0.ssh": "spark-1;touch${IFS}/tmp/x"},
            "nodes[0].ssh: 'spark-1;touch${IFS}/tmp/x' is not an ssh target "
            "(use an ssh_config alias or user@host[:port] (no spaces, no leading '-', port 1-65535))",
        ),
        (
            {"nodes.0.ssh": "$(reboot)@spark-1"},
            "nodes[0].ssh: '$(reboot)@spark-1' is not an ssh target "
            "(use an ssh_config alias or user@host[:port] (no spaces, no leading '-', port 1-65535))",
        ),
        (
            {"nodes.0.ssh": "zero\u200bwidth"},
            "nodes[0].ssh: 'zero\\u200bwidth' is not an ssh target "
            "(use an ssh_config alias or user@host[:port] (no spaces, no leading '-', port 1-65535))",
        ),
        (
            {"nodes.0.interface": "-eth0"},
            (
                "nodes[0].interface: '-eth0' is not a network device name "
                "(the name `ip link` shows, e.g. enp1s0f0np0)"
            ),
        ),
        (
            {"model.served_name": "--api-key=x"},
            "model.served_name: '--api-key=x' cannot be a served model name "
            "(use a one-line name that does not start with '-')",
        ),
        (
            {"serve.allowed_media_domains": ["a", "--trust-remote-code"]},
            "serve.allowed_media_domains: needs a non-empty list, and no item may start with '-' "
            "(write [a, b], each item a word)",
        ),
        ({"vllm.venv": "/opt/a=b"}, "vllm.venv: '/opt/a=b' holds '=' (use a venv path without '=')"),
        (
            {**DOCKER, "model.path": "/m:/etc:rw"},
            "model.path: '/m:/etc:rw' holds ':', which docker --volume reads as a separator "
            "(move or link the model to a path without ':')",
        ),
    ],
    ids=lambda v: str(v)[:40] if isinstance(v, dict) else "",
)
def test_no_value_can_become_an_option(tmp_path: Path, changes: dict[str, Any], expected: str) -> None:
    assert problems(tmp_path, **changes) == [expected]


# -- the plan shows each word exactly ----------------------------------------------------------
def bash_words(text: str) -> list[str]:
    done = subprocess.run(["bash", "-c", f"printf '%s\\0' {text}"], capture_output=True, check=True)
    return done.stdout.decode().split("\0")[:-1]


def test_a_word_with_a_line_break_or_invisible_character_is_shown_in_dollar_quotes() -> None:
    assert shown_word("{{ a }}\n  it's \\ \u202e") == "$'{{ a }}\\n  it\\'s \\\\ \\xe2\\x80\\xae'"
    assert shown_word("a b") == "'a b'"
    argv = ["/opt/vllm/bin/vllm", "serve", "/m", "--chat-template={{ a }}\n  b", "--x=\t\u200b"]
    assert pretty_command(argv) == (
        "/opt/vllm/bin/vllm serve /m \\\n"
        "    $'--chat-template={{ a }}\\n  b' \\\n"
        "    $'--x=\\t\\xe2\\x80\\x8b'"
    )
    assert bash_words(pretty_command(argv)) == argv


def test_the_plan_text_is_what_runs(tmp_path: Path) -> None:
    data = edit(hybrid_spec(), **{"serve.chat_template": "{{ a }}\n  b", "env": {"ODD": "tab\there"}})
    plan = plan_of(data)
    text = plan_text(plan)
    assert "  ODD=$'tab\\there'" in text
    assert "      $'--chat-template={{ a }}\\n  b' \\" in text
    block = text.split("\n== n2 (rank 1, headless) via ssh n2\n")[1].split("\n\n")[0].splitlines()
    command = "\n".join(block[len(plan.nodes[1].env) :])
    assert bash_words(command) == list(plan.nodes[1].argv)
    assert json.loads(json.dumps(list(plan.nodes[1].argv)))[-3] == "{{ a }}\n  b".join(
        ["--chat-template=", ""]
    )


@pytest.mark.parametrize(
    ("config", "hybrid"),
    [("[" * 100_000 + "]" * 100_000, None), ('{"architectures": 5}', None), ("1" * 5000, None)],
    ids=["nested without end", "architectures not a list", "a number too long"],
)
def test_a_hostile_config_json_never_stops_the_plan(tmp_path: Path, config: str, hybrid: bool | None) -> None:
    (tmp_path / "config.json").write_text(config)
    spec = spec_of(edit(base_spec(), **{"model.path": str(tmp_path), "model.hybrid": None}))
    facts = read_model_facts(spec, catalog_for(spec))
    assert facts.hybrid is hybrid and facts.kind is None
