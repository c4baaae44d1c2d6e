"""The spec `init` writes: every decision as an entry with its reason, then the text. Pure.

The settings that must agree on every node are written out with the values the plan
derives for the release found (from the same rule table `plan` uses), so the written spec
plans to exactly what it says. The text is read back through the project's own loader
and planned: its problems, located by line, are what `init` tells the user to edit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from launcher.core.init.decide import Decisions
from launcher.core.init.draft import GB10_MEMORY, GB10_WHY, Decided, cpu_kv_space, model_kind
from launcher.core.init.text import CHOOSE, Entry, choose_lines, render
from launcher.core.plan import PlanProblems, build_plan
from launcher.core.spec.sections import Spec
from launcher.core.spec.validate import validate_spec
from launcher.core.spec.yamlsource import load_document
from launcher.core.vllm.catalog import Catalog
from launcher.core.vllm.models import ModelFacts, model_facts
from launcher.errors import Problem, SparkLaunchError

# Derived settings written out under `serve`, in this order.
PINNED = ("enable_prefix_caching", "enable_chunked_prefill", "mamba_cache_mode", "port", "master_port")
FALLBACK = {"enable_prefix_caching": True, "enable_chunked_prefill": True, "port": 8000, "master_port": 29501}


@dataclass(frozen=True, slots=True)
class Written:
    """The spec's text, and what still needs an edit before it can run (problems by line)."""

    text: str
    problems: tuple[str, ...]  # `file:line: key: message`, empty when ready
    choose_lines: tuple[int, ...]

    @property
    def ready(self) -> bool:
        """True when the spec validates and plans as written."""
        return not self.problems and not self.choose_lines


def entry(key: str, decided: Decided, comment: str = "") -> Entry:
    """An entry for a decided value (or CHOOSE with what to choose from)."""
    return Entry(key, decided.value, notes=decided.notes, comment=comment, choose=decided.choose)


def compose(d: Decisions, catalog: Catalog | None, header: list[str], filename: str) -> Written:
    """The spec for these decisions and the release's catalog (None: no catalog here), written."""
    d = with_model_kind(d, catalog)
    return written(header, entries(d, catalog), filename, catalog, d.model_kind.value)


def with_model_kind(d: Decisions, catalog: Catalog | None) -> Decisions:
    """The decisions with model.kind as the release's registry sees the model's config.json."""
    if d.path.value is None or not d.model_kind.notes:
        return d
    source = d.model_kind.notes[0].removeprefix("config.json on ")
    return replace(d, model_kind=model_kind(d.facts, source, catalog))


def entries(d: Decisions, catalog: Catalog | None) -> tuple[Entry, ...]:
    """The whole spec as entries, the derived serve settings written out."""
    base = _sections(d, ())
    pins = serve_pins(data_of(base), catalog, d.model_kind.value, str(d.version.value))
    return _sections(d, pins)


def _sections(d: Decisions, pins: tuple[Entry, ...]) -> tuple[Entry, ...]:
    r = d.request
    top = [Entry("name", r.name, comment="names the cluster's state, logs and processes")]
    if r.ssh_config:
        top.append(Entry("ssh_config", r.ssh_config, comment="the ssh_config init connected with"))
    runtime = "docker" if r.image else "venv"
    vllm = Entry(
        "vllm",
        children=(
            replace(entry("version", d.version), quoted=True),
            Entry("runtime", runtime),
            entry("image" if r.image else "venv", d.place),
        ),
    )
    model = Entry(
        "model",
        children=(
            entry("path", d.path),
            entry("kind", d.model_kind)
            if d.model_kind.value is not None
            else replace(entry("kind", d.model_kind), off=True),
            Entry(
                "served_name", "my-model", off=True, comment="the name clients ask for (default: the path)"
            ),
        ),
    )
    return (*top, vllm, _nodes(d), model, _serve(d, pins), _env(d))


def _nodes(d: Decisions) -> Entry:
    choice = d.choice
    notes = ["the first node is rank 0 and serves the API"]
    if choice.chosen is not None:
        notes += ["fabric: " + "; ".join(choice.why)]
    notes += [f"  not chosen: {line}" for line in choice.others]
    links = choice.chosen.links if choice.chosen else (None,) * len(d.request.names)
    differ = len({link.interface for link in links if link}) > 1
    items = []
    for index, (name, host, link) in enumerate(zip(d.request.names, d.request.hosts, links, strict=True)):
        seen = tuple(f"  {name}: {line}" for line in d.links_seen.get(name, ()))
        fields = [Entry("name", name, notes=seen), Entry("ssh", host)]
        if link is None:
            why = "no link between the nodes could be chosen (see above): give each node's fabric"
            fields += [Entry("address", None, choose=why), Entry("interface", None, choose=why)]
        else:
            master = ", --master-addr" if index == 0 else ""
            names = "; names differ between nodes" if differ else ""
            fields += [
                Entry("address", link.address, comment=f"VLLM_HOST_IP{master}"),
                Entry("interface", link.interface, comment=f"NCCL/GLOO_SOCKET_IFNAME{names}"),
            ]
            if link.rdma:
                fields.append(Entry("hca", list(link.rdma), comment="NCCL_IB_HCA: the port's RoCE devices"))
        fields.append(entry("gpus", d.gpus[name]))
        items.append(tuple(fields))
    return Entry("nodes", items=tuple(items), notes=tuple(notes))


def _serve(d: Decisions, pins: tuple[Entry, ...]) -> Entry:
    total = sum(int(g.value) for g in d.gpus.values() if g.value is not None)
    known = all(g.value for g in d.gpus.values())
    per = "one worker per node, no GPU" if d.kind == "cpu" else "one worker per GPU found"
    children = [
        Entry(
            "tensor_parallel_size",
            total if known else None,
            notes=(f"{per}: {total} on {len(d.gpus)} node(s)",),
            choose=None if known else "the GPU counts are not known (see the nodes' gpus)",
        ),
        *pins,
    ]
    if d.kind == "cpu":
        children.append(
            Entry("enforce_eager", True, notes=("CPU build: compiling graphs takes minutes on a CPU",))
        )
    elif d.kind == "gb10":
        children.append(Entry("gpu_memory_utilization", GB10_MEMORY, notes=(GB10_WHY,)))
    else:
        children.append(
            Entry("gpu_memory_utilization", 0.9, off=True, notes=("vLLM's default; lower it to leave room",))
        )
    return Entry("serve", children=tuple(children), comment="`vllm serve` options, identical on every node")


def _env(d: Decisions) -> Entry:
    children = [
        Entry(
            "HF_HUB_OFFLINE",
            "1",
            notes=("the model is a local directory: nothing to fetch from the Hugging Face Hub",),
        )
    ]
    if d.kind == "cpu":
        children.append(entry("VLLM_CPU_KVCACHE_SPACE", cpu_kv_space(d.facts)))
    return Entry("env", children=tuple(children), comment="identical on every node")


def serve_pins(data: Any, catalog: Catalog | None, kind: str | None, version: str) -> tuple[Entry, ...]:
    """The derived settings the plan pins for this spec and release, each with the plan's reason."""
    derived = _derived(data, catalog, kind)
    if derived is None:
        note = "not checked against a catalog of this release (the spec has open choices)"
        return tuple(
            Entry(k, v, notes=(note,) if i == 0 else ()) for i, (k, v) in enumerate(FALLBACK.items())
        )
    out = []
    for setting in PINNED:
        if setting not in derived:
            continue
        value, flag, reason = derived[setting]
        why = f"vLLM {version}'s own choice for this model, written out: {reason}"
        if flag is None:
            out.append(Entry(setting, value, off=True, notes=(f"{why} (implied, not a flag)",)))
        else:
            out.append(Entry(setting, value, notes=(why,) if setting not in ("port", "master_port") else ()))
    return tuple(out)


def _derived(data: Any, catalog: Catalog | None, kind: str | None) -> dict[str, Any] | None:
    spec, problems = validate_spec(data)
    if catalog is None or spec is None or problems:
        return None
    try:
        plan = build_plan(spec, _facts(spec, kind, catalog), catalog)
    except PlanProblems:
        return None
    return {d.setting: (d.value, d.flag, d.reason.split(" [")[0]) for d in plan.derived}


def _facts(spec: Spec, kind: str | None, catalog: Catalog) -> ModelFacts:
    """What the plan knows of the model where the spec is planned later: `model.kind` alone."""
    declared = spec.model.kind if spec.model.kind is not None else kind
    return model_facts(None, "config.json on the nodes", catalog, kind=declared, hybrid=spec.model.hybrid)


def data_of(items: tuple[Entry, ...]) -> dict[str, Any]:
    """The plain data the entries stand for (what the loader reads back from the text)."""
    out: dict[str, Any] = {}
    for e in items:
        if e.off:
            continue
        if e.children:
            out[e.key] = data_of(e.children)
        elif e.items:
            out[e.key] = [data_of(item) for item in e.items]
        else:
            out[e.key] = CHOOSE if e.choose else e.value
    return out


def written(
    header: list[str], items: tuple[Entry, ...], filename: str, catalog: Catalog | None, kind: str | None
) -> Written:
    """Render, read back through the loader, validate and plan: what still needs an edit, by line."""
    text = render(header, items)
    try:
        document = load_document(text, filename)
    except SparkLaunchError as exc:  # a bug in the renderer: say so plainly
        raise SparkLaunchError(f"init wrote a spec its own loader cannot read: {exc.message}") from None
    spec, problems = validate_spec(document.data)
    if spec is not None and not problems and catalog is not None:
        try:
            build_plan(spec, _facts(spec, kind, catalog), catalog)
        except PlanProblems as exc:
            problems = list(exc.problems)
    elif spec is not None and not problems:
        problems = [Problem(("vllm", "version"), f"vLLM {spec.vllm.version} has no flag catalog here")]
    error = document.error(problems)
    lines = tuple(error.render().splitlines()) if problems else ()
    return Written(text, lines, tuple(choose_lines(text)))
