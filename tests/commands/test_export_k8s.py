"""`spark-launch export k8s`: golden manifests for every shipped spec, valid against LeaderWorkerSet's
schema (its API reference's fields; a release's published CRD when SPARK_LAUNCH_LWS_CRD names one)
and Kubernetes' own, each pod running `plan --json`'s argv for its rank once
Kubernetes has put in what LeaderWorkerSet supplies, and no secret's value anywhere.

Regenerate the golden files after an intended change: pytest tests/commands/test_export_k8s.py --update-golden
(the gate's source, the node scripts' bundle, stands in as one line there: its own tests cover it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from launcher.load import read_file
from tests.conftest import ROOT
from tests.invoke import invoke

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
GOLDEN = ROOT / "tests" / "golden" / "k8s"
# LeaderWorkerSet's own fields as its API reference gives them (the pod templates inside are held to
# Kubernetes' own PodTemplateSpec below). SPARK_LAUNCH_LWS_CRD: a CRD file of an LWS release, whose
# published schema then replaces it (the tests do not fetch one).
LWS_SCHEMA = json.loads((ROOT / "tests" / "data" / "leaderworkerset-v1.schema.json").read_text())
if os.environ.get("SPARK_LAUNCH_LWS_CRD"):
    _crd = yaml.safe_load(Path(os.environ["SPARK_LAUNCH_LWS_CRD"]).read_text())
    LWS_SCHEMA = next(v for v in _crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
KUBERNETES = "1.33"  # the Kubernetes release whose schemas the objects are held to
GATE_STAND_IN = (
    "# the gate: launcher/node/scripts/k8s_gate.py with the probe inlined (export writes it whole)\n"
)
EXPORTED = [c for c in CONFIGS if "export:" in c.read_text() or "runtime: docker" in c.read_text()]


@pytest.fixture(autouse=True)
def models_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan as from a machine without the examples' models (their nodes hold them), as the golden plans."""
    monkeypatch.setattr("launcher.load.local_model_files", lambda spec: None)


def exported(config: Path, *options: str) -> str:
    """`spark-launch export k8s CONFIG` as printed; a failure shows what it said."""
    shown = config.relative_to(ROOT) if config.is_relative_to(ROOT) else config
    done = invoke(["export", "k8s", str(shown), *options])
    assert done.exit_code == 0, done.output
    return done.output


def objects(config: Path) -> list[dict[str, Any]]:
    """Every object the export prints for `config`."""
    return [o for o in yaml.safe_load_all(exported(config)) if o]


def planned(config: Path) -> dict[str, dict[str, Any]]:
    """`plan --json`'s document of each deployment, by its name (`cluster` or `cluster/deployment`)."""
    done = invoke(["plan", str(config), "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.output)
    return {d["cluster"]: d for d in doc.get("deployments", [doc])}


@pytest.mark.parametrize("config", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_export_matches_golden(config: Path, update_golden: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("launcher.commands.export_k8s.gate_source", lambda: GATE_STAND_IN)
    done = invoke(["export", "k8s", str(config.relative_to(ROOT))])
    # A spec that cannot be exported as it is: the golden file is what it is told, located.
    suffix = ".yaml" if done.exit_code == 0 else ".refused.txt"
    golden = GOLDEN / f"{config.stem}{suffix}"
    if update_golden:
        GOLDEN.mkdir(exist_ok=True)
        for stale in GOLDEN.glob(f"{config.stem}.*"):
            stale.unlink()
        golden.write_text(done.output)
    assert golden.exists(), f"no golden file {golden.name}: run pytest --update-golden"
    assert done.output == golden.read_text(), f"{golden.name} differs: review, then --update-golden"


def test_the_examples_cover_one_and_several_deployments_venv_and_docker() -> None:
    texts = {p.stem: (GOLDEN / f"{p.stem}.yaml") for p in EXPORTED}
    assert {"qwen3-next-2x-spark", "multi-2x-spark", "demo-docker", "demo"} <= set(texts)
    assert all(path.exists() for path in texts.values())
    assert "kind: Deployment" in texts["multi-2x-spark"].read_text()  # the endpoint


def test_every_file_starts_with_the_substitutions_it_makes() -> None:
    text = exported(ROOT / "configs" / "qwen3-next-2x-spark.yaml")
    head = text.split("\n---\n")[0]
    assert "--node-rank=0..1             -> --node-rank=$(LWS_WORKER_INDEX)" in head
    assert "--master-addr=10.0.0.1       -> --master-addr=$(LWS_LEADER_ADDRESS)" in head
    assert "VLLM_HOST_IP=<node address>  -> the pod's IP (downward API: status.podIP)" in head
    assert all(line.startswith("#") for line in head.splitlines())


def test_the_real_gate_travels_in_the_config_map() -> None:
    from launcher.node.scripts import bundle

    config_map = objects(ROOT / "configs" / "qwen3-next-2x-spark.yaml")[0]
    assert config_map["kind"] == "ConfigMap"
    assert config_map["data"]["k8s_gate.py"] == bundle("k8s_gate")
    assert "def resolve(" in config_map["data"]["k8s_gate.py"]  # the probe, inlined


# ---- valid: LeaderWorkerSet's schema, Kubernetes' own


def strict(schema: Any) -> Any:
    """The schema as the API server's strict field validation reads it: a field it does not know is
    an error (a CRD's schema otherwise prunes it silently)."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    keeps = schema.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in schema
    if "properties" in schema and not keeps:
        out["additionalProperties"] = False
    return out


LWS = jsonschema.Draft7Validator(strict(LWS_SCHEMA))


def pod_templates(lws: dict[str, Any]) -> list[dict[str, Any]]:
    template = lws["spec"]["leaderWorkerTemplate"]
    return [template[k] for k in ("leaderTemplate", "workerTemplate") if k in template]


def kubernetes(obj: dict[str, Any]) -> None:
    """Kubernetes' own schema of the object's kind, strictly (unknown fields refused)."""
    kubernetes_validate.validate(obj, KUBERNETES, strict=True)


@pytest.mark.parametrize("config", EXPORTED, ids=[p.stem for p in EXPORTED])
def test_every_object_is_valid(config: Path) -> None:
    for obj in objects(config):
        if obj["kind"] == "LeaderWorkerSet":
            LWS.validate(obj)
            for template in pod_templates(obj):
                pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
                kubernetes({**pod, "template": template})
        else:
            kubernetes(obj)


def test_the_schemas_refuse_what_kubernetes_would() -> None:
    lws = next(
        o for o in objects(ROOT / "configs" / "qwen3-next-2x-spark.yaml") if o["kind"] == "LeaderWorkerSet"
    )
    with pytest.raises(jsonschema.ValidationError):
        LWS.validate({**lws, "spec": {**lws["spec"], "startupPolicy": "WhenReady"}})
    with pytest.raises(jsonschema.ValidationError):
        LWS.validate({**lws, "spec": {**lws["spec"], "replica": 1}})
    template = pod_templates(lws)[0]
    container = {**template["spec"]["containers"][0], "argv": ["vllm"]}
    broken = {**template, "spec": {**template["spec"], "containers": [container]}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": broken})


# ---- the argv and environment of every rank: `plan --json`'s, once Kubernetes substitutes


def expand(word: str, env: dict[str, str]) -> str:
    """`word` as Kubernetes passes it to the container: $(NAME) is NAME's value where the container
    has it (else left as written), $$ is $ (k8s.io/kubernetes third_party/forked/golang/expansion)."""
    out, i = [], 0
    while i < len(word):
        if word[i] == "$" and i + 1 < len(word):
            nxt = word[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
            elif nxt == "(":
                close = word.find(")", i + 2)
                if close < 0:
                    out.append(word[i:])
                    i = len(word)
                else:
                    name = word[i + 2 : close]
                    out.append(env.get(name, f"$({name})"))
                    i = close + 1
            else:
                out.append("$" + nxt)
                i += 2
        else:
            out.append(word[i])
            i += 1
    return "".join(out)


def test_expand_follows_kubernetes() -> None:
    env = {"A": "x"}
    assert [expand(w, env) for w in ("$(A)", "$$(A)", "$(B)", "a$$b", "$a", "$(A", "$")] == [
        "x",
        "$(A)",
        "$(B)",
        "a$b",
        "$a",
        "$(A",
        "$",
    ]


def rank_pods(lws: dict[str, Any], nodes: int) -> list[dict[str, Any]]:
    """The pod spec each rank runs: the leader's for rank 0, the workers' for the others."""
    template = lws["spec"]["leaderWorkerTemplate"]
    leader = template.get("leaderTemplate", template["workerTemplate"])["spec"]
    return [leader, *[template["workerTemplate"]["spec"]] * (nodes - 1)]


def lws_env(plan: dict[str, Any], rank: int) -> dict[str, str]:
    """What LeaderWorkerSet gives rank `rank`'s containers, as the plan's values: the leader's
    address is the plan's master address, the worker index the rank."""
    head = plan["nodes"][0]["address"]
    return {
        "LWS_LEADER_ADDRESS": head,
        "LWS_WORKER_INDEX": str(rank),
        "LWS_GROUP_SIZE": str(len(plan["nodes"])),
    }


def pod_env(
    container: dict[str, Any], variables: dict[str, str], address: str
) -> tuple[dict[str, str], list[str]]:
    """The container's values (its own IP standing for status.podIP) and the names it takes from a Secret."""
    values, secrets = {}, []
    for item in container["env"]:
        source = item.get("valueFrom", {})
        if "secretKeyRef" in source:
            assert source["secretKeyRef"]["key"] == item["name"]
            secrets.append(item["name"])
        elif "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "status.podIP"
            values[item["name"]] = address
        else:
            values[item["name"]] = expand(item["value"], variables)
    return values, secrets


def engine(argv: list[str], image: str | None) -> list[str]:
    """The plan's words that the container runs: all of them, or (docker) those after the image."""
    return argv[argv.index(image) + 1 :] if image else argv


def docker_env(argv: list[str], image: str | None) -> dict[str, str]:
    """What `docker run --env=NAME=value` adds to the container's environment (docker runtime)."""
    options = argv[: argv.index(image)] if image else []
    return dict(w.removeprefix("--env=").split("=", 1) for w in options if w.startswith("--env="))


@pytest.mark.parametrize("config", EXPORTED, ids=[p.stem for p in EXPORTED])
def test_each_rank_runs_the_plans_argv_and_env(config: Path) -> None:
    plans = planned(config)
    sets = [o for o in objects(config) if o["kind"] == "LeaderWorkerSet"]
    assert len(sets) == len(plans)
    for lws, (name, plan) in zip(sets, plans.items(), strict=True):
        assert lws["metadata"]["annotations"]["spark-launch/plan"] == plan["digest"], name
        assert lws["spec"]["leaderWorkerTemplate"]["size"] == len(plan["nodes"])
        for node, pod in zip(plan["nodes"], rank_pods(lws, len(plan["nodes"])), strict=True):
            variables = lws_env(plan, node["rank"])
            (vllm,) = pod["containers"]
            image = vllm["image"] if plan["runtime"] == "docker" else None
            words = [expand(w, variables) for w in vllm.get("command", []) + vllm["args"]]
            assert words == engine(node["argv"], image), (name, node["name"])
            env, secrets = pod_env(vllm, variables, node["address"])
            assert env == {**node["env"], **docker_env(node["argv"], image)}
            assert secrets == node["secrets"]
            (gate,) = pod["initContainers"]
            gate_words = [expand(w, variables) for w in gate["args"]]
            assert gate_words[gate_words.index("--") + 1 :] == words[2:]  # after `vllm serve`
            assert pod_env(gate, variables, node["address"]) == (env, secrets)


def test_a_dollar_reaches_the_pod_as_written(tmp_path: Path) -> None:
    text = (ROOT / "configs" / "demo-docker.yaml").read_text()
    spec = tmp_path / "dollar.yaml"
    spec.write_text(text.replace('HF_HUB_OFFLINE: "1"', 'HF_HUB_OFFLINE: "a$(LWS_WORKER_INDEX)b$$c"'))
    (lws,) = [o for o in yaml.safe_load_all(exported(spec)) if o and o["kind"] == "LeaderWorkerSet"]
    env = {e["name"]: e.get("value") for e in rank_pods(lws, 2)[1]["containers"][0]["env"]}
    assert expand(env["HF_HUB_OFFLINE"], {"LWS_WORKER_INDEX": "1"}) == "a$(LWS_WORKER_INDEX)b$$c"


# ---- secrets: by reference only


@pytest.mark.parametrize("config", EXPORTED, ids=[p.stem for p in EXPORTED])
def test_no_secret_value_anywhere(config: Path, tmp_path: Path) -> None:
    value = "hf_" + "S3cretValueNobodyMayPrint" * 2
    env = {"HF_TOKEN": value, "VLLM_API_KEY": value}
    printed = invoke(["export", "k8s", str(config)], env=env)
    written = invoke(["export", "k8s", str(config), "-o", str(tmp_path)], env=env)
    assert printed.exit_code == written.exit_code == 0, printed.output
    files = "".join(p.read_text() for p in tmp_path.iterdir())
    assert value not in printed.output + written.output + files
    _, file = read_file(config)
    for name in file.secrets:
        assert f"key: {name}" in files  # a reference to the Secret


def test_one_deployment_alone_and_files_by_name(tmp_path: Path) -> None:
    config = ROOT / "configs" / "multi-2x-spark.yaml"
    done = invoke(["export", "k8s", str(config), "--deployment", "small", "-o", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spark-lab-small.yaml"]
    assert done.output == f"wrote {tmp_path / 'spark-lab-small.yaml'}\n"
    lws = [o for o in yaml.safe_load_all((tmp_path / "spark-lab-small.yaml").read_text()) if o][1]
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 1 and "leaderTemplate" not in template  # a group of one: its leader
    assert lws["metadata"]["namespace"] == "inference"
    unknown = invoke(["export", "k8s", str(config), "--deployment", "huge"])
    assert unknown.exit_code == 1 and "no deployment named 'huge'" in unknown.output


def test_a_spec_that_cannot_be_exported_is_told_where(tmp_path: Path) -> None:
    text = (ROOT / "configs" / "qwen3-next-2x-spark.yaml").read_text()
    text = text.replace("name: spark-pair", "name: spark_pair")
    spec = tmp_path / "odd.yaml"
    spec.write_text(text.replace("interface: enp1s0f0np0", "interface: enp1s0f1np1", 1))
    assert invoke(["validate", str(spec)]).exit_code == 0  # a spec for SSH as it is
    done = invoke(["export", "k8s", str(spec)])
    assert done.exit_code == 2
    assert done.output.splitlines()[::2] == [
        f"{spec}:10: name: 'spark_pair' cannot name a LeaderWorkerSet",
        f"{spec}:24: nodes[1].interface: differs from spark-1's: one pod template runs every rank, "
        "on any machine",
    ]
