"""`check`'s comparisons, one module per area: each turns what the nodes report into rows. Pure.

A row holds every node's value; it fails when the values differ where they must not (or
differ from the spec), and says how to fix it. `report` has the Row and Report values and
the two comparisons (`same`, `each`); a new kind of row goes in the module of its area.
"""

from launcher.core.checks.check_report import Report, Row, each, same
from launcher.core.checks.env_rows import env_rows
from launcher.core.checks.hosts_rows import host_rows
from launcher.core.checks.install_rows import catalog_rows, image_release_row, rules_row, vllm_rows
from launcher.core.checks.memory_rows import memory_rows
from launcher.core.checks.model_rows import model_rows, planned_model_rows
from launcher.core.checks.network_rows import network_rows
from launcher.core.checks.probe_rows import AGREE, probe_rows
from launcher.core.checks.regressions import regression_rows

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
    "rules_row",
    "same",
    "vllm_rows",
]
