"""The spec's `export.k8s` section: validated with the rest of the spec, every problem located and
told what to write; the spec without it still plans, and only the export asks for what it lacks."""

from __future__ import annotations

from typing import Any

import pytest

from launcher.core.spec.validate import validate_file
from tests.conftest import base_spec, edit

BASE = edit(base_spec(), **{"export.k8s.image": "registry.example.com/vllm:0.32.0"})
DOCKER = edit(
    base_spec(),
    **{"vllm.runtime": "docker", "vllm.venv": None, "vllm.image": "nvcr.io/nvidia/vllm:26.05-py3"},
)


def problems(data: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(key path, message, hint) of every problem of the spec file's data."""
    return [(p.dotted, p.message, p.hint) for p in validate_file(data)[1]]


def test_a_spec_with_and_without_the_section_is_valid() -> None:
    assert problems(base_spec()) == []
    assert problems(BASE) == []
    full = {
        "image": "registry.example.com/vllm:0.32.0",
        "namespace": "inference",
        "network": "fabric/roce",
        "model_claim": "models",
        "model_mount": "/models",
        "secret": "t-secrets",
        "rdma_resource": "rdma/rdma_shared_device_a",
    }
    assert problems(edit(BASE, **{"export.k8s": full})) == []


@pytest.mark.parametrize(
    ("data", "path", "message", "hint"),
    [
        (
            edit(BASE, **{"export.k8s.netwrk": "host"}),
            "export.k8s.netwrk",
            "unknown key 'netwrk'",
            "did you mean 'network'?",
        ),
        (edit(BASE, **{"export.k9s": {}}), "export.k9s", "unknown key 'k9s'", "did you mean 'k8s'?"),
        (
            edit(BASE, **{"export.k8s.image": "-x"}),
            "export.k8s.image",
            "'-x' is not a container image reference",
            None,
        ),
        (
            edit(BASE, **{"export.k8s.namespace": "Prod"}),
            "export.k8s.namespace",
            "'Prod' is not a Kubernetes name",
            None,
        ),
        (
            edit(BASE, **{"export.k8s.secret": "a_b"}),
            "export.k8s.secret",
            "'a_b' is not a Kubernetes name",
            None,
        ),
        (
            edit(BASE, **{"export.k8s.network": "Roce Net"}),
            "export.k8s.network",
            "'Roce Net' is not a network",
            None,
        ),
        (
            edit(BASE, **{"export.k8s.rdma_resource": "rdma"}),
            "export.k8s.rdma_resource",
            "'rdma' is not a Kubernetes name",
            None,
        ),
        (
            edit(BASE, **{"export.k8s.model_mount": "models"}),
            "export.k8s.model_mount",
            "'models' is not an absolute path",
            None,
        ),
        (
            edit(BASE, **{"export.k8s.model_mount": "/data"}),
            "export.k8s.model_mount",
            "does not hold /models/m",
            None,
        ),
        (
            edit(BASE, **{"export.k8s.endpoint_image": "r:1"}),
            "export.k8s.endpoint_image",
            "is only used with an endpoint",
            None,
        ),
        (
            edit(DOCKER, **{"export.k8s.image": "r:1"}),
            "export.k8s.image",
            "is only used with runtime venv",
            None,
        ),
        (
            edit(BASE, **{"export.k8s.model_claim": 3}),
            "export.k8s.model_claim",
            "expected a string, got an integer",
            None,
        ),
    ],
)
def test_a_bad_section_is_refused_with_its_place(
    data: dict[str, Any], path: str, message: str, hint: str | None
) -> None:
    (found,) = problems(data)
    assert found[:2] == (path, message)
    assert found[2] is not None and (hint is None or found[2] == hint)


def test_a_mount_holding_every_model_is_fine() -> None:
    assert problems(edit(BASE, **{"export.k8s.model_mount": "/models/"})) == []
    assert problems(edit(BASE, **{"export.k8s.model_mount": "/"})) == []
    (found,) = problems(edit(BASE, **{"export.k8s.model_mount": "/models/m2"}))
    assert found[1] == "does not hold /models/m"
