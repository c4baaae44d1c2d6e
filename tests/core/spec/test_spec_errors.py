"""Bad specs: every problem at once, each with file:line, key path, message and hint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launcher.errors import SpecError
from launcher.load import plan_file
from tests.conftest import base_spec, edit, write

# The model's config.json is not on this machine: model.hybrid says what it is.
BASE = edit(base_spec(), **{"model.hybrid": True})

# (changes to the base spec, key path reported, words the message must contain)
CASES: list[tuple[dict[str, Any], str, str]] = [
    ({"nodes.0.gpu": 2}, "nodes[0].gpu", "unknown key 'gpu'"),
    (
        {"serve.enable_prefix_cache": True},
        "serve.enable_prefix_cache",
        "not a `vllm serve` option in vLLM 0.32.0",
    ),
    ({"serve.node_rank": 1}, "serve.node_rank", "set by spark-launch for each node"),
    ({"serve.headless": True}, "serve.headless", "set by spark-launch for each node"),
    ({"serve.nnodes": 2}, "serve.nnodes", "set by spark-launch"),
    ({"serve.master_addr": "1.2.3.4"}, "serve.master_addr", "set by spark-launch"),
    (
        {"serve.distributed_executor_backend": "ray"},
        "serve.distributed_executor_backend",
        "set by spark-launch",
    ),
    ({"serve.model": "/x"}, "serve.model", "comes from model.path"),
    ({"serve.api_key": "sk"}, "serve.api_key", "is a secret"),
    ({"nodes.1.name": "n1"}, "nodes[1].name", "used by more than one node"),
    ({"nodes.1.address": "10.0.0.1"}, "nodes[1].address", "used by more than one node"),
    ({"nodes.1.address": "spark-2"}, "nodes[1].address", "not an IP address"),
    ({"nodes.1.ssh": "a b"}, "nodes[1].ssh", "not an ssh target"),
    (
        {"nodes.1.env": {"VLLM_USE_V2_MODEL_RUNNER": "1"}},
        "nodes[1].env.VLLM_USE_V2_MODEL_RUNNER",
        "engine input",
    ),
    ({"env": {"VLLM_HOST_IP": "1.2.3.4"}}, "env.VLLM_HOST_IP", "set by the launcher for each node"),
    ({"env": {"X": True}}, "env.X", "string or a number"),
    ({"secrets": ["HF TOKEN"]}, "secrets[0]", "not a valid variable name"),
    ({"serve.tensor_parallel_size": 4}, "serve.tensor_parallel_size", "= 4, but the 2 node(s) have 2 GPU(s)"),
    (
        {"nodes.1.gpus": 2, "serve.tensor_parallel_size": 3},
        "serve.tensor_parallel_size",
        "different GPU counts",
    ),
    (
        {"vllm.version": "0.99.0"},
        "vllm.version",
        "has no flag catalog here (committed: 0.32.0, 0.33.0, 0.34.0)",
    ),
    ({"vllm.version": "0.31.2"}, "vllm.version", "older than 0.32.0, the oldest release whose derived"),
    ({"vllm.version": "latest"}, "vllm.version", "not a version number"),
    (
        {"vllm.flags_from": "0.99.0"},
        "vllm.flags_from",
        "not a supported release; known: 0.32.0, 0.33.0, 0.34.0",
    ),
    ({"vllm.runtime": "docker"}, "vllm.image", "required with runtime docker"),
    ({"vllm.runtime": "podman"}, "vllm.runtime", "must be one of venv, docker"),
    ({"model.path": "models/m"}, "model.path", "absolute path"),
    ({"model.hybrid": None}, "serve.enable_chunked_prefill", "depends on the model's kind, which the plan"),
    ({"model.hybrid": False}, "serve.enable_chunked_prefill", "depends on the model's kind, which the plan"),
    ({"model.kind": "decoder"}, "model.hybrid", "is true, but model.kind is decoder"),
    ({"serve.mamba_cache_mode": "none"}, "serve.mamba_cache_mode", "vLLM turns it into 'align'"),
    ({"serve.mamba_cache_mode": "all"}, "serve.mamba_cache_mode", "does not exist in vLLM 0.32.0"),
    (
        {"serve.enable_prefix_caching": False, "serve.mamba_cache_mode": "align"},
        "serve.mamba_cache_mode",
        "vLLM turns it into 'none'",
    ),
    ({"serve.enable_chunked_prefill": False}, "serve.enable_chunked_prefill", "needs chunked prefill"),
    (
        {"serve.speculative_config": {"method": "mtp"}},
        "serve.speculative_config",
        "explicit num_speculative_tokens",
    ),
    (
        {"serve.speculative_config": {"method": "mtpp", "num_speculative_tokens": 1}},
        "serve.speculative_config",
        "'mtpp' is not a speculative method of vLLM 0.32.0",
    ),
    (
        {"serve.enable_prefix_caching": False, "serve.mamba_block_size": 64},
        "serve.mamba_block_size",
        "without prefix caching",
    ),
    ({"serve.max_model_len": "big"}, "serve.max_model_len", "a size like 4096"),
    ({"serve.enforce_eager": "yes"}, "serve.enforce_eager", "expected true or false"),
    ({"serve.kv_cache_dtype": "fp9"}, "serve.kv_cache_dtype", "'fp9' is not one of"),
    ({"serve.port": 70000}, "serve.port", "must be a port number"),
    ({"serve.served_model_name": "x"}, "serve.served_model_name", "comes from model.served_name"),
]


@pytest.mark.parametrize(("changes", "path", "words"), CASES, ids=[c[1] + ":" + c[2][:20] for c in CASES])
def test_bad_spec_names_the_key_and_why(
    tmp_path: Path, changes: dict[str, Any], path: str, words: str
) -> None:
    spec_file = write(tmp_path, edit(BASE, **changes))
    with pytest.raises(SpecError) as caught:
        plan_file(spec_file)
    matching = [p for p in caught.value.problems if p.dotted == path]
    assert matching, caught.value.render()
    assert any(words in p.message for p in matching), caught.value.render()
    assert f"{spec_file}:" in caught.value.render()


def test_what_vllm_034_removed_is_refused_for_a_034_spec_with_its_line(tmp_path: Path) -> None:
    """The V1 model runner's switch and two speculative-config keys: 0.34 refuses them at start-up."""
    text = """\
name: t
vllm: {version: "0.34.0", venv: /opt/vllm}
nodes:
  - {name: a, ssh: a, address: 10.0.0.1, interface: eth0}
  - {name: b, ssh: b, address: 10.0.0.2, interface: eth0}
model: {path: /m, kind: hybrid}
serve:
  tensor_parallel_size: 2
  enable_prefix_caching: true
  enable_chunked_prefill: true
  speculative_config: {method: mtp, num_speculative_tokens: 2, use_heterogeneous_vocab: true}
env:
  VLLM_USE_V2_MODEL_RUNNER: "0"
"""
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(SpecError) as caught:
        plan_file(tmp_path / "s.yaml")
    rendered = caught.value.render()
    where = tmp_path / "s.yaml"
    assert (
        f"{where}:13: env.VLLM_USE_V2_MODEL_RUNNER: vLLM 0.34.0 refuses VLLM_USE_V2_MODEL_RUNNER=0"
        in rendered
    )
    assert (
        "Model Runner V1 has been removed" in rendered
        and "remove VLLM_USE_V2_MODEL_RUNNER from env" in rendered
    )
    assert f"{where}:11: serve.speculative_config.use_heterogeneous_vocab: is no longer a key" in rendered
    # The same spec on 0.33 plans: both are 0.33's own inputs.
    (tmp_path / "s.yaml").write_text(text.replace("0.34.0", "0.33.0"))
    plan_file(tmp_path / "s.yaml")
    # VLLM_USE_V2_MODEL_RUNNER=1 only makes 0.34 warn: it passes.
    (tmp_path / "s.yaml").write_text(
        text.replace('"0"', '"1"').replace(", use_heterogeneous_vocab: true", "")
    )
    plan_file(tmp_path / "s.yaml")


def test_every_problem_is_reported_at_once_with_its_line(tmp_path: Path) -> None:
    text = """\
name: t
vllm: {version: "0.32.0", venv: /opt/vllm}
nodes:
  - {name: a, ssh: a, address: 10.0.0.1, interface: eth0, gpu: 1}
  - {name: b, ssh: b, address: nope, interface: eth0}
model: {path: /m, hybrid: true}
serve:
  tensor_parallel_size: 2
  enable_prefix_cache: true
"""
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(SpecError) as caught:
        plan_file(tmp_path / "s.yaml")
    rendered = caught.value.render()
    assert f"{tmp_path / 's.yaml'}:4: nodes[0].gpu: unknown key 'gpu'" in rendered
    assert "did you mean 'gpus'?" in rendered
    assert f"{tmp_path / 's.yaml'}:5: nodes[1].address: 'nope' is not an IP address" in rendered
    assert f"{tmp_path / 's.yaml'}:9: serve.enable_prefix_cache: is not a `vllm serve` option" in rendered
    assert "did you mean 'enable_prefix_caching'?" in rendered


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name: [unclosed\n", "not valid YAML"),
        ("name: a\nname: b\n", "written twice"),
        ("- a list\n", "expected a mapping"),
        ("", "expected a mapping"),
    ],
)
def test_unreadable_yaml_is_a_located_error(tmp_path: Path, text: str, words: str) -> None:
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(SpecError) as caught:
        plan_file(tmp_path / "s.yaml")
    assert words in caught.value.render()


def test_required_keys_are_named(tmp_path: Path) -> None:
    spec_file = write(tmp_path, {"name": "t"})
    with pytest.raises(SpecError) as caught:
        plan_file(spec_file)
    missing = {p.dotted for p in caught.value.problems if p.message == "is required"}
    assert missing == {"vllm", "nodes", "model"}
