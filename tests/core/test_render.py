"""Rendered commands: one argv element per value through a real shell, and identical
commands on every node except the rank flags, over many generated specs."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.core.remote import probe_call
from launcher.core.render import rank_args, shell_words
from tests.conftest import base_spec, plan_of, spec_of

# Text a spec accepts where a value may span lines (a chat template): no NUL, no control
# character but line breaks and tabs, no lone surrogates.
TEXT = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), whitelist_characters="\n\t\r"), min_size=1, max_size=40
)
# One line of text (names, paths, environment values): no control character at all.
LINE = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)
NAME_TEXT = LINE.filter(lambda t: t.strip() != "" and not t.startswith("-"))


def through_bash(words: str) -> list[str]:
    """What a POSIX shell makes of a rendered command line, element by element."""
    out = subprocess.run(["bash", "-c", f"printf '%s\\0' {words}"], capture_output=True, check=True)
    return out.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


@settings(max_examples=60, deadline=None)
@given(served=NAME_TEXT, path=LINE, value=TEXT, venv=LINE.filter(lambda t: "=" not in t), env=LINE)
def test_hostile_strings_arrive_as_exactly_one_argument(
    served: str, path: str, value: str, venv: str, env: str
) -> None:
    data = base_spec()
    data["model"]["path"] = "/" + path
    data["model"]["served_name"] = served
    data["vllm"]["venv"] = "/" + venv
    data["env"] = {"ODD": env}
    data["serve"]["chat_template"] = value
    plan = plan_of(data)
    for node in plan.nodes:
        assert through_bash(shell_words(node.argv)) == list(node.argv)
        assert f"--chat-template={value}" in node.argv
        # The probe's env travels on its stdin, ahead of its source; its argv arrives whole.
        call = probe_call(spec_of(data), node, "tag")
        words = through_bash(call.command)
        assert json.loads((call.data or "").splitlines()[0]) == dict(node.env)
        assert words[-len(node.argv) + 2 :] == list(node.argv[2:])


SERVE_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "enable_prefix_caching": st.booleans(),
        "enforce_eager": st.booleans(),
        "max_model_len": st.integers(16, 1 << 20),
        "gpu_memory_utilization": st.floats(0.1, 0.95),
        "kv_cache_dtype": st.sampled_from(["auto", "fp8"]),
        "block_size": st.sampled_from([16, 32, 64]),
        "speculative_config": st.builds(
            lambda n: {"method": "mtp", "num_speculative_tokens": n}, st.integers(1, 4)
        ),
        # Apart, and apart from each other's default (8000, 29501): a clash is refused (test_spec_slips).
        "port": st.integers(1024, 29000),
        "master_port": st.integers(30000, 65535),
        "chat_template": TEXT,
        "seed": st.integers(0, 1000),
    },
)


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.integers(1, 6),
    version=st.sampled_from(["0.32.0", "0.33.0"]),
    serve=SERVE_OPTIONS,
    kind=st.sampled_from(["hybrid", "decoder", "attention-free"]),
    runtime=st.sampled_from(["venv", "docker"]),
    env=st.dictionaries(
        st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True).filter(
            lambda k: not k.startswith(("VLLM_HOST", "GLOO_", "NCCL_SOCKET", "NCCL_IB"))
        ),
        LINE,
        max_size=3,
    ),
)
def test_commands_are_identical_except_rank_flags(
    nodes: int, version: str, serve: dict[str, Any], kind: str, runtime: str, env: dict[str, str]
) -> None:
    data = base_spec(version, nodes)
    data["serve"] = {"tensor_parallel_size": nodes, **serve}
    if nodes == 1:  # no rendezvous on one node: the port is refused there
        data["serve"].pop("master_port", None)
    data["env"] = env
    data["vllm"] = {"version": version, "runtime": runtime, "venv": "/opt/vllm", "image": "img:1"}
    plan = plan_of(data, kind)
    stripped = []
    for rank, node in enumerate(plan.nodes):
        ranked = [f"--node-rank={rank}"] if nodes > 1 else []  # one node: a plain `vllm serve`
        assert [a for a in node.argv if a.startswith("--node-rank")] == ranked
        assert node.argv.count("--headless") == (1 if rank else 0)
        stripped.append([a for a in node.argv if a not in rank_args(rank, nodes)])
        assert {k: v for k, v in node.env.items() if k in env} == env
    assert all(s == stripped[0] for s in stripped)


def test_docker_runtime_keeps_every_value_out_of_argv() -> None:
    data = base_spec()
    data["vllm"] = {"version": "0.33.0", "runtime": "docker", "image": "nvcr.io/nvidia/vllm:26.05-py3"}
    data["env"] = {"NCCL_DEBUG": "WARN"}
    data["secrets"] = ["HF_TOKEN"]
    plan = plan_of(data)
    argv = plan.nodes[1].argv
    assert argv[:3] == ("docker", "run", "--detach")
    assert {
        "--label=spark-launch.cluster=t",
        "--pull=never",
        "--network=host",
        "--ipc=host",
        "--gpus=all",
        "--ulimit=memlock=-1",
        "--mount=type=bind,source=/models/m,target=/models/m,readonly",
        "--env-file=node.env",
    } <= set(argv)
    assert not [a for a in argv if a.startswith("--shm-size")]  # meaningless with the host's IPC
    image_at = argv.index("nvcr.io/nvidia/vllm:26.05-py3")
    assert argv[image_at + 1 : image_at + 4] == ("vllm", "serve", "/models/m")
    for node in plan.nodes:  # no env value (the node's address, the spec's env) reaches docker's argv
        values = set(node.env.values())
        assert values >= {"WARN", node.address} and "HF_TOKEN" in node.secrets
        assert not [a for a in node.argv[:image_at] for v in values if v in a]
    assert plan.nodes[0].argv[:-1] == argv[:-2]


def test_a_one_node_deployment_is_a_plain_vllm_serve() -> None:
    data = base_spec("0.32.0", nodes=1)
    plan = plan_of(data, "dense")
    argv = plan.nodes[0].argv
    multi = (
        "--nnodes",
        "--node-rank",
        "--headless",
        "--master-addr",
        "--master-port",
        "--distributed-executor",
    )
    assert argv[:3] == ("/opt/vllm/bin/vllm", "serve", "/models/m")
    assert not [a for a in argv if a.startswith(multi)]
    assert plan.master_port is None and plan.api_port == 8000
