"""Every deployment of a spec file, planned, and the endpoint in front of them. Pure.

Each deployment is planned exactly as a one-model spec is (its own derived settings, its
own master port); what only the whole file can see is decided here: ports that two
deployments (or the endpoint) would bind on one node, and the endpoint's routes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.core.plan import Plan
from launcher.core.spec.deployments import deployment_names
from launcher.core.spec.sections import Spec, SpecFile
from launcher.errors import Problem, SparkLaunchError

if TYPE_CHECKING:  # imported by the spec files that have an endpoint: not paid by every plan
    from launcher.core.endpoint_plan import EndpointPlan


@dataclass(frozen=True, slots=True)
class Deployed:
    """One deployment: its name (`--deployment NAME`), its Spec and its Plan."""

    name: str
    spec: Spec
    plan: Plan


@dataclass(frozen=True, slots=True)
class Fleet:
    """A planned spec file: its deployments in the file's order, and the endpoint (if any)."""

    name: str
    multi: bool  # written with deployments: (else one deployment, named after the cluster)
    deployments: tuple[Deployed, ...]
    endpoint: EndpointPlan | None

    def secrets(self) -> tuple[str, ...]:
        """The names of every secret some process of the file gets: the deployments' (all the
        same), then the endpoint's (its client key is its alone)."""
        names = [s for d in self.deployments for s in d.spec.secrets]
        names += list(self.endpoint.secrets if self.endpoint else ())
        return tuple(dict.fromkeys(names))

    def warnings(self) -> list[str]:
        """What an operator must hear about the whole file (validate, plan and up say them): each
        deployment's, named when there are several, then the endpoint's."""
        said = [
            f"deployment {d.name}: {w}" if self.multi else w
            for d in self.deployments
            for w in d.plan.warnings
        ]
        return said + list(self.endpoint.warnings if self.endpoint else ())

    def select(self, name: str | None) -> tuple[Deployed, ...]:
        """Every deployment, or the one named (a SparkLaunchError naming the others)."""
        if name is None:
            return self.deployments
        chosen = tuple(d for d in self.deployments if d.name == name)
        if not chosen:
            known = ", ".join(d.name for d in self.deployments)
            raise SparkLaunchError(f"no deployment named {name!r} in {self.name}", f"deployments: {known}")
        return chosen


def build_fleet(file: SpecFile, specs: tuple[Spec, ...], plans: tuple[Plan, ...], router_venv: str) -> Fleet:
    """The fleet of planned deployments; a PlanProblems-style list from `port_problems` first.
    `router_venv`: where the endpoint's router runs when the spec names no endpoint.venv (the
    launcher's own venv on the head, `core.router.managed_venv`)."""
    deployed = tuple(Deployed(n, s, p) for n, s, p in zip(deployment_names(file), specs, plans, strict=True))
    endpoint = None
    if file.endpoint is not None:
        from dataclasses import replace

        from launcher.core.endpoint_plan import endpoint_plan, route

        routes = tuple(route(d.name, d.spec, d.plan) for d in deployed)
        section = file.endpoint if file.endpoint.venv else replace(file.endpoint, venv=router_venv)
        endpoint = endpoint_plan(file.name, file.nodes[0], section, routes, file.env, file.secrets)
    return Fleet(file.name, bool(file.deployments), deployed, endpoint)


@dataclass(frozen=True, slots=True)
class _Claim:
    """A port that one owner (`what`) binds on a node; `written` in the spec at `path`, or a default."""

    node: str
    port: int
    what: str
    path: tuple[str | int, ...]
    written: bool


def port_problems(file: SpecFile, specs: tuple[Spec, ...], plans: tuple[Plan, ...]) -> list[Problem]:
    """Ports two owners would bind on one node: API ports, master ports, the endpoint's."""
    by_place: dict[tuple[str, int], list[_Claim]] = defaultdict(list)
    for claim in _claims(file, specs, plans):
        by_place[(claim.node, claim.port)].append(claim)
    problems = []
    for (node, port), claims in by_place.items():
        for claim in claims if len(claims) > 1 else ():
            others = ", ".join(c.what for c in claims if c is not claim)
            default = "" if claim.written else " (the default)"
            problems.append(
                Problem(
                    claim.path,
                    f"port {port}{default} on {node} is also {others}",
                    "give each its own port: two servers cannot listen on one port of a node",
                )
            )
    return problems


def _claims(file: SpecFile, specs: tuple[Spec, ...], plans: tuple[Plan, ...]) -> list[_Claim]:
    claims = []
    for i, (name, spec, plan) in enumerate(zip(deployment_names(file), specs, plans, strict=True)):
        where: tuple[str | int, ...] = ("deployments", i, "serve") if file.deployments else ("serve",)
        head = spec.nodes[0].name
        who = f"deployment {name}'s" if file.deployments else "the"
        claims.append(_Claim(head, plan.api_port, f"{who} API port", (*where, "port"), "port" in spec.serve))
        if plan.master_port is not None:
            written = "master_port" in spec.serve
            claims.append(
                _Claim(head, plan.master_port, f"{who} master port", (*where, "master_port"), written)
            )
    if file.endpoint is not None:
        claims.append(
            _Claim(file.nodes[0].name, file.endpoint.port, "the endpoint's port", ("endpoint", "port"), True)
        )
    return claims
