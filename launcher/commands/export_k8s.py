"""`spark-launch export k8s`: the planned deployments as Kubernetes manifests, printed or written.

The manifests are built in the core (`core.export.k8s_manifests`, plain data); here they become
YAML (one file per deployment, its documents in order, the comment header on top: YAML's
dumper keeps no comments), and the gate's source is taken from the node scripts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from launcher.core.export.k8s_checks import export_problems
from launcher.core.export.k8s_manifests import export_manifests
from launcher.core.export.k8s_objects import Manifest
from launcher.core.fleet_plan import Fleet
from launcher.core.spec.sections import SpecFile
from launcher.core.spec.yamlsource import Document
from launcher.errors import SparkLaunchError


def gate_source() -> str:
    """The gate's script as each pod runs it: the one place that says how the probe reaches a pod
    (today: the node scripts' bundle, the probe inlined, carried in the deployment's ConfigMap)."""
    from launcher.node.scripts import bundle

    return bundle("k8s_gate")


def manifests(document: Document, file: SpecFile, fleet: Fleet, only: str | None) -> list[Manifest]:
    """Every manifest of the planned spec; a SpecError locating what keeps it from Kubernetes."""
    fleet.select(only)  # an unknown deployment is named before anything else
    problems = export_problems(file, fleet)
    if problems:
        raise document.error(problems)
    return export_manifests(file, fleet, gate_source(), only)


class _Dumper(yaml.SafeDumper):
    """Text of several lines as a literal block, so a ConfigMap's files read as files."""


def _text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _text)


def render(manifest: Manifest) -> str:
    """The file's text: its comment header, then its objects as YAML documents."""
    head = "".join(f"# {line}\n" if line else "#\n" for line in manifest.header)
    body: list[Any] = list(manifest.objects)
    return head + yaml.dump_all(body, Dumper=_Dumper, sort_keys=False, explicit_start=True, width=100)


def write(done: list[Manifest], out_dir: str) -> list[Path]:
    """Each manifest to `<out_dir>/<name>.yaml` (the folder made if missing); the paths written."""
    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for manifest in done:
            path = folder / f"{manifest.name}.yaml"
            path.write_text(render(manifest))
            paths.append(path)
    except OSError as exc:
        raise SparkLaunchError(
            f"cannot write {exc.filename or out_dir}: {exc.strerror}", "give -o a folder you can write"
        ) from None
    return paths
