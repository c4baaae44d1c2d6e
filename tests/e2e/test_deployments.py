"""Two deployments on the test bed behind one endpoint, shared by every test of the module:
a real TP-2 Qwen3-Next pair across both nodes and a real one-node dense Llama on node2, both
answering through the endpoint (LiteLLM's proxy on node1, which `up` installs there: the spec
names no endpoint.venv) to the endpoint's own client key, and only to it; big's API on node1's
loopback, out of the other node's reach; `down --deployment big` leaves the small one serving
(its processes untouched) and the endpoint offering it alone; `down` leaves nothing."""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launcher.catalogs import router_key, router_lock
from launcher.core.endpoint_plan import ROUTER_VERSION
from launcher.core.router import managed_venv
from tests.conftest import ROOT
from tests.e2e.conftest import NAMESPACES, cli, marked_processes

pytestmark = [pytest.mark.testbed, pytest.mark.vllm_server]

SPEC = ROOT / "configs" / "demo-multi.yaml"
ENDPOINT = "http://10.99.0.1:9000/v1"
BIG, SMALL = "tiny-qwen3-next", "tiny-llama"
KEY = "sk-e2e-" + secrets.token_hex(16)  # the endpoint's client key (endpoint.key) for this module
ENV = {"SPARK_ENDPOINT_KEY": KEY}


def ask(url: str, body: dict[str, Any] | None = None, key: str | None = KEY) -> tuple[int, dict[str, Any]]:
    """One request to the bed (its addresses are this machine's namespaces), sent with `key`;
    status and JSON."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url, data, headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw or b"{}")
        except ValueError:  # a proxy's plain-text error
            return exc.code, {"text": raw.decode(errors="replace")[:500]}


def connect_from(node: str, address: str, port: int) -> str:
    """One TCP connection from inside a bed node's network: ok, refused, or why not."""
    probe = (
        "import socket, sys\n"
        "try:\n"
        f"    socket.create_connection(({address!r}, {port}), timeout=3).close(); print('ok')\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    done = subprocess.run(
        ["ip", "netns", "exec", NAMESPACES[node], "python3", "-c", probe],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout.strip() or done.stderr.strip()


# Where `up` installs the router on node1 (the bed's nodes share this machine's files and root's home).
ROUTER = Path(managed_venv(router_key()).replace("~", str(Path.home()), 1))


@pytest.fixture(scope="module")
def served(testbed: Path) -> Iterator[dict[str, Any]]:
    """`spark-launch up` of both deployments and the endpoint, for the whole module: the router
    installed on node1 by `up` itself (none there before), from the bed's wheels."""
    cli("down", SPEC, "--grace", "5")
    shutil.rmtree(ROUTER, ignore_errors=True)
    began = time.monotonic()
    done = cli("up", SPEC, "--json", env=ENV, timeout=1200)
    seconds = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    print(f"\nup of both deployments and the endpoint, the router installed: {seconds:.1f} s")
    yield {"up": json.loads(done.stdout), "seconds": seconds, "said": done.stderr}
    cli("down", SPEC, "--grace", "5")
    assert marked_processes("demo-multi") == []


def test_up_installed_the_router_on_the_head(served: dict[str, Any]) -> None:
    assert f"installing the router (litellm[proxy]=={ROUTER_VERSION}) on node1" in served["said"]
    assert (ROUTER / ".complete").exists() and (ROUTER / "bin" / "litellm").exists()
    assert (ROUTER.parent / f"{ROUTER.name}.requirements.txt").read_text() == router_lock()


def test_both_deployments_answer_through_the_endpoint(served: dict[str, Any]) -> None:
    assert {d["deployment"] for d in served["up"]["deployments"]} == {"big", "small"}
    assert served["up"]["endpoint"] == ENDPOINT
    status, models = ask(f"{ENDPOINT}/models")
    assert status == 200 and {m["id"] for m in models["data"]} == {BIG, SMALL}
    status, big = ask(f"{ENDPOINT}/completions", {"model": BIG, "prompt": "w5 w6 w7", "max_tokens": 2})
    assert status == 200 and big["model"] == BIG and big["choices"][0]["text"]
    chat = {"model": SMALL, "messages": [{"role": "user", "content": "w5 w6"}], "max_tokens": 2}
    status, small = ask(f"{ENDPOINT}/chat/completions", chat)
    assert status == 200 and small["model"] == SMALL and small["choices"][0]["message"]["content"]


def test_a_model_no_deployment_serves_is_an_openai_error(served: dict[str, Any]) -> None:
    status, answer = ask(f"{ENDPOINT}/completions", {"model": "nope", "prompt": "w5", "max_tokens": 1})
    assert status == 400 and "nope" in answer["error"]["message"]


def test_the_endpoint_answers_its_own_key_and_refuses_every_other_request(served: dict[str, Any]) -> None:
    """Refused, whatever the status: the pinned LiteLLM answers 500 to a request without a key (its
    authentication error handler fails to import prisma, which it does not need otherwise) and 400
    "No connected db." to an `sk-` key that is not its master key; neither reaches a model."""
    body = {"model": SMALL, "prompt": "w5 w6", "max_tokens": 1}
    refused = {}
    for key in (None, "sk-not-the-key", "not-even-shaped-like-one"):
        refused[key] = [ask(f"{ENDPOINT}/completions", body, key=key), ask(f"{ENDPOINT}/models", key=key)]
    for answers in refused.values():
        assert all(status >= 400 and not {"choices", "data"} & set(a) for status, a in answers), refused
    status, answer = ask(f"{ENDPOINT}/completions", body)
    assert status == 200 and answer["model"] == SMALL
    said = json.dumps(served["up"]) + cli("logs", SPEC, "--endpoint", "-n", "500").stdout
    assert KEY not in said  # its value is never printed, nor logged by the router


def test_an_api_kept_on_loopback_is_out_of_the_other_nodes_reach(served: dict[str, Any]) -> None:
    """big's API listens on node1's 127.0.0.1 (the endpoint is there): node2 and this machine
    cannot connect to it; on node1 itself it answers. small's, on node2's address, node1 reaches."""
    assert connect_from("node2", "10.99.0.1", 8000) == "ConnectionRefusedError"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("10.99.0.1", 8000), timeout=3).close()
    assert connect_from("node1", "127.0.0.1", 8000) == "ok"
    assert connect_from("node1", "10.99.0.2", 8001) == "ok"


def test_status_json_names_each_deployment(served: dict[str, Any]) -> None:
    done = cli("status", SPEC, "--json", env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)
    by_name = {d["deployment"]: d for d in found["deployments"]}
    assert [n["name"] for n in by_name["big"]["nodes"]] == ["node1", "node2"]
    assert [n["name"] for n in by_name["small"]["nodes"]] == ["node2"]
    assert all(d["state"] == "running" and d["serving"]["state"] == "serving" for d in by_name.values())
    assert found["endpoint"]["serving"] and set(found["endpoint"]["models"]) == {BIG, SMALL}


def test_verify_proves_each_deployment_and_logs_name_it(served: dict[str, Any]) -> None:
    done = cli("verify", SPEC, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)["deployments"]
    assert {d["deployment"] for d in found} == {"big", "small"} and all(d["ok"] for d in found)
    lines = cli("logs", SPEC, "-n", "2").stdout.splitlines()
    assert {line.split(" | ")[0].strip() for line in lines} == {"big/node1", "big/node2", "small/node2"}
    endpoint = cli("logs", SPEC, "--endpoint", "-n", "3").stdout.splitlines()
    assert len(endpoint) == 3 and all(line.startswith("endpoint/node1 | ") for line in endpoint)


def test_down_of_one_deployment_leaves_the_other_serving(served: dict[str, Any]) -> None:
    small = sorted(marked_processes("demo-multi/small"))
    assert small and marked_processes("demo-multi/big")
    done = cli("down", SPEC, "--deployment", "big", "--grace", "5", env=ENV)  # the router restarts
    assert done.returncode == 0, done.stderr
    assert marked_processes("demo-multi/big") == []
    assert sorted(marked_processes("demo-multi/small")) == small  # untouched, not restarted
    status, answer = ask(f"{ENDPOINT}/completions", {"model": SMALL, "prompt": "w5 w6", "max_tokens": 1})
    assert status == 200 and answer["model"] == SMALL
    status, answer = ask(f"{ENDPOINT}/completions", {"model": BIG, "prompt": "w5 w6", "max_tokens": 1})
    assert status >= 400 and answer["error"]["message"]
    status, models = ask(f"{ENDPOINT}/models")  # the endpoint offers what runs, and only that
    assert status == 200 and [m["id"] for m in models["data"]] == [SMALL]


def test_down_leaves_nothing(served: dict[str, Any]) -> None:
    done = cli("down", SPEC, "--grace", "5")
    assert done.returncode == 0, done.stderr
    assert marked_processes("demo-multi") == []
