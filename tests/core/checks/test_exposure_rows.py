"""`check` says what will listen where, and with which key: the API, the master port, the
preflight's store and the endpoint, from the plan."""

from __future__ import annotations

import pytest

from launcher.core.checks.exposure_rows import endpoint_row, exposure_rows
from launcher.load import plan_fleet
from tests.conftest import ROOT, base_spec, edit, plan_of, spec_of


@pytest.fixture(autouse=True)
def models_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("launcher.load.local_model_files", lambda spec: None)


def rows_of(data: dict[str, object], collective: bool = True) -> dict[str, tuple[str, bool, str]]:
    spec, plan = spec_of(data), plan_of(data)
    return {
        r.item: (next(iter(r.values.values())), r.ok, r.level) for r in exposure_rows(spec, plan, collective)
    }


def test_an_api_on_the_heads_address_without_an_endpoint_is_a_warning_row_naming_the_key() -> None:
    found = rows_of(edit(base_spec(), secrets=["VLLM_API_KEY"]))
    value, ok, level = found["API 10.0.0.1:8000"]
    assert not ok and level == "warn" and value.endswith("VLLM_API_KEY on /v1 only")
    assert found["master port *:29501"][0].startswith("every interface (torch's store, bound by vLLM)")
    assert found["master port *:29501"][1] and "firewall it to n2" in found["master port *:29501"][0]
    store = found["preflight store 10.0.0.1:<a free port>"][0]
    assert store.startswith("10.0.0.1 only, about 40 s during check")


def test_an_api_on_loopback_passes_and_the_preflight_row_follows_the_preflight() -> None:
    found = rows_of(edit(base_spec(), **{"api.listen": "loopback"}), collective=False)
    assert found["API 127.0.0.1:8000"] == (
        "loopback: the launcher (through SSH) and nothing; no key",
        True,
        "fail",
    )
    assert not [item for item in found if item.startswith("preflight store")]


def test_one_node_has_no_master_port_row() -> None:
    data = edit(base_spec(nodes=1), **{"serve.tensor_parallel_size": 1})
    assert [item.split()[0] for item in rows_of(data)] == ["API"]


def test_behind_the_endpoint_the_rows_say_who_reaches_each_api_and_the_endpoints_key() -> None:
    f = plan_fleet(ROOT / "configs" / "multi-2x-spark.yaml")
    big, small = f.deployments
    (api,) = [r for r in exposure_rows(big.spec, big.plan, True) if r.item.startswith("API")]
    said = "loopback: the launcher (through SSH) and the endpoint on spark-1; VLLM_API_KEY on /v1 only"
    assert api.ok and api.values == {"spark-1": said}
    (api,) = exposure_rows(small.spec, small.plan, True)
    assert api.ok and api.item == "API 10.0.0.2:8001"
    assert api.values["spark-2"].startswith("the endpoint on spark-1, and whoever else reaches 10.0.0.2")
    assert f.endpoint is not None
    row = endpoint_row(f.endpoint)
    assert row.ok and row.values == {"spark-1": "whoever reaches it; clients send SPARK_ENDPOINT_KEY"}
