"""`check`'s comparisons, one module per area: each turns what the nodes report into rows. Pure.

A row holds every node's value; it fails when the values differ where they must not (or
differ from the spec), and says how to fix it. `report` has the Row and Report values and
the two comparisons (`same`, `each`); a new kind of row goes in the module of its area.
"""

from launcher.core.checks.env import env_rows
from launcher.core.checks.hosts import host_rows
from launcher.core.checks.install import catalog_rows, image_release_row, vllm_rows
from launcher.core.checks.memory import memory_rows
from launcher.core.checks.model import model_rows, planned_model_rows
from launcher.core.checks.network import network_rows
from launcher.core.checks.probe import AGREE, probe_rows
from launcher.core.checks.regressions import regression_rows
from launcher.core.checks.report import Report, Row, each, same

__all__ = [
    "AGREE",
    "Report",
    "Row",
    "catalog_rows",
    "each",
    "env_rows",
    "host_rows",
    "image_release_row",
    "memory_rows",
    "model_rows",
    "network_rows",
    "planned_model_rows",
    "probe_rows",
    "regression_rows",
    "same",
    "vllm_rows",
]
