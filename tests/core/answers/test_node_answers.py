"""Every node answer is read strictly (launcher/core/answers): a table of malformed and hostile
answers, each refused saying where and what; and at the Agent, a NodeError naming the node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from launcher.core.answers import facts_answer, probe_answer, run_answer, sync_answer
from launcher.core.answers.discover_answer import discovered
from launcher.core.answers.read import BadAnswer, Refused, loads
from launcher.node.agent import Agent
from launcher.node.executor import NodeError, Result
from tests.fakes.executor import ScriptedExecutor
from tests.init_facts import bed_pair

SHA = "ab" * 32
ROOM = {"free": 1 << 30, "block": 4096, "at": "/models/m", "writable": True, "unwritable": []}


DEEP: list[Any] = [1]
for _ in range(40):
    DEEP = [DEEP]


def manifest_of(**changes: Any) -> dict[str, Any]:
    """A well-formed manifest answer for /models/m, with `changes`."""
    return {
        "ok": True,
        "path": "/models/m",
        "exists": True,
        "room": ROOM,
        "files": {"config.json": [10, SHA]},
    } | changes


HOST_DETAILS: dict[str, Any] = {
    "kernel": "6.1.0",
    "cmdline": "ro quiet",
    "cma": {"CmaTotal": 0, "CmaFree": 0},
    "nvidia": {"driver": None, "cuda": None},
    "link": {"state": "up", "speed": 10000, "mtu": 1500},
    "hcas": [{"device": "rocep1s0f1", "listed": True, "present": True, "state": "ACTIVE"}],
    "firmware": None,
    "bios": None,
    "nccl": None,
    "storage_driver": None,
    "open_files": [1024, 524288],
}


def facts_of(**changes: Any) -> dict[str, Any]:
    """A well-formed facts answer, with `changes` (dotted keys one level deep: network__addresses)."""
    answer: dict[str, Any] = {
        "ok": True,
        "ours_running": False,
        "vllm": {"vllm_binary": True, "vllm_version": "0.32.0", "vllm_build": "b1"},
        "env": {"HF_HOME": "/hf"},
        "network": {
            "interface_exists": True,
            "addresses": ["10.0.0.1"],
            "holds_address": True,
            "ports_free": {},
        },
        "host": {"gpus": None, "kernel": "6.1.0", "os": "Debian GNU/Linux 12", "MemTotal": 1 << 30},
        "host_details": HOST_DETAILS,
        "tools": {"py_spy": None, "ptrace": "root", "ptrace_ok": True},
        "memory": {"meminfo": {"MemTotal": 1 << 30}, "gpus": None, "model_config": None},
    }
    for dotted, value in changes.items():
        section, _, key = dotted.partition("__")
        if key:
            answer[section] = {**answer[section], key: value}
        else:
            answer[section] = value
    return answer


def read_manifest(raw: object) -> object:
    return sync_answer.manifest(raw, "/models/m")


CASES: list[tuple[str, Callable[[object], object], object, str]] = [
    # manifests name what a sync copies and deletes
    ("a ../ name", read_manifest, manifest_of(files={"../etc/passwd": [1, SHA]}), "is not a path inside"),
    ("an absolute name", read_manifest, manifest_of(files={"/etc/passwd": [1, SHA]}), "is not a path inside"),
    ("a name with a newline", read_manifest, manifest_of(files={"a\nb": [1, SHA]}), "control character"),
    ("a name with an escape", read_manifest, manifest_of(files={"a\x1b[2Jb": [1, SHA]}), "control character"),
    (
        "a name with a bidi override",
        read_manifest,
        manifest_of(files={"a\u202eb": [1, SHA]}),
        "control character",
    ),
    ("an empty part", read_manifest, manifest_of(files={"a//b": [1, SHA]}), "is not a path inside"),
    ("a huge size", read_manifest, manifest_of(files={"a": [1 << 70, SHA]}), "out of range"),
    ("a negative size", read_manifest, manifest_of(files={"a": [-1, SHA]}), "out of range"),
    ("a size as text", read_manifest, manifest_of(files={"a": ["10", SHA]}), "expected a whole number"),
    ("a size as true", read_manifest, manifest_of(files={"a": [True, SHA]}), "expected a whole number"),
    ("a hash that is not one", read_manifest, manifest_of(files={"a": [1, "$(reboot)"]}), "hex digits"),
    ("an entry of three", read_manifest, manifest_of(files={"a": [1, SHA, 3]}), "entries, more than 2"),
    ("another directory", read_manifest, manifest_of(path="/etc"), "not '/models/m'"),
    (
        "a room elsewhere, relative",
        read_manifest,
        manifest_of(room={**ROOM, "at": "models"}),
        "not an absolute",
    ),
    (
        "an index naming ../",
        read_manifest,
        manifest_of(indexes={"i.index.json": ["../x"]}),
        "not a path inside",
    ),
    ("files as a list", read_manifest, manifest_of(files=["a"]), "expected an object"),
    ("not an object", read_manifest, ["ok"], "expected an object"),
    # facts feed check's rows and the memory guard
    (
        "a version with a newline",
        facts_answer.facts,
        facts_of(vllm__vllm_version="0.32\n0"),
        "control character",
    ),
    (
        "an env name that is not one",
        facts_answer.facts,
        facts_of(env={"A=B; rm": "x"}),
        "not a variable name",
    ),
    (
        "a port that is not one",
        facts_answer.facts,
        facts_of(network__ports_free={"99999": True}),
        "is not a port",
    ),
    (
        "memory as text",
        facts_answer.facts,
        facts_of(memory__meminfo={"MemTotal": "lots"}),
        "expected a whole number",
    ),
    (
        "a changed file named ../",
        facts_answer.facts,
        facts_of(vllm__vllm_files={"files": 1, "hashed": 1, "differ": ["../a"]}),
        "not a path inside",
    ),
    (
        "no network part",
        facts_answer.facts,
        {k: v for k, v in facts_of().items() if k != "network"},
        "has no 'network'",
    ),
    (
        "an mtu as text",
        facts_answer.facts,
        facts_of(host_details__link={"mtu": "9000"}),
        "expected a whole number",
    ),
    (
        "an rdma device with an escape",
        facts_answer.facts,
        facts_of(host_details__hcas=[{"device": "a\x1b[2J", "listed": True, "present": True}]),
        "control character",
    ),
    (
        "a config nested too deep",
        facts_answer.facts,
        facts_of(memory__model_config={"a": DEEP}),
        "nests deeper",
    ),
    # the run's answers decide what runs and what is stopped
    (
        "a state without its run",
        run_answer.started,
        {"ok": True, "state": {"digest": "d"}},
        "has no 'run_id'",
    ),
    (
        "a pid of 0",
        run_answer.started,
        {"ok": True, "state": {"run_id": "r", "digest": "d", "pid": 0}},
        "out of range",
    ),
    (
        "alive as text",
        run_answer.NodeState.parse,
        {"ok": True, "alive": "yes", "processes": 1},
        "expected true or false",
    ),
    ("a log without its size", run_answer.WatchEvent.parse, {"log": "x"}, "comes with its log_size"),
    ("a watch line saying nothing", run_answer.WatchEvent.parse, {"hello": 1}, "neither a log chunk"),
    (
        "a count of processes as a float",
        run_answer.Stopped.parse,
        {"ok": True, "found": 1.5, "remaining": 0},
        "expected a whole number",
    ),
    (
        "a lock holder with a bad pid",
        run_answer.Locked.parse,
        {"ok": False, "holder": {"pid": "me"}},
        "expected a whole number",
    ),
    # sync's other answers
    (
        "a relay command with a newline",
        sync_answer.transfer_event,
        {"event": "relay", "command": ["rsync", "a\nb"]},
        "control character",
    ),
    (
        "a relay command of 100 words",
        sync_answer.transfer_event,
        {"event": "relay", "command": ["x"] * 100},
        "more than 64",
    ),
    ("an unknown event", sync_answer.transfer_event, {"event": "shell", "command": "id"}, "is not one of"),
    (
        "a reach that failed at nothing",
        sync_answer.Reach.parse,
        {"ok": False, "rsh": "ssh", "failed": "x", "error": "?"},
        "is not one of",
    ),
    # the image a sync copies, the probe, init's facts, a bug report's files
    (
        "an image size as text",
        facts_answer.ImageFacts.parse,
        {"docker": True, "image_id": "sha256:a", "size": "1G"},
        "whole number",
    ),
    (
        "a resolved key with an escape",
        probe_answer.Probed.parse,
        {"ok": True, "resolved": {"a\x1b": 1}},
        "control character",
    ),
    (
        "a gathered file that is not text",
        probe_answer.gathered,
        {"ok": True, "files": {"x": 5}},
        "expected text",
    ),
    ("a listener on port 0", probe_answer.Listening.parse, {"listening": True, "port": 0}, "out of range"),
    (
        "an interface named with a newline",
        discovered,
        bed_pair()["node1"] | {"hostname": "h\nx"},
        "control character",
    ),
]


@pytest.mark.parametrize(("parse", "raw", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_malformed_answer_is_refused_saying_where_and_what(
    parse: Callable[[object], object], raw: object, expected: str
) -> None:
    with pytest.raises(BadAnswer, match=None) as caught:
        parse(raw)
    assert expected in str(caught.value)


def test_well_formed_answers_parse_into_typed_values() -> None:
    m = sync_answer.manifest(manifest_of(), "/models/m")
    assert m.files["config.json"].size == 10 and m.room is not None and m.room.at == "/models/m"
    assert facts_answer.facts(facts_of())["vllm"]["vllm_version"] == "0.32.0"
    details = facts_answer.facts(facts_of())["host_details"]
    assert details["link"]["mtu"] == 1500 and details["hcas"][0]["state"] == "ACTIVE"
    assert run_answer.started({"ok": False, "error": "already running"}) == "already running"
    assert discovered(bed_pair()["node1"])["interfaces"][1]["name"] == "eth0"


def test_an_answer_that_says_it_failed_is_refused_with_its_reason() -> None:
    with pytest.raises(Refused, match="cannot read the model directory /models/m: EACCES"):
        sync_answer.manifest({"ok": False, "path": "/models/m", "error": "EACCES"}, "/models/m")


def test_text_that_is_not_json_is_refused() -> None:
    with pytest.raises(BadAnswer, match="not JSON"):
        loads('{"ok": tru')


def agent_answering(answer: str) -> tuple[Agent, ScriptedExecutor]:
    executor = ScriptedExecutor({("n2", "rank_status"): lambda w: Result("", 0, answer + "\n", "")})
    return Agent(executor, "t", "n2"), executor


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            '{"ok": true, "alive": 1, "processes": 0}',
            "malformed answer from the node script rank_status: alive:",
        ),
        ('{"ok": true, "alive": fal', "malformed answer from the node script rank_status: answer: not JSON"),
        ('{"ok": false, "error": "disk full"}', "malformed answer from the node script rank_status: ok:"),
    ],
)
def test_the_agent_names_the_node_and_what_was_wrong(answer: str, expected: str) -> None:
    agent, _ = agent_answering(answer)
    with pytest.raises(NodeError) as caught:
        agent.status()
    assert caught.value.node == "n2" and caught.value.message.startswith(f"node n2: {expected}")
    assert "strictly" in str(caught.value.hint)
