"""`up` installs the router on the head where the launcher keeps it: once, from the lock and the
script that ship with the launcher; never into a venv the spec names; a failed install names the
head, pip's last words and what to do."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from launcher.catalogs import router_lock, router_script
from launcher.core.endpoint_plan import ROUTER_VERSION
from launcher.load import plan_fleet
from launcher.node.executor import Result
from launcher.operations.reporter import Silent
from launcher.operations.running.endpoint import Endpoint, EndpointFailed, ensure_router
from tests.conftest import ROOT

MULTI = ROOT / "configs" / "multi-2x-spark.yaml"


@dataclass
class Head:
    """A head node answering the router's calls: no router until the install ran (or failed)."""

    installs: bool = True
    built: bool = False
    sent: list[tuple[str, str | None]] = field(default_factory=list)

    def run(self, node: str, command: str, stdin: str | None = None, timeout: float | None = None) -> Result:
        self.sent.append((command, stdin))
        if command.startswith("bash -s -- --venv"):
            self.built = self.installs
            return Result(
                command, 0 if self.installs else 1, "", "" if self.installs else "ERROR: no index\n"
            )
        if "importlib.metadata" in command:
            return Result(command, 0 if self.built else 1, f"{ROUTER_VERSION}\n" if self.built else "", "")
        return Result(command, 0, "", "")


def endpoint(head: Head) -> Endpoint:
    plan = plan_fleet(MULTI).endpoint
    assert plan is not None
    return Endpoint(plan, head)  # type: ignore[arg-type]


def test_the_router_is_installed_once_from_the_shipped_lock() -> None:
    head = Head()
    ensure_router(endpoint(head), Silent())
    commands = [c for c, _ in head.sent]
    assert len(commands) == 3 and commands[1].startswith("mkdir -p") and commands[2].startswith("bash -s")
    assert head.sent[1][1] == router_lock() and head.sent[2][1] == router_script()
    head.sent.clear()
    ensure_router(endpoint(head), Silent())  # installed: only asked which release is there
    assert len(head.sent) == 1 and "importlib.metadata" in head.sent[0][0]


def test_a_venv_the_spec_names_is_never_installed_into() -> None:
    head = Head()
    plan = endpoint(head).plan
    theirs = replace(plan, argv=("/opt/router/bin/litellm", *plan.argv[1:]))  # endpoint.venv: /opt/router
    ensure_router(Endpoint(theirs, head), Silent())  # type: ignore[arg-type]
    assert head.sent == []


def test_a_failed_install_names_the_head_and_pips_words() -> None:
    with pytest.raises(EndpointFailed) as failed:
        ensure_router(endpoint(Head(installs=False)), Silent())
    assert failed.value.message == "could not install the router on spark-1: ERROR: no index"
    assert failed.value.hint is not None and "PIP_INDEX_URL" in failed.value.hint
