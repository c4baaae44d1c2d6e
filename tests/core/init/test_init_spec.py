"""The spec `init` writes, from node facts to text: it reads back through the project's own
loader to what was decided, plans as written, says why for each value, and leaves every
undecidable value as a marked CHOOSE that validation refuses, never a silent guess."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from launcher.catalogs import known_versions, load_catalog
from launcher.core.init import decide, spec_file
from launcher.core.init.draft import InitRequest, node_names
from launcher.core.init.text import CHOOSE, Entry, render, scalar
from launcher.core.spec.validate import validate_spec
from launcher.core.spec.yamlsource import load_document
from launcher.core.vllm.releases import release_for
from tests.init_facts import DENSE, bed_pair, model, spark_pair, vllm


def write(
    facts: dict[str, dict[str, Any]], reach: dict[str, dict[str, str]] | None = None, **options: Any
) -> tuple[spec_file.Written, list[str], spec_file.Entry | Any]:
    """What init writes for these facts (every link reachable unless `reach` says otherwise)."""
    request = InitRequest(tuple(facts), "c", **{"model": "/models/m", "venv": "/opt/vllm", **options})
    found = decide.links(facts, request.names)
    tried = {c.head.address: dict.fromkeys(request.names[1:], "yes") for c in found.found}
    tried.update(reach or {})
    decisions, warnings = decide.decide(request, facts, found, tried)
    version = decisions.version.value
    committed = release_for(version, known_versions()).catalog if version else None
    catalog = load_catalog(committed) if committed else None
    items = spec_file.entries(spec_file.with_model_kind(decisions, catalog), catalog)
    header = decide.header(request, "c.yaml")
    return spec_file.compose(decisions, catalog, header, "c.yaml"), warnings, items


def data(text: str) -> dict[str, Any]:
    loaded = load_document(text, "c.yaml").data
    assert isinstance(loaded, dict)
    return loaded


def test_two_sparks_give_a_ready_spec_that_plans_as_written() -> None:
    spec, warnings, items = write(spark_pair())
    assert spec.ready, spec.problems
    assert warnings == []
    assert data(spec.text) == spec_file.data_of(items)  # the comments change nothing
    loaded = data(spec.text)
    assert loaded["vllm"] == {"version": "0.32.0", "runtime": "venv", "venv": "/opt/vllm"}
    assert loaded["nodes"][1] == {
        "name": "spark-2",
        "ssh": "spark-2",
        "address": "10.0.0.2",
        "interface": "enp1s0f1np1",
        "hca": ["rocep1s0f1", "roceP2p1s0f1"],
        "gpus": 1,
    }
    assert loaded["model"] == {"path": "/models/m", "kind": "hybrid"}
    assert loaded["serve"] == {
        "tensor_parallel_size": 2,
        "enable_prefix_caching": True,
        "enable_chunked_prefill": True,
        "mamba_cache_mode": "align",
        "port": 8000,
        "master_port": 29501,
        "gpu_memory_utilization": 0.85,
    }
    assert loaded["env"] == {"HF_HUB_OFFLINE": "1"}
    spec_value, problems = validate_spec(loaded)
    assert spec_value is not None and problems == []


def test_every_choice_is_explained_in_a_comment() -> None:
    text = write(spark_pair())[0].text
    assert '  version: "0.32.0"' in text  # quoted: "0.33" would read as a number
    assert (
        "# fabric: 10.0.0.0/24 (enp1s0f1np1 on every node): every worker reached spark-1's 10.0.0.1" in text
    )
    assert "not chosen: 192.168.1.0/24 (enP7s7 on every node): reachable, no RDMA, slower (10 Gb/s)" in text
    assert "#   spark-1: enP7s7 192.168.1.11/24, 10 Gb/s, no RDMA, SSH arrives here" in text
    assert "128 GB of unified memory shared by the CPU and the GPU" in text
    assert "1 x NVIDIA GB10 (nvidia-smi)" in text
    assert "vLLM 0.32.0's own choice for this model, written out" in text
    assert "from config.json on spark-1: hybrid (Qwen3NextForCausalLM)" in text


def test_release_033_shows_the_mamba_mode_but_pins_no_deprecated_flag() -> None:
    facts = spark_pair(vllm=vllm("0.33.0"))
    spec, _, _ = write(facts)
    assert spec.ready, spec.problems
    assert "mamba_cache_mode" not in data(spec.text)["serve"]
    assert "  # mamba_cache_mode: align" in spec.text and "(implied, not a flag)" in spec.text


def test_a_dense_model_gets_no_mamba_mode() -> None:
    spec, _, _ = write(spark_pair(model=model(config=DENSE)))
    loaded = data(spec.text)
    assert spec.ready and loaded["model"]["kind"] == "decoder" and "mamba_cache_mode" not in spec.text


def test_cpu_only_nodes_sharing_one_machine_get_eager_mode_and_a_small_kv_cache() -> None:
    facts = bed_pair()
    for f in facts.values():
        f["host"]["MemAvailable"] = 20 << 30  # two nodes on one machine: 10 GiB each
    spec, _, _ = write(facts)
    loaded = data(spec.text)
    assert spec.ready, spec.problems
    assert loaded["serve"]["tensor_parallel_size"] == 2 and loaded["serve"]["enforce_eager"] is True
    assert [n["gpus"] for n in loaded["nodes"]] == [1, 1]
    assert loaded["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "gpu_memory_utilization" not in spec.text
    assert "some nodes run on one machine (the same boot id): they share its memory" in spec.text


def test_nodes_holding_different_vllm_builds_are_reported_not_picked() -> None:
    facts = spark_pair()
    facts["spark-2"]["vllm"] = vllm(build="b2")
    spec, _, _ = write(facts)
    assert not spec.ready
    assert "# CHOOSE: the nodes hold different vLLM installs at /opt/vllm:" in spec.text
    assert "b1) on spark-1; vLLM 0.32.0 (build b2) on spark-2" in spec.text.replace("\n  # ", " ")
    assert data(spec.text)["vllm"]["venv"] == CHOOSE
    assert any("vllm.venv: must be an absolute path" in p for p in spec.problems)
    assert spec.choose_lines and all(CHOOSE in spec.text.splitlines()[n - 1] for n in spec.choose_lines)


def test_a_node_without_vllm_gets_a_clear_choice_and_no_spec_that_pretends() -> None:
    facts = spark_pair()
    facts["spark-2"]["vllm"] = {"venv": "/opt/vllm", "vllm_binary": False, "vllm_version": None}
    spec, _, _ = write(facts)
    assert not spec.ready and data(spec.text)["vllm"]["venv"] == CHOOSE
    assert "no vLLM at /opt/vllm on spark-2" in spec.text
    assert validate_spec(data(spec.text))[1]  # `validate` refuses it too


def test_without_venv_one_install_found_everywhere_is_taken_and_said() -> None:
    facts = spark_pair()
    for f in facts.values():
        del f["vllm"]
        f["venvs_found"] = [vllm(venv="/home/me/vllm")]
    spec, _, _ = write(facts, venv=None)
    assert spec.ready and data(spec.text)["vllm"]["venv"] == "/home/me/vllm"
    assert "found there on every node; no --venv given" in spec.text


def test_without_venv_two_installs_found_leave_the_choice() -> None:
    facts = spark_pair()
    for f in facts.values():
        del f["vllm"]
        f["venvs_found"] = [vllm(venv="/opt/vllm"), vllm("0.33.0", venv="/opt/venv")]
    spec, _, _ = write(facts, venv=None)
    assert not spec.ready and "several vLLM installs" in spec.text
    assert "#   /opt/venv: vLLM 0.33.0 (build b1) on spark-1, spark-2" in spec.text


def test_without_model_the_models_found_are_listed_as_choices() -> None:
    facts = spark_pair()
    for name, f in facts.items():
        del f["model"]
        f["models_found"] = [{"path": "/models/a", "weights": 3, "weight_bytes": 3 << 30}]
        if name == "spark-1":
            f["models_found"].append({"path": "/models/b", "weights": 1, "weight_bytes": 1 << 20})
    spec, _, _ = write(facts, model=None)
    assert not spec.ready and data(spec.text)["model"]["path"] == CHOOSE
    assert "#   /models/a  (3 weight files, 3.0 GiB; on spark-1, spark-2)" in spec.text
    assert "#   /models/b  (1 weight files, 1 MiB; on spark-1)" in spec.text
    assert "  # kind:" in spec.text  # shown, not guessed


def test_a_model_missing_on_a_worker_is_a_sync_not_an_edit() -> None:
    facts = spark_pair()
    facts["spark-2"]["model"] = {"path": "/models/m", "exists": False}
    spec, warnings, _ = write(facts)
    assert spec.ready
    assert warnings == ["the model is not complete on spark-2: spark-launch sync models SPEC copies it there"]
    facts["spark-1"]["model"] = model(missing_shards=["model-00002-of-00002.safetensors"])
    facts["spark-2"]["model"] = model()
    spec, warnings, _ = write(facts)
    assert (
        "sync models SPEC --from spark-2" in warnings[0]
        and "1 shard(s) named in the index missing" in spec.text
    )


def test_a_model_found_nowhere_is_a_choice() -> None:
    facts = spark_pair()
    for f in facts.values():
        f["model"] = {"path": "/models/m", "exists": False}
    spec, _, _ = write(facts)
    assert not spec.ready and "no complete model at /models/m on any node" in spec.text


def test_no_reachable_link_leaves_address_and_interface_to_choose() -> None:
    spec, _, _ = write(bed_pair(), {"10.99.0.1": {"node2": "timed out"}})
    loaded = data(spec.text)
    assert not spec.ready and loaded["nodes"][0]["address"] == CHOOSE == loaded["nodes"][1]["interface"]
    assert "NOT reachable (node2: timed out)" in spec.text
    assert len(spec.choose_lines) == 4


def test_a_gpu_missing_on_one_node_is_a_choice() -> None:
    facts = spark_pair()
    facts["spark-2"]["host"]["gpus"] = None
    spec, _, _ = write(facts)
    assert not spec.ready and "nvidia-smi found no GPU here while spark-1 has 1" in spec.text


def test_node_names_come_from_the_hosts() -> None:
    assert node_names(("spark-1", "admin@192.168.1.12", "Spark_3:2222", "spark-1")) == (
        "spark-1",
        "192.168.1.12",
        "spark_3",
        "spark-1-4",
    )


@given(st.text())
def test_any_string_value_reads_back_as_itself(value: str) -> None:
    text = render([value], (Entry("k", value, notes=(value,), comment=value),))
    assert yaml.safe_load(text) == {"k": value}
    assert load_document(text, "x.yaml").data == {"k": value}


@pytest.mark.parametrize("value", [True, 0.85, 8000, "0.33", "1", "-x", "a: b", "#", None, ["a", "b"]])
def test_scalars_read_back(value: Any) -> None:
    assert yaml.safe_load(f"k: {scalar(value)}") == {"k": value}


def image(image_id: str = "sha256:aa11", version: str | None = "0.33.0", **more: Any) -> dict[str, Any]:
    return {"image": "vllm:v", "docker": True, "image_id": image_id, "vllm_version": version, **more}


def test_an_image_on_every_node_gives_a_docker_spec() -> None:
    spec, _, _ = write(spark_pair(vllm=image()), venv=None, image="vllm:v")
    assert spec.ready, spec.problems
    assert data(spec.text)["vllm"] == {"version": "0.33.0", "runtime": "docker", "image": "vllm:v"}
    assert "vllm:v: same image id on every node (sha256:aa11)" in spec.text


@pytest.mark.parametrize(
    ("node2", "said"),
    [
        (image("sha256:bb22"), "the nodes hold different images under that name"),
        ({"image": "vllm:v", "docker": True, "image_id": None}, "image vllm:v not on spark-2"),
        ({"image": "vllm:v", "docker": False, "image_id": None}, "no docker command on spark-2"),
    ],
)
def test_images_that_differ_or_are_missing_are_choices(node2: dict[str, Any], said: str) -> None:
    facts = spark_pair(vllm=image())
    facts["spark-2"]["vllm"] = node2
    spec, _, _ = write(facts, venv=None, image="vllm:v")
    assert not spec.ready and said in spec.text.replace("\n  # ", " ")


def test_ids_that_differ_with_one_repo_digest_are_the_same_image() -> None:
    facts = spark_pair(vllm=image(repo_digests=["vllm@sha256:cc33"]))
    facts["spark-2"]["vllm"] = image("sha256:bb22", repo_digests=["vllm@sha256:cc33"])
    spec, _, _ = write(facts, venv=None, image="vllm:v")
    assert spec.ready and "same repo digest on every node" in spec.text


def test_an_image_that_does_not_say_its_release_leaves_the_version_to_choose() -> None:
    spec, _, _ = write(spark_pair(vllm=image(version=None)), venv=None, image="vllm:v")
    loaded = data(spec.text)
    assert not spec.ready and loaded["vllm"]["version"] == CHOOSE and loaded["vllm"]["image"] == "vllm:v"
    assert "the image does not say its vLLM release" in spec.text
