"""Problems of the spec's `export.k8s` section: names Kubernetes takes, images, the model's mount. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence

from launcher.core.spec.k8s_section import HOST, WHERE, K8sSection
from launcher.core.spec.spec_checks import IMAGE
from launcher.errors import Problem

# A Kubernetes object name (RFC 1123 subdomain), a namespace (RFC 1123 label), a resource name.
OBJECT = r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?\Z"
LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z"
RESOURCE = r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z"
OBJECT_HINT = "lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"


def check_k8s(section: K8sSection, runtime: str, endpoint: bool, model_paths: Sequence[str]) -> list[Problem]:
    """Problems of the section: names Kubernetes takes, images, and a mount holding every model."""
    problems = _images(section, runtime, endpoint)
    names = {"secret": OBJECT, "model_claim": OBJECT, "namespace": LABEL, "rdma_resource": RESOURCE}
    for key, pattern in names.items():
        value = getattr(section, key)
        if value is not None and not re.match(pattern, value):
            hint = "e.g. rdma/rdma_shared_device_a" if key == "rdma_resource" else OBJECT_HINT
            problems.append(Problem((*WHERE, key), f"{value!r} is not a Kubernetes name", hint))
    network = section.network
    if network != HOST and not all(re.match(OBJECT, part) for part in network.split("/", 1)):
        hint = "host, or a NetworkAttachmentDefinition's [namespace/]name"
        problems.append(Problem((*WHERE, "network"), f"{network!r} is not a network", hint))
    return problems + _mount(section.model_mount, model_paths)


def _images(section: K8sSection, runtime: str, endpoint: bool) -> list[Problem]:
    problems = []
    for key in ("image", "endpoint_image"):
        value = getattr(section, key)
        if value is not None and not re.match(IMAGE, value):
            hint = "e.g. registry.example.com/vllm:0.33.0 (no spaces, no leading '-')"
            problems.append(Problem((*WHERE, key), f"{value!r} is not a container image reference", hint))
    if section.image is not None and runtime == "docker":
        hint = "remove it: the pods run vllm.image, the image the plan was checked with"
        problems.append(Problem((*WHERE, "image"), "is only used with runtime venv", hint))
    if section.endpoint_image is not None and not endpoint:
        hint = "remove it, or add an endpoint:"
        problems.append(Problem((*WHERE, "endpoint_image"), "is only used with an endpoint", hint))
    return problems


def _mount(mount: str | None, model_paths: Sequence[str]) -> list[Problem]:
    where = (*WHERE, "model_mount")
    if mount is None:
        return []
    if not mount.startswith("/") or any(c in mount for c in "\n\r\t"):
        return [Problem(where, f"{mount!r} is not an absolute path", "e.g. /models")]
    outside = [p for p in model_paths if not within(p, mount)]
    if not outside:
        return []
    hint = "mount the folder that holds every deployment's model.path"
    return [Problem(where, f"does not hold {', '.join(outside)}", hint)]


def within(path: str, folder: str) -> bool:
    """True when `path` is `folder` or lies inside it."""
    folder = folder.rstrip("/") or "/"
    return path == folder or path.startswith(folder if folder == "/" else folder + "/")
