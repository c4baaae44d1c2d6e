"""The docker runtime's container section: validated, rendered the same for `up` and the probe,
shown in the plan with why. The defaults are what a DGX Spark needs."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from launcher.core.remote import PROBE_LOADER, probe_call
from launcher.core.spec.container import ContainerSection, container_options
from launcher.core.views import plan_text
from launcher.errors import SpecError
from launcher.load import plan_file
from tests.conftest import base_spec, edit, plan_of, spec_of, write

DOCKER = edit(base_spec(), **{"vllm": {"version": "0.32.0", "runtime": "docker", "image": "img:1"}})


def test_the_defaults_are_what_a_spark_needs() -> None:
    options = container_options(ContainerSection(), "/models/m")
    assert {"--ipc=host", "--gpus=all", "--ulimit=memlock=-1", "--ulimit=stack=67108864"} <= set(options)
    assert "--pull=never" in options and "--network=host" in options
    assert not [o for o in options if o.startswith("--shm-size")]


def test_compiled_kernels_are_kept_in_a_volume_between_starts_unless_turned_off() -> None:
    options = container_options(ContainerSection(), "/models/m")
    assert "--mount=type=volume,source=spark-launch-compile-cache,target=/spark-launch-cache" in options
    assert "--mount=type=volume,source=spark-launch-compile-cache,target=/tmp/torchinductor_root" in options
    assert "--env=TORCHINDUCTOR_CACHE_DIR=/spark-launch-cache/torchinductor" in options
    off = container_options(ContainerSection(compile_cache="none"), "/models/m")
    assert not [o for o in off if "spark-launch-cache" in o]


def test_a_machine_that_differs_says_so_and_the_argv_follows() -> None:
    data = edit(DOCKER, **{"vllm.container": {"ipc": "private", "shm_size": "1g", "memlock": 8388608}})
    plan = plan_of(data)
    argv = plan.nodes[0].argv
    assert {"--ipc=private", "--shm-size=1g", "--ulimit=memlock=8388608", "--gpus=all"} <= set(argv)
    assert "--ipc=host" not in argv
    text = plan_text(plan)
    assert "container ipc" in text and "from the spec (vllm.container.ipc); a DGX Spark needs host" in text
    assert "vllm.container changes what a DGX Spark needs (ipc private, memlock 8388608)" in text
    assert "the default: every GPU of the node" in text


def test_gpus_none_renders_no_gpu_flag() -> None:
    plan = plan_of(edit(DOCKER, **{"vllm.container": {"gpus": "none"}}))
    assert not [a for a in plan.nodes[0].argv if a.startswith("--gpus")]


CASES: list[tuple[dict[str, Any], str, str]] = [
    ({"vllm.container": {"ipc": "private"}}, "vllm.container.shm_size", "required with ipc private"),
    ({"vllm.container": {"shm_size": "1g"}}, "vllm.container.shm_size", "no effect with ipc host"),
    (
        {"vllm.container": {"ipc": "private", "shm_size": "lots"}},
        "vllm.container.shm_size",
        "'lots' is not a size",
    ),
    ({"vllm.container": {"ipc": "none"}}, "vllm.container.ipc", "must be one of host, private"),
    ({"vllm.container": {"memlock": 0}}, "vllm.container.memlock", "0 is not a limit"),
    ({"vllm.container": {"stack": -5}}, "vllm.container.stack", "-5 is not a limit"),
    ({"vllm.container": {"gpu": "all"}}, "vllm.container.gpu", "did you mean 'gpus'"),
    ({"model.path": "/models/a,b"}, "model.path", "cannot be mounted into a container"),
    (
        {"vllm.container": {"compile_cache": "/var/cache"}},
        "vllm.container.compile_cache",
        "is not a Docker volume name",
    ),
]


@pytest.mark.parametrize(("changes", "where", "words"), CASES, ids=[c[1] + ":" + c[2] for c in CASES])
def test_bad_container_settings_are_refused_with_the_key(
    tmp_path: Path, changes: dict[str, Any], where: str, words: str
) -> None:
    with pytest.raises(SpecError) as caught:
        plan_file(write(tmp_path, edit(DOCKER, **changes)))
    text = caught.value.render()
    assert where in text and words in text


def test_a_container_section_with_the_venv_runtime_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        plan_file(write(tmp_path, edit(base_spec(), **{"vllm.container": {"ipc": "private"}})))
    assert (
        "vllm.container" in caught.value.render() and "only used with runtime docker" in caught.value.render()
    )


def test_the_probe_runs_in_the_image_with_ups_options_and_its_env_on_stdin() -> None:
    data = edit(
        DOCKER, **{"vllm.container": {"ipc": "private", "shm_size": "1g"}, "env": {"NCCL_DEBUG": "WARN"}}
    )
    spec, plan = spec_of(data), plan_of(data)
    node = plan.nodes[1]
    call = probe_call(spec, node, "t")
    docker = shlex.split(call.command)
    assert json.loads((call.data or "").splitlines()[0]) == dict(node.env)  # ahead of the probe's source
    image_at = docker.index("img:1")
    assert docker[:4] == ["docker", "run", "--rm", "--interactive"]
    assert set(container_options(spec.vllm.container, "/models/m")) <= set(docker[:image_at])
    assert not [w for w in docker if any(v in w for v in node.env.values())]  # no value on any argv
    # the very argv `up` runs, after `vllm serve`
    assert docker[image_at + 1 : image_at + 5] == ["python3", "-c", PROBE_LOADER, "resolve"]
    assert tuple(docker[image_at + 5 :]) == node.argv[node.argv.index("serve") + 1 :]
