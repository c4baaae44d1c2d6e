"""What the exported objects share: the file they go in, their names and their metadata. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.core.export.k8s_checks import section_of
from launcher.core.spec.sections import SpecFile


@dataclass(frozen=True, slots=True)
class Manifest:
    """One file of the export: its name, the comment lines at its top, its objects in order."""

    name: str
    header: tuple[str, ...]
    objects: tuple[dict[str, Any], ...]


def secret_name(file: SpecFile) -> str:
    """The Kubernetes Secret holding the values of the spec's secrets."""
    return section_of(file).secret or f"{file.name}-secrets"


def metadata(name: str, part_of: str, namespace: str | None, **extra: Any) -> dict[str, Any]:
    """An object's name, namespace (when the spec says one) and labels."""
    where = {"namespace": namespace} if namespace else {}
    labels = {"app.kubernetes.io/part-of": part_of, "app.kubernetes.io/managed-by": "spark-launch"}
    return {"name": name, **where, "labels": labels, **extra}


def api_name(name: str) -> str:
    """The API Service's name (LWS names its own headless Service after the LeaderWorkerSet)."""
    return f"{name}-api"
